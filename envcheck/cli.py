"""Command line: ``envcheck NAME`` runs ``envcheck.commands.NAME.main(options)`` with the options typed
(commands/options.py); a command's module is imported only when it runs, so ``--help`` and ``--version``
work even when the GPU stack is broken.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from envcheck import __version__
from envcheck.commands.options import COMMANDS
from envcheck.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``envcheck run: error: ...`` and exit status 2, without
    the usage block (``--help`` shows it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand's options from its dataclass in commands/options.py."""
    parser = _Parser(
        prog="envcheck",
        description="Is this GPU machine healthy, how fast is it, and what changed.",
    )
    parser.add_argument("--version", action="version", version=f"envcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, cls in COMMANDS.items():
        p = sub.add_parser(name, help=cls.__doc__)
        for f in dataclasses.fields(cls):
            kw = {k: v for k, v in f.metadata.items() if k != "positional"}
            if f.default is not dataclasses.MISSING:
                kw["default"] = f.default
            p.add_argument(f.name if f.metadata.get("positional") else "--" + f.name.replace("_", "-"), **kw)
    return parser


def typed(args: argparse.Namespace) -> Any:
    """The command's options as its dataclass: the one place a Namespace is read."""
    cls = COMMANDS[args.command]
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def parse(argv: Sequence[str]) -> Any:
    return typed(build_parser().parse_args(argv))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command
    if not command:
        parser.print_help()
        return EXIT_USAGE
    from envcheck.model import ReportError
    from envcheck.model.codec import gc_paused

    try:
        handler = importlib.import_module(f"envcheck.commands.{command}").main
        # A command lives seconds to minutes and makes no cycles worth collecting, while the
        # collector would walk every object of a large report again and again (a third of a
        # 20,000-case diff): reference counting frees what a command drops.
        with gc_paused():
            return int(handler(typed(args)))
    except (UsageError, ReportError) as e:
        from envcheck.render.escape import visible

        print(visible(f"envcheck {command}: error: {e}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"envcheck {command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
