"""Command line: argparse subcommands mapped to functions, heavy imports inside them.

Every subcommand handler is ``handler(args) -> int`` (the exit status) living in
``envcheck.commands``; it is imported only when its subcommand runs, so ``--help``
and ``--version`` work even when the GPU stack is broken.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from envcheck import __version__
from envcheck.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError


def _csv(value: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def _positive_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not x > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value!r}")
    return x


def _add_lang(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lang", default="en", choices=["en", "zh-CN"], help="report language (default: en)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="envcheck",
        description="Is this GPU machine healthy, how fast is it, and what changed.",
    )
    parser.add_argument("--version", action="version", version=f"envcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("probe", help="facts about the machine, fast (no torch import)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(handler="envcheck.commands.probe:main")

    p = sub.add_parser("check", help="facts plus health checks with fixes (exit 1 when a check fails)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--timeout", type=_positive_float, default=120.0, metavar="S",
                   help="limit for each isolated runtime probe in seconds (default: 120)")
    p.add_argument("--out", metavar="FILE", help="also write the check report JSON to FILE (never overwritten)")
    p.set_defaults(handler="envcheck.commands.check:main")

    p = sub.add_parser("run", help="probes, checks and the benchmark suite; writes a dated report")
    p.add_argument("--quick", action="store_true", help="reduced suite (under a minute on an H100)")
    p.add_argument("--ops", type=_csv, metavar="OPS", help="comma-separated ops (vector_add,relu,matmul,softmax,row_sum)")
    p.add_argument("--sizes", type=_csv, metavar="SIZES",
                   help="comma-separated sizes: elements for vector ops (1024, 2^20, 1M), MxNxK for matmul")
    p.add_argument("--dtypes", type=_csv, metavar="DTYPES", help="comma-separated dtypes (fp32,fp16,bf16)")
    p.add_argument("--device", type=int, default=0, metavar="N", help="CUDA device index (default: 0)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile as a third implementation")
    p.add_argument("--out-dir", default="reports", metavar="DIR", help="where the dated report goes (default: reports)")
    p.add_argument("--format", type=_csv, default=["json", "md", "html"], metavar="FORMATS",
                   help="comma-separated outputs among json,md,html (default: all three; json is always written)")
    p.add_argument("--timeout", type=_positive_float, default=1800.0, metavar="S",
                   help="limit for the whole benchmark subprocess in seconds (default: 1800)")
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.run:main")

    p = sub.add_parser("render", help="regenerate Markdown / HTML from a report JSON (no GPU needed)")
    p.add_argument("report", metavar="REPORT.json")
    p.add_argument("--format", type=_csv, default=["md", "html"], metavar="FORMATS", help="md,html (default: both)")
    p.add_argument("--out", metavar="DIR", help="output folder (default: beside the report)")
    p.add_argument("--force", action="store_true", help="replace existing rendered files")
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.render:main")

    p = sub.add_parser("diff", help="compare two or more reports; the first is the baseline")
    p.add_argument("reports", nargs="+", metavar="REPORT.json")
    p.add_argument("--format", choices=["text", "md", "html", "json"], default="text",
                   help="json: the comparison as data for CI (format in envcheck/compare/export.py)")
    p.add_argument("--out", metavar="FILE", help="write to FILE instead of the terminal (never overwritten)")
    p.add_argument("--fail-on-regression", type=_positive_float, metavar="PCT",
                   help="exit 1 when any significant slowdown exceeds PCT percent")
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.diff:main")

    p = sub.add_parser("history", help="trends of one machine's reports over time")
    p.add_argument("paths", nargs="+", metavar="DIR|REPORT.json")
    p.add_argument("--format", choices=["text", "md", "html"], default="text")
    p.add_argument("--out", metavar="FILE", help="write to FILE instead of the terminal (never overwritten)")
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.history:main")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    module_name, func_name = args.handler.split(":")
    from envcheck.model import ReportError

    try:
        handler = getattr(importlib.import_module(module_name), func_name)
        return int(handler(args))
    except (UsageError, ReportError) as e:
        print(f"envcheck {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"envcheck {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
