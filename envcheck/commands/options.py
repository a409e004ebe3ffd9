"""Each command's options as one frozen dataclass whose fields are also its ``add_argument`` calls (cli.py builds
the parser from them). Stdlib only: ``--help`` must work when the GPU stack is broken.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field
from typing import Any, ClassVar

from envcheck.errors import UsageError
from envcheck.ops import ops_help

# What opt() gives is a dataclass field standing for a default of any type, as ``dataclasses.field`` is typed.
Field = Any


def opt(help: str | None = None, default: object = None, **kw: object) -> Field:
    """An option ``--field-name``: ``kw`` are its ``add_argument`` keywords; ``required`` ones have no default."""
    return field(default=MISSING if kw.get("required") else default, metadata={"help": help, **kw})


def flag(help: str) -> Field:
    return opt(help, False, action="store_true")


def arg(help: str | None = None, **kw: object) -> Field:
    """A positional argument named as its field."""
    return field(metadata={"positional": True, "help": help, **kw})


def _csv(value: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def _float_in(within: Callable[[float], bool], what: str) -> Callable[[str], float]:
    def parse(value: str) -> float:
        try:
            x = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
        # float() reads "inf" and "nan": a time limit of either would never stop anything.
        if not (math.isfinite(x) and within(x)):
            raise argparse.ArgumentTypeError(f"must be {what}: {value!r}")
        return x
    return parse


_positive_float = _float_in(lambda x: x > 0, "a finite positive number")
_fraction = _float_in(lambda x: 0 <= x < 1, "a fraction in [0, 1)")


def _index(value: str) -> int:
    if not value.strip().isdigit():
        raise argparse.ArgumentTypeError(f"not a GPU index: {value!r}")
    return int(value)


def _repeat(value: str) -> int:
    if not value.strip().isdigit() or not 1 <= int(value) <= 20:
        raise argparse.ArgumentTypeError(f"must be a whole number of repeats from 1 to 20: {value!r}")
    return int(value)


@dataclass(frozen=True)
class Gpus:
    """``--gpus``: every GPU (``only`` None) or these indices in order; which exist is known once probed."""

    only: tuple[int, ...] | None = None

    def __str__(self) -> str:
        return "all" if self.only is None else ",".join(map(str, self.only))

    @classmethod
    def parse(cls, text: str) -> Gpus:
        text = text.strip().lower()
        if text == "all":
            return cls()
        parts = [p.strip() for p in text.split(",")]
        for p in parts:
            if not p.isdigit():
                raise UsageError("error.gpus_index", value=repr(p))
        return cls(tuple(dict.fromkeys(map(int, parts))))

    def pick(self, count: int) -> tuple[int, ...]:
        """The indices, checked against the ``count`` GPUs present."""
        if self.only is None:
            if count < 1:
                raise UsageError("error.gpus_none")
            return tuple(range(count))
        for i in self.only:
            if not i < count:
                raise UsageError("error.gpus_missing", gpu=i, count=count, have=tuple(range(count)))
        return self.only


def _gpus(value: str) -> Gpus:
    try:
        return Gpus.parse(value)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--gpus: ")) from None


def _lang() -> Field:
    return opt("report language (default: en)", "en", choices=["en", "zh-CN"])


def _anonymize() -> Field:
    return flag("replace host name, user names, home paths, IP addresses, GPU UUIDs and serials with stable "
                "pseudonyms (the same machine keeps the same ones), for sharing")


def _crosscheck() -> Field:
    return flag("after the measurements, time the same work with independent tools in the same run "
                "(triton.testing.do_bench_cudagraph on each GPU's headline cases; with --gpus a plain torch copy, a "
                "plain torch.distributed loop, and nccl-tests from $NCCL_TESTS_DIR or PATH in its eager and "
                "CUDA-graph modes); the report shows every ratio and its bar, and a ratio outside its bar fails the "
                "run")


def _out_dir(what: str = "the dated report goes") -> Field:
    return opt(f"where {what} (default: ~/.local/share/envcheck/reports, or $ENVCHECK_REPORTS_DIR: never inside "
               "a source tree)", metavar="DIR")


def _formats() -> Field:
    return opt("comma-separated outputs among json,md,html,junit,prometheus (default: json,md,html; json is always "
               "written; junit: <name>.junit.xml for CI, prometheus: <name>.prom for node_exporter)",
               ("json", "md", "html"), type=_csv, metavar="FORMATS")


def _seconds(help: str, default: float) -> Field:
    return opt(help, default, type=_positive_float, metavar="S")


def _suite(what: str, metavar: str) -> Field:
    return opt(f"per-GPU suite {what}, as for run", type=_csv, metavar=metavar)


PROBE_TIMEOUT = "limit for each isolated runtime probe in seconds (default: 120)"
OUT_FILE = "write to FILE instead of the terminal (never overwritten)"


@dataclass(frozen=True)
class ProbeOptions:
    """facts about the machine, fast (no torch import)"""

    format: str = opt(None, "text", choices=["text", "json"])
    replay: str | None = opt("probe the machine recorded by envcheck snapshot instead", metavar="SNAPSHOT")
    lang: str = _lang()


@dataclass(frozen=True)
class CheckOptions:
    """facts plus health checks with fixes (exit 1 when a check fails)"""

    format: str = opt("text (default), json, junit (XML for CI), prometheus (a node_exporter textfile) or health (one "
                      "line for Slurm and node-problem-detector: OK, or [node_problem] <reason>)", "text",
                      choices=["text", "json", "junit", "prometheus", "health"])
    slurm_drain: bool = flag("with --format health: drain this node in Slurm (scontrol update ... State=DRAIN "
                             "Reason=...) when a check fails (not with --replay: the findings are another machine's)")
    timeout: float = _seconds(PROBE_TIMEOUT, 120.0)
    out: str | None = opt("also write the check report JSON to FILE (never overwritten)", metavar="FILE")
    replay: str | None = opt("check the machine recorded by envcheck snapshot instead", metavar="SNAPSHOT")
    anonymize: bool = _anonymize()
    lang: str = _lang()


@dataclass(frozen=True)
class SnapshotOptions:
    """record what the probes read on this machine, to replay anywhere"""

    out: str | None = opt("write it to FILE (never overwritten) instead of envcheck-snapshot-<host>-<time>.json in "
                          "the --out-dir folder", metavar="FILE")
    out_dir: str | None = opt("where the snapshot goes (default: ~/.local/share/envcheck/reports, or "
                              "$ENVCHECK_REPORTS_DIR, as every report)", metavar="DIR")
    anonymize: bool = _anonymize()
    timeout: float = _seconds(PROBE_TIMEOUT, 120.0)
    lang: str = _lang()


@dataclass(frozen=True)
class RunOptions:
    """probes, checks and the benchmark suite; writes a dated report"""

    quick: bool = flag("reduced suite and shorter sampling (under a minute on an H100); with --sizes, those sizes "
                       "with the quick sampling")
    ops: tuple[str, ...] | None = opt(f"comma-separated ops or groups, in place of the default ops ({ops_help()}): "
                                      "--ops default,workloads runs both", type=_csv, metavar="OPS")
    sizes: tuple[str, ...] | None = opt("comma-separated sizes: elements for vector ops (1024, 2^20, 1M), MxNxK for "
                                        "matmul", type=_csv, metavar="SIZES")
    dtypes: tuple[str, ...] | None = opt("comma-separated dtypes: fp32,fp16,bf16,tf32 (fp32 times a matmul both as "
                                         "TF32 and as IEEE fp32; tf32 only as TF32)", type=_csv, metavar="DTYPES")
    device: int = opt("CUDA device index (default: 0); an index this machine lacks is an error", 0, type=int,
                      metavar="N")
    gpus: Gpus | None = opt("the suite on several GPUs at once, one worker each, then the node tests (topology, peer "
                            "copies, collectives); outliers flagged against their siblings", type=_gpus,
                            metavar="all|0,2")
    outlier_margin: float = opt("with --gpus: a GPU this fraction below its siblings' median is an outlier (default: "
                                "0.05)", 0.05, type=_fraction, metavar="F")
    no_compile: bool = flag("skip torch.compile as a third implementation")
    interpret: bool = flag("on a machine without a GPU: envcheck's Triton kernels beside PyTorch under Triton's CPU "
                           "interpreter, at small shapes, judged for accuracy (slow; times mean nothing)")
    burn: float | None = opt("after the suite, burn the same GPUs for M minutes each (as envcheck burn)",
                             type=_positive_float, metavar="M")
    repeat: int = opt("N independent repeats of every case in one report, each a fresh worker, in interleaved passes; "
                      "diffs then measure run-to-run noise from them (default: 1; one GPU only)", 1, type=_repeat,
                      metavar="N")
    # model.bench.CONTROLS spelt out, as importing the model would slow --help (a test keeps the two equal).
    control: str | None = opt("the diff's positive control: vector_add_extra_bytes makes envcheck's Triton vector add "
                              "move 4%% more bytes (recorded in the report; never for real measurements)",
                              choices=["vector_add_extra_bytes"], metavar="NAME")
    no_jax: bool = flag("skip JAX (measured where jax is installed)")
    crosscheck: bool = _crosscheck()
    out_dir: str | None = _out_dir()
    format: tuple[str, ...] = _formats()
    timeout: float = _seconds("limit for the whole benchmark subprocess in seconds (default: 1800)", 1800.0)
    anonymize: bool = _anonymize()
    lang: str = _lang()


@dataclass(frozen=True)
class BurnOptions:
    """burn-in: every selected GPU under sustained load at once (GEMM at the power limit with SDC checks,
    streaming, memory test), telemetry, verdicts"""

    minutes: float = opt("minutes of load per GPU, all GPUs at once (default: 3)", 3.0, type=_positive_float,
                         metavar="M")
    gpus: Gpus = opt("which GPUs (default: all)", Gpus(), type=_gpus, metavar="all|0,2")
    cpu: bool = flag("burn the CPU at tiny sizes instead (CI; no GPU needed)")
    control: str | None = opt("a positive control of the verdicts on one GPU, recorded in the report (never for real "
                              "burns): slow_gemm makes its GEMM 10%% slower, flip_bit flips one bit of one GEMM "
                              "output; that GPU must fail and the others pass", choices=["slow_gemm", "flip_bit"],
                              metavar="NAME")
    control_gpu: int | None = opt("the GPU --control runs on (default: the first)", type=int, metavar="N")
    anonymize: bool = _anonymize()
    out_dir: str | None = _out_dir()
    format: tuple[str, ...] = _formats()
    lang: str = _lang()


@dataclass(frozen=True)
class BenchOptions:
    """your own ops (declared with envcheck.userbench.Op), measured and reported like the built-in suite"""

    source: str = arg("the file or object declaring the ops", metavar="FILE.py|module:object")
    quick: bool = flag("shorter sampling")
    device: int = opt("CUDA device index (default: 0)", 0, type=int, metavar="N")
    out_dir: str | None = _out_dir()
    format: tuple[str, ...] = _formats()
    timeout: float = _seconds("limit for the whole benchmark in seconds (default: 1800)", 1800.0)
    case_timeout: float = _seconds("a case with no result for this long hangs: it fails, the others go on (default: "
                                   "300); counted once the worker has started (torch imported, device open: up to "
                                   "300 s of its own)", 300.0)
    anonymize: bool = _anonymize()
    lang: str = _lang()


@dataclass(frozen=True)
class FleetOptions:
    """every rank of a torchrun / srun launch: per-GPU suites, node tests, collectives across all nodes; rank 0
    writes one fleet report"""

    baseline: str | None = opt("judge each node against this report (default: the fleet median)", metavar="FILE")
    rule: list[str] | None = opt("a verdict rule (repeatable), e.g. node.all_reduce:higher:0.1; default rules "
                                 "otherwise", action="append", metavar="METRIC:higher|lower:MARGIN")
    full: bool = flag("the full per-GPU suite (default: the quick one)")
    ops: tuple[str, ...] | None = _suite("ops", "OPS")
    sizes: tuple[str, ...] | None = _suite("sizes", "SIZES")
    dtypes: tuple[str, ...] | None = _suite("dtypes", "DTYPES")
    no_compile: bool = flag("skip torch.compile in the per-GPU suite")
    sweep_sizes: str | None = opt("collective sizes as nccl-tests' S (default: 1M..4G, times 4; on the CPU 64K..4M)",
                                  metavar="LO..HI|S,S")
    iters: int | None = opt("timed calls per collective and size (default: 20; on the CPU 5)", type=int, metavar="N")
    warmup: int | None = opt("warm-up calls (default: 5; on the CPU 2)", type=int, metavar="N")
    no_world: bool = flag("skip the collectives across all nodes")
    no_narrow: bool = flag("skip narrowing a slow collective to a rank, link or node")
    cpu: bool = flag("collectives on gloo with CPU tensors (CI; no GPU needed)")
    crosscheck: bool = _crosscheck()
    timeout: float = _seconds("limit for each rank's per-GPU suite (default: 900)", 900.0)
    rank_timeout: float = _seconds("how long rank 0 waits for each rank after its own part (default: 900)", 900.0)
    world_timeout: float = _seconds("limit for the collectives across all nodes (default: 600)", 600.0)
    join_timeout: float = _seconds("how long ranks wait to join and for rank 0's store (default: 120)", 120.0)
    out_dir: str | None = _out_dir("rank 0 writes the fleet report")
    format: tuple[str, ...] = _formats()
    lang: str = _lang()


@dataclass(frozen=True)
class RenderOptions:
    """regenerate Markdown / HTML from a report JSON (no GPU needed)"""

    report: str = arg(metavar="REPORT.json")
    format: tuple[str, ...] = opt("md,html (default: both); also junit, prometheus, png (each chart, into "
                                  "<stem>_charts/)", ("md", "html"), type=_csv, metavar="FORMATS")
    out: str | None = opt("output folder (default: beside the report)", metavar="DIR")
    force: bool = flag("replace existing rendered files")
    lang: str = _lang()


@dataclass(frozen=True)
class ExportOptions:
    """a saved report for CI, Prometheus or a scheduler's health check"""

    report: str = arg(metavar="REPORT.json")
    format: str = opt("junit (XML for CI), prometheus (node_exporter textfile), health (one line and an exit status "
                      "for Slurm and node-problem-detector)", choices=["junit", "prometheus", "health"], required=True)
    out: str | None = opt("write to FILE instead of stdout (junit: never overwritten; prometheus: replaced whole, as "
                          "node_exporter's textfile collector expects)", metavar="FILE")
    lang: str = _lang()


@dataclass(frozen=True)
class DiffOptions:
    """compare two or more reports; the first is the baseline"""

    epilog: ClassVar[str] = ("exit status: 0 compared (and with --fail-on-regression, no regression); 1 a regression; "
                             "2 bad options or a file that is not a usable report; 3 with --fail-on-regression, "
                             "nothing compared (no row judged against run-to-run noise: no verdict)")

    reports: list[str] = arg(nargs="+", metavar="REPORT.json")
    format: str = opt("json: the comparison as data for CI (format in envcheck/compare/export.py)", "text",
                      choices=["text", "md", "html", "json"])
    out: str | None = opt(OUT_FILE, metavar="FILE")
    fail_on_regression: float | None = opt("exit 1 when any significant slowdown exceeds PCT percent, 3 when no row "
                                           "could be judged", type=_positive_float, metavar="PCT")
    gpu: int | None = opt("reports of several GPUs (run --gpus, fleet): compare GPU N's suite of each (default: each "
                          "report's first)", type=_index, metavar="N")
    lang: str = _lang()


@dataclass(frozen=True)
class HistoryOptions:
    """trends of one machine's reports over time"""

    paths: list[str] = arg("report files or folders (default: the folder envcheck run writes to)", nargs="*",
                           metavar="DIR|REPORT.json")
    format: str = opt(None, "text", choices=["text", "md", "html"])
    out: str | None = opt(OUT_FILE, metavar="FILE")
    lang: str = _lang()


# The subcommands in --help's order; ``envcheck NAME`` runs ``envcheck.commands.NAME.main(options)``.
COMMANDS: dict[str, type] = {
    "probe": ProbeOptions, "check": CheckOptions, "snapshot": SnapshotOptions, "run": RunOptions,
    "burn": BurnOptions, "bench": BenchOptions, "fleet": FleetOptions, "render": RenderOptions,
    "export": ExportOptions, "diff": DiffOptions, "history": HistoryOptions,
}
