"""Command line: argparse subcommands mapped to functions, heavy imports inside them.

Every subcommand handler is ``handler(args) -> int`` (the exit status) living in
``envcheck.commands``; it is imported only when its subcommand runs, so ``--help``
and ``--version`` work even when the GPU stack is broken.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from envcheck import __version__
from envcheck.errors import EXIT_INTERRUPTED, EXIT_USAGE, UsageError
from envcheck.ops import ops_help


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
    # float() reads "inf" and "nan": a time limit of either would never stop anything.
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"must be a finite positive number: {value!r}")
    return x


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``envcheck run: error: ...`` and exit status 2, without
    the usage block (``--help`` shows it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _fraction(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0 <= x < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1): {value!r}")
    return x


def _index(value: str) -> int:
    if not value.strip().isdigit():
        raise argparse.ArgumentTypeError(f"not a GPU index: {value!r}")
    return int(value)


def _repeat(value: str) -> int:
    if not value.strip().isdigit() or not 1 <= int(value) <= 20:
        raise argparse.ArgumentTypeError(f"must be a whole number of repeats from 1 to 20: {value!r}")
    return int(value)


def _gpus(value: str) -> str:
    """``--gpus``: its form is checked here, before any work; which GPUs exist, once probed."""
    from envcheck.bench.parallel import parse_gpus

    text = value.strip().lower()
    try:
        parse_gpus(text, 1 << 16)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--gpus: ")) from None
    return text


def _add_lang(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lang", default="en", choices=["en", "zh-CN"], help="report language (default: en)")


def _add_anonymize(p: argparse.ArgumentParser) -> None:
    p.add_argument("--anonymize", action="store_true",
                   help="replace host name, user names, home paths, IP addresses, GPU UUIDs and serials with stable "
                        "pseudonyms (the same machine keeps the same ones), for sharing")


def _add_crosscheck(p: argparse.ArgumentParser) -> None:
    p.add_argument("--crosscheck", action="store_true",
                   help="after the measurements, time the same work with independent tools in the same run "
                        "(triton.testing.do_bench_cudagraph on each GPU's headline cases; with --gpus a plain torch "
                        "copy, a plain torch.distributed loop, and nccl-tests from $NCCL_TESTS_DIR or PATH in its "
                        "eager and CUDA-graph modes); the report shows every ratio and its bar, and a ratio outside "
                        "its bar fails the run")


def _add_report_outputs(p: argparse.ArgumentParser, what: str = "the dated report goes") -> None:
    """``--out-dir`` and ``--format`` of a command that writes a dated report (run, bench, burn, fleet)."""
    p.add_argument("--out-dir", metavar="DIR",
                   help=f"where {what} (default: ~/.local/share/envcheck/reports, or $ENVCHECK_REPORTS_DIR: never "
                        "inside a source tree)")
    p.add_argument("--format", type=_csv, default=["json", "md", "html"], metavar="FORMATS",
                   help="comma-separated outputs among json,md,html,junit,prometheus (default: json,md,html; json "
                        "is always written; junit: <name>.junit.xml for CI, prometheus: <name>.prom for node_exporter)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="envcheck",
        description="Is this GPU machine healthy, how fast is it, and what changed.",
    )
    parser.add_argument("--version", action="version", version=f"envcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("probe", help="facts about the machine, fast (no torch import)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--replay", metavar="SNAPSHOT", help="probe the machine recorded by envcheck snapshot instead")
    p.set_defaults(handler="envcheck.commands.probe:main")

    p = sub.add_parser("check", help="facts plus health checks with fixes (exit 1 when a check fails)")
    p.add_argument("--format", choices=["text", "json", "junit", "prometheus", "health"], default="text",
                   help="text (default), json, junit (XML for CI), prometheus (a node_exporter textfile) or health "
                        "(one line for Slurm and node-problem-detector: OK, or [node_problem] <reason>)")
    p.add_argument("--slurm-drain", action="store_true",
                   help="with --format health: drain this node in Slurm (scontrol update ... State=DRAIN "
                        "Reason=...) when a check fails (not with --replay: the findings are another machine's)")
    p.add_argument("--timeout", type=_positive_float, default=120.0, metavar="S",
                   help="limit for each isolated runtime probe in seconds (default: 120)")
    p.add_argument("--out", metavar="FILE", help="also write the check report JSON to FILE (never overwritten)")
    p.add_argument("--replay", metavar="SNAPSHOT", help="check the machine recorded by envcheck snapshot instead")
    _add_anonymize(p)
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.check:main")

    p = sub.add_parser("snapshot", help="record what the probes read on this machine, to replay anywhere")
    p.add_argument("--out", metavar="FILE", help="where to write it (default: envcheck-snapshot-<host>-<time>.json; "
                                                 "never overwritten)")
    _add_anonymize(p)
    p.add_argument("--timeout", type=_positive_float, default=120.0, metavar="S",
                   help="limit for each isolated runtime probe in seconds (default: 120)")
    p.set_defaults(handler="envcheck.commands.snapshot:main")

    p = sub.add_parser("run", help="probes, checks and the benchmark suite; writes a dated report")
    p.add_argument("--quick", action="store_true",
                   help="reduced suite and shorter sampling (under a minute on an H100); with --sizes, "
                        "those sizes with the quick sampling")
    p.add_argument("--ops", type=_csv, metavar="OPS", help=f"comma-separated ops or groups ({ops_help()})")
    p.add_argument("--sizes", type=_csv, metavar="SIZES",
                   help="comma-separated sizes: elements for vector ops (1024, 2^20, 1M), MxNxK for matmul")
    p.add_argument("--dtypes", type=_csv, metavar="DTYPES", help="comma-separated dtypes (fp32,fp16,bf16)")
    p.add_argument("--device", type=int, default=0, metavar="N",
                   help="CUDA device index (default: 0); an index this machine lacks is an error")
    p.add_argument("--gpus", type=_gpus, metavar="all|0,2",
                   help="the suite on several GPUs at once, one worker each, then the node tests (topology, "
                        "peer copies, collectives); outliers flagged against their siblings")
    p.add_argument("--outlier-margin", type=_fraction, default=0.05, metavar="F",
                   help="with --gpus: a GPU this fraction below its siblings' median is an outlier (default: 0.05)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile as a third implementation")
    p.add_argument("--interpret", action="store_true",
                   help="on a machine without a GPU: envcheck's Triton kernels beside PyTorch under Triton's CPU "
                        "interpreter, at small shapes, judged for accuracy (slow; times mean nothing)")
    p.add_argument("--burn", type=_positive_float, metavar="M",
                   help="after the suite, burn the same GPUs for M minutes each (as envcheck burn)")
    p.add_argument("--repeat", type=_repeat, default=1, metavar="N",
                   help="N independent repeats of every case in one report, each a fresh worker, in interleaved "
                        "passes; diffs then measure run-to-run noise from them (default: 1; one GPU only)")
    # The names of model.bench.CONTROLS, spelt out: importing the model here would cost every
    # command (and --help) a quarter of a second (a test keeps the two lists equal).
    p.add_argument("--control", choices=["vector_add_extra_bytes"], metavar="NAME",
                   help="the diff's positive control: vector_add_extra_bytes makes envcheck's Triton vector add "
                        "move 4%% more bytes (recorded in the report; never for real measurements)")
    p.add_argument("--no-jax", action="store_true", help="skip JAX (measured where jax is installed)")
    _add_crosscheck(p)
    _add_report_outputs(p)
    p.add_argument("--timeout", type=_positive_float, default=1800.0, metavar="S",
                   help="limit for the whole benchmark subprocess in seconds (default: 1800)")
    _add_anonymize(p)
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.run:main")

    p = sub.add_parser("burn", help="burn-in: every selected GPU under sustained load at once (GEMM at the power "
                                     "limit with SDC checks, streaming, memory test), telemetry, verdicts")
    p.add_argument("--minutes", type=_positive_float, default=3.0, metavar="M",
                   help="minutes of load per GPU, all GPUs at once (default: 3)")
    p.add_argument("--gpus", type=_gpus, default="all", metavar="all|0,2", help="which GPUs (default: all)")
    p.add_argument("--cpu", action="store_true", help="burn the CPU at tiny sizes instead (CI; no GPU needed)")
    p.add_argument("--control", choices=["slow_gemm", "flip_bit"], metavar="NAME",
                   help="a positive control of the verdicts on one GPU, recorded in the report (never for real "
                        "burns): slow_gemm makes its GEMM 10%% slower, flip_bit flips one bit of one GEMM output; "
                        "that GPU must fail and the others pass")
    p.add_argument("--control-gpu", type=int, metavar="N", help="the GPU --control runs on (default: the first)")
    _add_anonymize(p)
    _add_report_outputs(p)
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.burn:main")

    p = sub.add_parser("bench", help="your own ops (declared with envcheck.userbench.Op), measured and "
                                      "reported like the built-in suite")
    p.add_argument("source", metavar="FILE.py|module:object", help="the file or object declaring the ops")
    p.add_argument("--quick", action="store_true", help="shorter sampling")
    p.add_argument("--device", type=int, default=0, metavar="N", help="CUDA device index (default: 0)")
    _add_report_outputs(p)
    p.add_argument("--timeout", type=_positive_float, default=1800.0, metavar="S",
                   help="limit for the whole benchmark in seconds (default: 1800)")
    p.add_argument("--case-timeout", type=_positive_float, default=300.0, metavar="S",
                   help="a case with no result for this long hangs: it fails, the others go on (default: 300); "
                        "counted once the worker has started (torch imported, device open: up to 300 s of its own)")
    _add_anonymize(p)
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.bench:main")

    p = sub.add_parser("fleet", help="every rank of a torchrun / srun launch: per-GPU suites, node tests, "
                                      "collectives across all nodes; rank 0 writes one fleet report")
    p.add_argument("--baseline", metavar="FILE", help="judge each node against this report (default: the fleet median)")
    p.add_argument("--rule", action="append", metavar="METRIC:higher|lower:MARGIN",
                   help="a verdict rule (repeatable), e.g. node.all_reduce:higher:0.1; default rules otherwise")
    p.add_argument("--full", action="store_true", help="the full per-GPU suite (default: the quick one)")
    p.add_argument("--ops", type=_csv, metavar="OPS", help="per-GPU suite ops, as for run")
    p.add_argument("--sizes", type=_csv, metavar="SIZES", help="per-GPU suite sizes, as for run")
    p.add_argument("--dtypes", type=_csv, metavar="DTYPES", help="per-GPU suite dtypes, as for run")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile in the per-GPU suite")
    p.add_argument("--sweep-sizes", metavar="LO..HI|S,S",
                   help="collective sizes as nccl-tests' S (default: 1M..4G, times 4; on the CPU 64K..4M)")
    p.add_argument("--iters", type=int, metavar="N",
                   help="timed calls per collective and size (default: 20; on the CPU 5)")
    p.add_argument("--warmup", type=int, metavar="N", help="warm-up calls (default: 5; on the CPU 2)")
    p.add_argument("--no-world", action="store_true", help="skip the collectives across all nodes")
    p.add_argument("--no-narrow", action="store_true", help="skip narrowing a slow collective to a rank, link or node")
    p.add_argument("--cpu", action="store_true", help="collectives on gloo with CPU tensors (CI; no GPU needed)")
    _add_crosscheck(p)
    p.add_argument("--timeout", type=_positive_float, default=900.0, metavar="S",
                   help="limit for each rank's per-GPU suite (default: 900)")
    p.add_argument("--rank-timeout", type=_positive_float, default=900.0, metavar="S",
                   help="how long rank 0 waits for each rank after its own part (default: 900)")
    p.add_argument("--world-timeout", type=_positive_float, default=600.0, metavar="S",
                   help="limit for the collectives across all nodes (default: 600)")
    p.add_argument("--join-timeout", type=_positive_float, default=120.0, metavar="S",
                   help="how long ranks wait to join and for rank 0's store (default: 120)")
    _add_report_outputs(p, "rank 0 writes the fleet report")
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.fleet:main")

    p = sub.add_parser("render", help="regenerate Markdown / HTML from a report JSON (no GPU needed)")
    p.add_argument("report", metavar="REPORT.json")
    p.add_argument("--format", type=_csv, default=["md", "html"], metavar="FORMATS",
                   help="md,html (default: both); also junit, prometheus, png (each chart, into <stem>_charts/)")
    p.add_argument("--out", metavar="DIR", help="output folder (default: beside the report)")
    p.add_argument("--force", action="store_true", help="replace existing rendered files")
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.render:main")

    p = sub.add_parser("export", help="a saved report for CI, Prometheus or a scheduler's health check")
    p.add_argument("report", metavar="REPORT.json")
    p.add_argument("--format", choices=["junit", "prometheus", "health"], required=True,
                   help="junit (XML for CI), prometheus (node_exporter textfile), health (one line and an exit "
                        "status for Slurm and node-problem-detector)")
    p.add_argument("--out", metavar="FILE",
                   help="write to FILE instead of stdout (junit: never overwritten; prometheus: replaced whole, "
                        "as node_exporter's textfile collector expects)")
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.export:main")

    p = sub.add_parser("diff", help="compare two or more reports; the first is the baseline",
                       epilog="exit status: 0 compared (and with --fail-on-regression, no regression); 1 a regression; "
                              "2 bad options or a file that is not a usable report; 3 with --fail-on-regression, "
                              "nothing compared (no row judged against run-to-run noise: no verdict)")
    p.add_argument("reports", nargs="+", metavar="REPORT.json")
    p.add_argument("--format", choices=["text", "md", "html", "json"], default="text",
                   help="json: the comparison as data for CI (format in envcheck/compare/export.py)")
    p.add_argument("--out", metavar="FILE", help="write to FILE instead of the terminal (never overwritten)")
    p.add_argument("--fail-on-regression", type=_positive_float, metavar="PCT",
                   help="exit 1 when any significant slowdown exceeds PCT percent, 3 when no row could be judged")
    p.add_argument("--gpu", type=_index, metavar="N",
                   help="reports of several GPUs (run --gpus, fleet): compare GPU N's suite of each "
                        "(default: each report's first)")
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.diff:main")

    p = sub.add_parser("history", help="trends of one machine's reports over time")
    p.add_argument("paths", nargs="*", metavar="DIR|REPORT.json",
                   help="report files or folders (default: the folder envcheck run writes to)")
    p.add_argument("--format", choices=["text", "md", "html"], default="text")
    p.add_argument("--out", metavar="FILE", help="write to FILE instead of the terminal (never overwritten)")
    _add_lang(p)
    p.set_defaults(handler="envcheck.commands.history:main")
    return parser


class _Guarded:
    """A standard stream while a command runs: a write that fails (the reader went away, a full disk, a
    closed descriptor) ends that stream's output, never the command, whose exit status stays its own.
    Characters the stream's encoding lacks (``PYTHONIOENCODING=ascii``) are written as escapes."""

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
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    module_name, func_name = args.handler.split(":")
    from envcheck.model import ReportError
    from envcheck.model.codec import gc_paused

    try:
        handler = getattr(importlib.import_module(module_name), func_name)
        # A command lives seconds to minutes and makes no cycles worth collecting, while the
        # collector would walk every object of a large report again and again (a third of a
        # 20,000-case diff): reference counting frees what a command drops.
        with gc_paused():
            return int(handler(args))
    except (UsageError, ReportError) as e:
        from envcheck.render.escape import visible

        print(visible(f"envcheck {args.command}: error: {e}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"envcheck {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
