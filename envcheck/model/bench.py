"""Benchmark results: what the isolated worker measured on one device."""

from __future__ import annotations

import math
import statistics
import typing
from dataclasses import dataclass, field
from typing import Any


def _quantile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of already sorted values."""
    pos = (len(sorted_xs) - 1) * q
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Timing:
    """Raw samples of one timed region (microseconds per call) and their statistics.

    ``method``: ``cuda_graph`` (graph replay, launch gaps removed), ``cuda_events``
    (eager calls between events: what a Python caller pays) or ``host_clock``
    (CPU baseline, perf_counter around synchronous work).
    """

    method: str
    samples_us: tuple[float, ...]
    calls_per_sample: int = 1
    median_us: float = 0.0
    q1_us: float = 0.0
    q3_us: float = 0.0
    cv: float = 0.0

    @classmethod
    def from_samples(cls, method: str, samples_us: typing.Iterable[float], calls_per_sample: int = 1) -> Timing:
        xs = tuple(float(x) for x in samples_us)
        if not xs:
            raise ValueError("a timing needs at least one sample")
        s = sorted(xs)
        mean = statistics.fmean(xs)
        cv = statistics.pstdev(xs) / mean if mean > 0 and len(xs) > 1 else 0.0
        return cls(method, xs, calls_per_sample, _quantile(s, 0.5), _quantile(s, 0.25), _quantile(s, 0.75), cv)

    @property
    def n(self) -> int:
        return len(self.samples_us)

    @property
    def iqr_us(self) -> float:
        return self.q3_us - self.q1_us


@dataclass(frozen=True)
class NumericError:
    """Error of one output against a float64 reference, judged for the precision used."""

    rel_l2: float
    max_abs: float
    tolerance: float  # bound on rel_l2 for ``precision``
    precision: str  # fp32 | tf32 | fp16 | bf16 : the arithmetic actually used
    passed: bool


@dataclass(frozen=True)
class MonitorSummary:
    """NVML samples taken while a case ran."""

    samples: int
    sm_clock_mhz_min: float | None = None
    sm_clock_mhz_max: float | None = None
    mem_clock_mhz_min: float | None = None
    mem_clock_mhz_max: float | None = None
    temperature_c_max: float | None = None
    power_w_max: float | None = None
    throttle_reasons: tuple[str, ...] = ()  # active clock-event reasons that slow the GPU

    @property
    def throttled(self) -> bool:
        return bool(self.throttle_reasons)


# Case flags
LAUNCH_BOUND = "launch_bound"
L2_RESIDENT = "l2_resident"
THROTTLED = "throttled"
NOISY = "noisy"
FLAGS = (LAUNCH_BOUND, L2_RESIDENT, THROTTLED, NOISY)

CATEGORIES = ("small", "medium", "large", "xlarge")
# Ops judged on FLOP/s against the peak of their precision; every other op is judged on
# bandwidth. A case's pct_theoretical / pct_measured are shares of whichever applies.
COMPUTE_BOUND_OPS = ("matmul",)
IMPLS = ("torch", "triton", "compile")


@dataclass(frozen=True)
class Case:
    """One measured (op, implementation, dtype, precision, shape).

    ``shape``: (n,) for vector ops, (rows, cols) for softmax / row_sum, (M, N, K) for
    matmul. ``status``: ``pass`` (measured, numerically within tolerance), ``fail``
    (measured, error over tolerance), ``error`` (could not compile or run: see
    ``message``). Throughput numbers are derived from ``gpu`` (or ``launch`` when no
    graph time exists) and stored so the JSON reads on its own; ``pct_*`` are shares of the
    FLOP/s peaks for compute-bound ops (``COMPUTE_BOUND_OPS``), of bandwidth for the others.
    """

    op: str
    impl: str
    dtype: str
    precision: str
    shape: tuple[int, ...]
    category: str
    bytes: int
    flops: int
    status: str
    gpu: Timing | None = None
    launch: Timing | None = None
    compile_s: float | None = None
    error: NumericError | None = None
    monitor: MonitorSummary | None = None
    flags: tuple[str, ...] = ()
    message: str | None = None
    tf32: bool = False
    gbps: float | None = None
    tflops: float | None = None
    pct_theoretical: float | None = None
    pct_measured: float | None = None
    speedup: float | None = None  # torch time / this time (GPU time when both have one), same op, dtype, precision, shape
    kernel: str | None = None  # which of envcheck's Triton kernels and tile ran (matmul: the race's winner)

    def __post_init__(self) -> None:
        if self.impl not in IMPLS:
            raise ValueError(f"unknown implementation {self.impl!r}")
        if self.status not in ("pass", "fail", "error"):
            raise ValueError(f"unknown case status {self.status!r}")
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown size category {self.category!r}")
        unknown = set(self.flags) - set(FLAGS)
        if unknown:
            raise ValueError(f"unknown flags {sorted(unknown)}")

    @property
    def key(self) -> tuple[str, str, str, str, tuple[int, ...]]:
        """What identifies a case across reports."""
        return (self.op, self.impl, self.dtype, self.precision, self.shape)

    @property
    def compute_bound(self) -> bool:
        return self.op in COMPUTE_BOUND_OPS

    @property
    def best_time(self) -> Timing | None:
        return self.gpu or self.launch

    @property
    def shape_label(self) -> str:
        return "x".join(str(d) for d in self.shape)


@dataclass(frozen=True)
class Ceiling:
    """A physical limit a case is compared with, and where the number came from.

    ``name``: ``bandwidth`` (GB/s) or a precision (``fp32``, ``tf32``, ``fp16``, ``bf16``:
    TFLOP/s). ``kind``: ``theoretical`` or ``measured``.
    """

    name: str
    kind: str
    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class Skip:
    """A planned case that was not measured, and why (out of memory, no GPU, ...)."""

    op: str
    impl: str
    dtype: str
    shape: tuple[int, ...]
    reason: str
    precision: str | None = None  # the arithmetic the case would have used (tf32 vs fp32 matmul)


@dataclass(frozen=True)
class BenchDevice:
    backend: str  # cuda | cpu
    name: str
    index: int | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_total_bytes: int | None = None
    compute_capability: str | None = None


@dataclass(frozen=True)
class Bench:
    device: BenchDevice
    settings: dict[str, Any] = field(default_factory=dict)
    ceilings: tuple[Ceiling, ...] = ()
    cases: tuple[Case, ...] = ()
    skipped: tuple[Skip, ...] = ()
    notes: tuple[str, ...] = ()  # one-line statements about the whole run
    partial: bool = False
    interrupted: str | None = None
    started: str | None = None
    duration_s: float | None = None
    versions: dict[str, str] = field(default_factory=dict)  # torch / triton used for the run

    def ceiling(self, name: str, kind: str) -> Ceiling | None:
        for c in self.ceilings:
            if c.name == name and c.kind == kind:
                return c
        return None
