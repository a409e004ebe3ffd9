"""The cross-checks of a run (``envcheck run --crosscheck``): what independent tools measured, raw.

Beside envcheck's own numbers, in the same run, other tools time the same work:

- ``do_bench_cudagraph``: ``triton.testing.do_bench_cudagraph`` on the headline single-GPU cases
  (``KernelTiming``: every graph replay's time per call, rounds one after the other);
- ``torch_copy``: a plain ``dst.copy_(src)`` between two GPUs, timed with CUDA events (``CopyTiming``);
- ``torch_distributed_loop``: back-to-back ``torch.distributed`` calls between two CUDA events in every
  rank of the node's sweep, at each size the sweep measured (``LoopTiming``);
- ``nccl_tests``: nccl-tests' binaries in each mode (``NcclTestsRun``: its rows as it printed them).

``runs``: how each launch of a tool's worker ended (a hung or failing tool is a finding, with the
tail of its stderr, redacted); ``notes``: why a cross-check did not apply (no CUDA, Triton's
interpreter, nccl-tests not found), keys and parameters. Ratios, bars and verdicts are the
analysis's (``envcheck.analysis.crosscheck``): nothing here compares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from envcheck.model.bench import Note, Samples
from envcheck.model.node import COLLECTIVES, Launch, RankTiming
from envcheck.model.reference import NcclTestsRow

TOOLS = ("do_bench_cudagraph", "torch_copy", "torch_distributed_loop", "nccl_tests")
# nccl-tests' modes (crosscheck/nccl_tests_run.py runs them; analysis/crosscheck.py pairs them): its eager loop,
# its CUDA-graph mode with NCCL's defaults (buffers of a captured graph registered), and with registration off.
NCCL_TESTS_MODES = ("eager", "graph", "graph_unregistered")
# Why a planned cross-check row was not timed: ``not_run`` (planned; the tool ended before it); ``fits_l2`` in
# reports before the counterpart rotated the suite's sets of buffers (a case L2 could hold was not compared).
ROW_SKIPS = ("fits_l2", "not_run")


def _one_outcome(samples: Samples | None, error: str | None, skipped: str | None) -> None:
    if sum(x is not None for x in (samples, error, skipped)) != 1:
        raise ValueError("a cross-check row has samples, an error or a skip reason: exactly one")
    if samples is not None and (not len(samples) or not min(samples) > 0 or not math.isfinite(sum(samples))):
        raise ValueError("cross-check samples must be finite and positive")
    if skipped is not None and skipped not in ROW_SKIPS:
        raise ValueError(f"unknown cross-check skip {skipped!r}")


def _samples(obj: object, name: str = "samples_us") -> Samples | None:
    v = getattr(obj, name)
    if v is not None and not isinstance(v, Samples):
        object.__setattr__(obj, name, v := Samples(v))
    return v


@dataclass(frozen=True)
class KernelTiming:
    """One headline case of GPU ``gpu`` (the machine's index) timed by ``do_bench_cudagraph``: after one
    untimed call of it over ``settle_ms`` (the GPU's clocks settle, as envcheck's timer settles), ``rounds``
    calls with ``rep=rep_ms`` and ``return_mode="all"``; ``samples_us`` are every replay's time per call.
    ``sets``: the sets of buffers each call cycled through, as the suite's case did (L2 kept cold alike);
    ``kernel``: the Triton kernel and tile it timed (the suite's race winner, pinned)."""

    gpu: int
    op: str
    impl: str
    dtype: str
    precision: str
    shape: tuple[int, ...]
    samples_us: Samples | None = None
    rounds: int = 0
    rep_ms: float | None = None
    settle_ms: float | None = None
    error: str | None = None
    skipped: str | None = None
    sets: int = 1
    kernel: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.shape, tuple):
            object.__setattr__(self, "shape", tuple(self.shape))
        _one_outcome(_samples(self), self.error, self.skipped)
        if self.sets < 1:
            raise ValueError("sets must be at least 1")


@dataclass(frozen=True)
class CopyTiming:
    """A plain ``dst.copy_(src)`` of ``size_bytes`` from GPU ``src`` to GPU ``dst`` (machine indices) on the
    source's stream: each sample one loop of ``calls`` copies back to back between two CUDA events, divided
    by ``calls``."""

    src: int
    dst: int
    size_bytes: int
    calls: int = 1
    samples_us: Samples | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        _one_outcome(_samples(self), self.error, None)
        if self.src == self.dst:
            raise ValueError("a peer copy is between two different GPUs")


@dataclass(frozen=True)
class LoopTiming:
    """``calls`` back-to-back ``torch.distributed`` calls of ``op`` at nccl-tests' size ``size_bytes`` between
    two CUDA events (the host clock on the CPU) on each rank of ``ranks``: each of a rank's samples is one
    such loop divided by ``calls``, what a user's loop pays per call. ``error``: the loop's exception;
    ``skipped``: why it did not run (``out_of_memory`` on some rank)."""

    op: str
    size_bytes: int
    ranks: tuple[int, ...]
    calls: int = 1
    timings: tuple[RankTiming, ...] = ()
    error: str | None = None
    skipped: str | None = None

    def __post_init__(self) -> None:
        if self.op not in COLLECTIVES:
            raise ValueError(f"unknown collective {self.op!r}")
        if self.calls < 1:
            raise ValueError("a loop has at least one call")


@dataclass(frozen=True)
class NcclTestsRun:
    """One nccl-tests binary (``argv[0]``, its name) run for collective ``op`` in ``mode``
    (``NCCL_TESTS_MODES``) on the node's GPUs, with ``env`` (the NCCL settings it was given beyond the
    environment); ``rows``: what it printed, parsed (``envcheck.node.nccl_tests``); ``version``: its header's."""

    op: str
    mode: str
    argv: tuple[str, ...]
    launch: Launch
    rows: tuple[NcclTestsRow, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    version: str | None = None

    def __post_init__(self) -> None:
        if self.op not in COLLECTIVES:
            raise ValueError(f"unknown collective {self.op!r}")
        if self.mode not in NCCL_TESTS_MODES:
            raise ValueError(f"unknown nccl-tests mode {self.mode!r}")


@dataclass(frozen=True)
class ToolRun:
    """One launch of a tool's isolated worker (``tool`` one of ``TOOLS``; ``gpu``: the GPU it ran on, where
    it ran on one) and how it ended; nccl-tests' launches are in their ``NcclTestsRun``."""

    tool: str
    launch: Launch
    gpu: int | None = None

    def __post_init__(self) -> None:
        if self.tool not in TOOLS:
            raise ValueError(f"unknown cross-check tool {self.tool!r}")


@dataclass(frozen=True)
class Crosscheck:
    """Every independent measurement of one run (or one fleet node), with how each tool's launch ended
    and why a cross-check did not apply (``notes``). ``settings``: what was asked (sizes, rounds, limits)."""

    kernels: tuple[KernelTiming, ...] = ()
    copies: tuple[CopyTiming, ...] = ()
    loops: tuple[LoopTiming, ...] = ()
    nccl_tests: tuple[NcclTestsRun, ...] = ()
    runs: tuple[ToolRun, ...] = ()
    notes: tuple[Note, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    started: str | None = None
    duration_s: float | None = None

    @staticmethod
    def joined(*parts: Crosscheck) -> Crosscheck:
        """Several parts' cross-checks as one (a run's GPUs and its node; a fleet node's ranks and its leader):
        every measurement and run, the notes once each, the settings together, the first start, the summed time."""
        return Crosscheck(
            tuple(k for c in parts for k in c.kernels), tuple(k for c in parts for k in c.copies),
            tuple(k for c in parts for k in c.loops), tuple(k for c in parts for k in c.nccl_tests),
            tuple(k for c in parts for k in c.runs), tuple(dict.fromkeys(n for c in parts for n in c.notes)),
            {k: v for c in parts for k, v in c.settings.items()}, min((c.started for c in parts if c.started),
                                                                       default=None),
            round(sum(c.duration_s or 0.0 for c in parts), 3))
