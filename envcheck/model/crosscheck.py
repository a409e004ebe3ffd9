"""The cross-checks of a run (``run --crosscheck``), raw: what independent tools measured of the same work and how
each launch ended; nccl-tests' rows are the reference envcheck's collectives are held against."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from envcheck.model.bench import OMIT_DEFAULT, Note, Samples, samples_of
from envcheck.model.facts import check_in
from envcheck.model.node import COLLECTIVES, Launch, RankTiming
from envcheck.outside_json import Int, Json


@dataclass(frozen=True)
class Placement:
    """One placement's columns: time (us), algbw and busbw (GB/s), #wrong (None when N/A)."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: Int | None


@dataclass(frozen=True)
class NcclTestsRow:
    """One size of one collective; ``runs``: how many nccl-tests runs it stands for (``analysis.collectives.medians``)."""

    op: str
    size_bytes: Int
    count: Int
    dtype: str
    out_of_place: Placement
    in_place: Placement
    runs: Int = 1
    busbw_range: tuple[tuple[float, float], tuple[float, float]] | None = None  # (out, in) placement: min, max


TOOLS = ("do_bench_cudagraph", "torch_copy", "torch_distributed_loop", "nccl_tests")
# nccl-tests' eager loop, its CUDA-graph mode (captured buffers registered), and that with registration off.
NCCL_TESTS_MODES = ("eager", "graph", "graph_unregistered")
# Why a planned row was not timed: ``not_run`` (the tool ended first); ``fits_l2`` in older reports.
ROW_SKIPS = ("fits_l2", "not_run")


def _one_outcome(samples: Samples | None, error: str | None, skipped: str | None) -> None:
    if sum(x is not None for x in (samples, error, skipped)) != 1:
        raise ValueError("a cross-check row has samples, an error or a skip reason: exactly one")
    if samples is not None and (not len(samples) or not min(samples) > 0 or not math.isfinite(sum(samples))):
        raise ValueError("cross-check samples must be finite and positive")
    check_in("cross-check skip", skipped, (None, *ROW_SKIPS))


@dataclass(frozen=True)
class KernelTiming:
    """One headline case timed by ``do_bench_cudagraph``: after ``settle_ms``, ``rounds`` calls with ``rep=rep_ms``;
    ``samples_us``: every replay's time per call; ``sets`` and ``kernel``: as the suite's case."""

    gpu: Int
    op: str
    impl: str
    dtype: str
    precision: str
    shape: tuple[Int, ...]
    samples_us: Samples | None = None
    rounds: Int = 0
    rep_ms: float | None = None
    settle_ms: float | None = None
    error: str | None = None
    skipped: str | None = None
    sets: Int = field(default=1, metadata={OMIT_DEFAULT: True})
    kernel: str | None = field(default=None, metadata={OMIT_DEFAULT: True})

    def __post_init__(self) -> None:
        if not isinstance(self.shape, tuple):
            object.__setattr__(self, "shape", tuple(self.shape))
        samples_of(self, "samples_us")
        _one_outcome(self.samples_us, self.error, self.skipped)
        if self.sets < 1:
            raise ValueError("sets must be at least 1")


@dataclass(frozen=True)
class CopyTiming:
    """A plain ``dst.copy_(src)`` between two GPUs: each sample ``calls`` copies between two CUDA events, per call."""

    src: Int
    dst: Int
    size_bytes: Int
    calls: Int = 1
    samples_us: Samples | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        samples_of(self, "samples_us")
        _one_outcome(self.samples_us, self.error, None)
        if self.src == self.dst:
            raise ValueError("a peer copy is between two different GPUs")


@dataclass(frozen=True)
class LoopTiming:
    """``calls`` back-to-back ``torch.distributed`` calls of ``op`` between two events on each rank (a sample per
    call: what a user's loop pays)."""

    op: str
    size_bytes: Int
    ranks: tuple[Int, ...]
    calls: Int = 1
    timings: tuple[RankTiming, ...] = ()
    error: str | None = None
    skipped: str | None = None

    def __post_init__(self) -> None:
        check_in("collective", self.op, COLLECTIVES)
        if self.calls < 1:
            raise ValueError("a loop has at least one call")


@dataclass(frozen=True)
class NcclTestsRun:
    """One nccl-tests run for ``op`` in ``mode`` with ``env`` (NCCL settings); ``rows``: what it printed, parsed."""

    op: str
    mode: str
    argv: tuple[str, ...]
    launch: Launch
    rows: tuple[NcclTestsRow, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    version: str | None = None

    def __post_init__(self) -> None:
        check_in("collective", self.op, COLLECTIVES)
        check_in("nccl-tests mode", self.mode, NCCL_TESTS_MODES)


@dataclass(frozen=True)
class ToolRun:
    """One launch of a tool's worker and how it ended (nccl-tests' are in their ``NcclTestsRun``)."""

    tool: str
    launch: Launch
    gpu: Int | None = None

    def __post_init__(self) -> None:
        check_in("cross-check tool", self.tool, TOOLS)


@dataclass(frozen=True)
class Crosscheck:
    """Every independent measurement of one run (or fleet node); ``settings``: what was asked."""

    kernels: tuple[KernelTiming, ...] = ()
    copies: tuple[CopyTiming, ...] = ()
    loops: tuple[LoopTiming, ...] = ()
    nccl_tests: tuple[NcclTestsRun, ...] = ()
    runs: tuple[ToolRun, ...] = ()
    notes: tuple[Note, ...] = ()
    settings: dict[str, Json] = field(default_factory=dict)
    started: str | None = None
    duration_s: float | None = None

    @staticmethod
    def joined(*parts: Crosscheck) -> Crosscheck:
        """Several parts' cross-checks as one (a run's GPUs and its node): notes once each, times summed."""
        return Crosscheck(
            tuple(k for c in parts for k in c.kernels), tuple(k for c in parts for k in c.copies),
            tuple(k for c in parts for k in c.loops), tuple(k for c in parts for k in c.nccl_tests),
            tuple(k for c in parts for k in c.runs), tuple(dict.fromkeys(n for c in parts for n in c.notes)),
            {k: v for c in parts for k, v in c.settings.items()}, min((c.started for c in parts if c.started),
                                                                       default=None),
            round(sum(c.duration_s or 0.0 for c in parts), 3))
