"""Command line: ``envcheck NAME`` runs ``envcheck.commands.NAME.main(options)`` with typed options; a command's
module is imported only when it runs, so ``--help`` and ``--version`` work when the GPU stack is broken.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from envcheck import __version__
from envcheck.commands.options import COMMANDS
from envcheck.errors import EXIT_INTERRUPTED, EXIT_USAGE, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``envcheck run: error: ...``, exit status 2), without the usage block."""

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
        p = sub.add_parser(name, help=cls.__doc__, epilog=getattr(cls, "epilog", None))
        for f in dataclasses.fields(cls):
            kw = {k: v for k, v in f.metadata.items() if k != "positional"}
            if f.default is not dataclasses.MISSING:
                kw["default"] = f.default
            p.add_argument(f.name if f.metadata.get("positional") else "--" + f.name.replace("_", "-"), **kw)
    return parser


def typed(args: argparse.Namespace) -> object:
    """The command's options as its dataclass: the one place a Namespace is read."""
    cls = COMMANDS[args.command]
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def parse(argv: Sequence[str]) -> object:
    return typed(build_parser().parse_args(argv))


class _Guarded:
    """A standard stream while a command runs: a failed write ends that stream's output, never the command;
    characters the stream's encoding lacks are written as escapes."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.lost: OSError | ValueError | None = None
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]

    def write(self, text: str) -> int:
        self._do(lambda s: s.write(text))
        return len(text)

    def flush(self) -> None:
        self._do(lambda s: s.flush())

    def isatty(self) -> bool:
        return self.lost is None and self.stream is not None and self.stream.isatty()

    def _do(self, op: Callable[[TextIO], object]) -> None:
        if self.lost is not None:
            return
        try:
            if self.stream is None:
                raise OSError(errno.EBADF, "closed")
            op(self.stream)
        except (OSError, ValueError) as e:
            self.lost = e
            with contextlib.suppress(AttributeError, ValueError, OSError):  # the interpreter's last flush too
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self.stream.fileno())  # type: ignore[union-attr]
                os.close(null)

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    for fd in (0, 1, 2):  # closed (``>&-``): a file opened later must not take the number children write to
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)
    streams = sys.stdout, sys.stderr
    out = _Guarded(sys.stdout)
    sys.stdout, sys.stderr = out, _Guarded(sys.stderr)  # type: ignore[assignment]
    command = "envcheck"
    import envcheck.render.i18n  # noqa: F401 - says the errors of every layer (errors.say), the parser's too
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        command = f"envcheck {args.command or ''}".strip()
        status = _run(parser, args)
    finally:  # --help and argparse's errors included
        out.flush()
        sys.stdout, sys.stderr = streams
    if out.lost is not None and not isinstance(out.lost, BrokenPipeError):  # the reader's choice (``| head``): silent
        why = getattr(out.lost, "strerror", None) or out.lost
        with contextlib.suppress(OSError, ValueError, AttributeError):
            print(f"{command}: standard output not written ({why}); exit status {status}", file=sys.stderr)
    return status


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    from envcheck.harness.signals import as_interrupt, stop_signals
    from envcheck.model import ReportError
    from envcheck.model.codec import gc_paused
    from envcheck.render.escape import visible
    from envcheck.render.i18n import DEFAULT_LANG, language, t

    with language(getattr(args, "lang", None) or DEFAULT_LANG):  # once per command, its errors included
        try:
            handler = importlib.import_module(f"envcheck.commands.{args.command}").main
            # A command makes no cycles worth collecting, while the collector would walk a large report again and
            # again. SIGTERM and SIGHUP end it as Ctrl-C does: its children go first.
            with gc_paused(), stop_signals(as_interrupt):
                return int(handler(typed(args)))
        except (UsageError, ReportError) as e:
            print(visible(t("cli.error", command=args.command, error=e)), file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print(t("cli.interrupted", command=args.command), file=sys.stderr)
            return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
