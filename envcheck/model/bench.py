"""Benchmark results of one device: what the isolated worker measured, raw.

Nothing here is derived from anything else here. A case holds its timing samples, its
numeric-error statistics, the NVML samples taken while it ran, which kernel ran and what
failed; throughput, shares of ceilings, speedups, flags, pass/fail and every summary are
computed from these by ``envcheck.analysis``, once, and read from there by every consumer.
The statistics of a ``Timing`` (median, quartiles, CV) are properties of its samples, never
stored.

Sentences are never stored either: a skip reason, a note or an interruption is a key plus
parameters (``Note``), phrased in the reader's language when a report is rendered. What the
machine itself said (an exception's first line, the worker's last stderr line) is kept as
the machine said it, in ``detail`` fields.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from envcheck.ops import DTYPES, IMPLS, OPS, PRECISIONS, OpSpec, lookup, valid_name

TIMING_METHODS = ("cuda_graph", "cuda_events", "host_clock")
# How many samples ``compute_stats`` works on at once: bounds its padded arrays' memory.
STATS_BATCH_SAMPLES = 1 << 21
LITTLE_ENDIAN = sys.byteorder == "little"
BACKENDS = ("cuda", "cpu")
# Deliberate slowdowns for the diff's positive control (``run --control``), recorded in Settings:
# ``vector_add_extra_bytes``: envcheck's Triton vector add also reads a zero-filled buffer of 12% of
# its elements (4% more bytes: kernels/vector_add.py).
CONTROLS = ("vector_add_extra_bytes",)

ParamValue = str | int | float | bool | None | tuple[str | int | float, ...]

# Where a bench's wall time went, in seconds, as the runner and the worker clocked it (raw: the
# shares are the analysis's, analysis/phases.py). ``Bench.phases``: the parts that belong to no one
# case: ``startup`` (the worker started until it said so: imports, the CUDA context, NVML),
# ``ceilings`` (the measured ceilings), ``inputs`` (drawing every group's tensors), ``shutdown``
# (the worker's last event until it exited). ``Case.phases``: a case's own: ``first_call`` (a
# torch case's first call; the other implementations' is ``compile_s``), ``check`` (its checked
# calls against the reference), ``warmup``, ``graph`` (capturing and sizing its CUDA graph),
# ``settle`` and ``sampling``. Other names are kept as recorded (a newer envcheck's).
BENCH_PHASES = ("startup", "ceilings", "inputs", "shutdown")
CASE_PHASES = ("first_call", "check", "warmup", "graph", "settle", "sampling")


class Samples:
    """An immutable sequence of float32 values: timing samples, stored compactly.

    Values are rounded to float32 when the object is made, so a report in memory and the
    same report read back from its JSON (where samples are float32: see model/codec.py)
    hold identical numbers, and everything derived from them is identical too. float32
    keeps 7 significant digits, far finer than any timer's resolution. An ``array('f')``
    costs 4 bytes a sample against 32 for a tuple of floats: a 20,000-case report fits in
    memory twice over for a diff.
    """

    __slots__ = ("_a",)

    def __init__(self, values: Iterable[float] = ()) -> None:
        self._a = values._a if isinstance(values, Samples) else array("f", values)

    @classmethod
    def from_bytes(cls, data: bytes) -> Samples:
        """From little-endian float32 bytes (the JSON encoding)."""
        if len(data) % 4:
            raise ValueError("float32 sample bytes must be a multiple of 4 long")
        s = cls.__new__(cls)
        a = array("f")
        a.frombytes(data)
        if not LITTLE_ENDIAN:  # the encoding is little-endian
            a.byteswap()
        s._a = a
        return s

    def to_bytes(self) -> bytes:
        a = self._a
        if not LITTLE_ENDIAN:
            a = array("f", a)
            a.byteswap()
        return a.tobytes()

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Iterator[float]:
        return iter(self._a)

    def __getitem__(self, i: int) -> float:
        return self._a[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Samples):
            return self._a == other._a
        if isinstance(other, (tuple, list)):
            return list(self._a) == list(Samples(other)._a)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._a.tobytes())

    def numpy(self) -> Any:
        """The samples as a read-only float32 numpy array sharing this object's memory (imported
        here, not at the top: probes and checks load the model without ever needing numpy)."""
        import numpy as np

        a = np.frombuffer(self._a, dtype=np.float32)
        a.flags.writeable = False
        return a

    def __repr__(self) -> str:
        shown = ", ".join(f"{x:g}" for x in self._a[:4])
        return f"Samples([{shown}{', ...' if len(self._a) > 4 else ''}], n={len(self._a)})"


@dataclass(frozen=True)
class TimingStats:
    median: float
    q1: float
    q3: float
    mean: float
    cv: float  # population standard deviation / mean


@dataclass(frozen=True)
class Timing:
    """Raw samples of one timed region, in microseconds per call.

    ``method``: ``cuda_graph`` (graph replay, launch gaps removed), ``cuda_events`` (eager
    calls between events: what a Python caller pays) or ``host_clock`` (CPU baseline,
    perf_counter around synchronous work). ``calls_per_sample``: calls timed together in
    one sample (each sample is already divided by it).
    ``passes``: with ``run --repeat N``, how many samples each of the N independent repeats
    took, in order (the samples are the repeats' samples one after the other); empty for a
    single run.
    """

    method: str
    samples_us: Samples
    calls_per_sample: int = 1
    passes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.samples_us, Samples):
            object.__setattr__(self, "samples_us", Samples(self.samples_us))
        if self.method not in TIMING_METHODS:
            raise ValueError(f"unknown timing method {self.method!r}")
        if not len(self.samples_us):
            raise ValueError("a timing needs at least one sample")
        # min() and sum() loop in C: a NaN or infinity makes the sum non-finite (float32 samples
        # cannot add up to an overflow of a Python float), a zero or negative sample the minimum.
        if not (math.isfinite(sum(self.samples_us)) and min(self.samples_us) > 0):
            raise ValueError("timing samples must be finite and positive")
        if self.calls_per_sample < 1:
            raise ValueError("calls_per_sample must be at least 1")
        if self.passes and (min(self.passes) < 1 or sum(self.passes) != len(self.samples_us)):
            raise ValueError(f"passes {self.passes} must be positive and add up to the {len(self.samples_us)} samples")

    @classmethod
    def from_samples(cls, method: str, samples_us: Iterable[float], calls_per_sample: int = 1) -> Timing:
        return cls(method, Samples(samples_us), calls_per_sample)

    @property
    def stats(self) -> TimingStats:
        cached = self.__dict__.get("_stats")
        if cached is None:
            compute_stats((self,))
            cached = self.__dict__["_stats"]
        return cached

    @property
    def n(self) -> int:
        return len(self.samples_us)

    @property
    def median_us(self) -> float:
        return self.stats.median

    @property
    def q1_us(self) -> float:
        return self.stats.q1

    @property
    def q3_us(self) -> float:
        return self.stats.q3

    @property
    def iqr_us(self) -> float:
        return self.stats.q3 - self.stats.q1

    @property
    def cv(self) -> float:
        return self.stats.cv


def compute_stats(timings: Iterable[Timing]) -> None:
    """Compute the statistics of many timings at once and keep each with its timing.

    A large report holds tens of thousands of timings; numpy over all of them together takes
    a fraction of the time of one call each. Timings go in batches of similar length, each a
    2-D array, one timing a row, padded with +inf: sorting a row puts the padding last, and
    sums are read from a running sum (``cumsum``) at the row's last sample, so padding never
    changes a result and a timing gets the same statistics in any batch, alone or with forty
    thousand others.
    """
    todo = sorted((t for t in timings if "_stats" not in t.__dict__), key=lambda t: len(t.samples_us))
    start = 0
    while start < len(todo):
        end = start + 1
        while end < len(todo) and (end + 1 - start) * len(todo[end].samples_us) <= STATS_BATCH_SAMPLES:
            end += 1  # sorted by length: the last one added is the widest row of the batch
        batch = todo[start:end]
        for t, stats in zip(batch, _row_stats([t.samples_us for t in batch]), strict=True):
            t.__dict__["_stats"] = stats
        start = end


def _row_stats(rows_of: list[Samples]) -> list[TimingStats]:
    import numpy as np

    n = np.array([len(x) for x in rows_of])
    rows = np.full((len(rows_of), int(n.max())), np.inf)
    for i, x in enumerate(rows_of):
        rows[i, :len(x)] = x.numpy()
    rows.sort(axis=1)
    idx = np.arange(len(rows_of))
    last = n - 1
    finite = np.where(np.isfinite(rows), rows, 0.0)
    mean = np.cumsum(finite, axis=1)[idx, last] / n
    var = np.maximum(np.cumsum(finite * finite, axis=1)[idx, last] / n - mean * mean, 0.0)
    cv = np.where(n > 1, np.sqrt(var) / mean, 0.0)
    quartiles = []
    for frac in (0.25, 0.5, 0.75):  # linear interpolation between order statistics: numpy's default
        pos = last * frac
        lo, hi = np.floor(pos).astype(int), np.ceil(pos).astype(int)
        low, high = rows[idx, lo], rows[idx, hi]
        quartiles.append(low + (high - low) * (pos - lo))
    q1, med, q3 = quartiles
    return [TimingStats(float(med[i]), float(q1[i]), float(q3[i]), float(mean[i]), float(cv[i]))
            for i in range(len(rows_of))]


def _check_params(params: Mapping[str, Any]) -> None:
    for k, v in params.items():
        if not isinstance(k, str):
            raise ValueError("note parameter names are strings")
        items = v if isinstance(v, tuple) else (v,)
        for x in items:
            if x is not None and not isinstance(x, (str, int, float)):
                raise ValueError(f"note parameter {k!r} has a value of type {type(x).__name__}")
            if isinstance(x, float) and not math.isfinite(x):
                raise ValueError(f"note parameter {k!r} is not finite")


@dataclass(frozen=True)
class Note:
    """A statement about a run, a case or a skip: a catalogue key and its parameters.

    Parameter names carry their unit (``_bytes``, ``_s``, ``_us``, ``_pct``), so the renderer
    formats values without knowing the note. ``legacy.text`` carries the English text of a
    report written before notes were keys (schema 1), shown as it was recorded.
    """

    key: str
    params: Mapping[str, ParamValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.key or not isinstance(self.key, str):
            raise ValueError("a note needs a key")
        _check_params(self.params)

    def __hash__(self) -> int:
        return hash((self.key, tuple(sorted(self.params.items()))))


def check_phases(phases: Mapping[str, float]) -> None:
    """Phase names are names (``valid_name``) and their seconds finite and non-negative."""
    for name, seconds in phases.items():
        if not valid_name(name):
            raise ValueError(f"phase name {name!r}: use letters, digits and _.-")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
                math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"phase {name}: seconds must be a finite non-negative number")


LEGACY_TEXT = "legacy.text"
# Field metadata: the report's JSON leaves the field out where it holds its default (model/codec.py).
OMIT_DEFAULT = "omit_default"


def legacy(text: str) -> Note:
    return Note(LEGACY_TEXT, {"text": text})


@dataclass(frozen=True)
class Accuracy:
    """Error of one output against its float64 reference: statistics only, no verdict.

    ``rel_l2``: ||out - ref|| / ||ref|| over the whole output (robust to a few unlucky
    elements). ``max_abs``: the largest |out - ref|. ``max_rel_elem``: the largest
    |out - ref| / mag over the elements, where mag is the op applied to the absolute values
    of its inputs (|a||b| for matmul, |x| + |y| for an add, the row sum of |x| ...): the scale
    rounding errors of that element grow with, so a few wrong elements stand out however
    large the output. Non-finite outputs (unwritten after the NaN poison fill, or overflow)
    count as zeros in the first three and are counted in ``nonfinite``.

    ``excess_l2``: ||out - round(ref)|| / ||ref||, where round(ref) is the reference rounded
    once to the output's dtype: the error beyond the one storage rounding every correct
    implementation pays. A 16-bit output computed in fp32 is round(ref) on nearly every element
    (only where the fp32 error crosses a rounding boundary does it differ, by one ulp), while
    one accumulated in 16 bits differs nearly everywhere: what ``rel_l2`` cannot tell apart at
    short accumulations, where both are about the output's own rounding.

    ``max_ulps``: the largest |out - ref| in units of the output dtype's spacing at ref (what the
    exact inputs are judged on: a correct kernel is within one there, docs/judge.md).

    Reports of schema 1 have no ``max_rel_elem``, ``nonfinite`` or ``elements`` (None); reports
    before schema 4 no ``excess_l2`` (None), before issue 48 no ``max_ulps``.
    """

    rel_l2: float
    max_abs: float
    max_rel_elem: float | None = None
    nonfinite: int | None = None
    elements: int | None = None
    excess_l2: float | None = None
    max_ulps: float | None = None

    def __post_init__(self) -> None:
        for name in ("rel_l2", "max_abs", "max_rel_elem", "excess_l2", "max_ulps"):
            v = getattr(self, name)
            if v is not None and not (v >= 0):  # also refuses NaN
                raise ValueError(f"{name} must be a non-negative number")
        for name in ("nonfinite", "elements"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ValueError(f"{name} must be non-negative")


@dataclass(frozen=True)
class OutputAccuracy:
    """The error of one named output of an op with several (``linear_fwbw``: ``y``, ``dx``,
    ``dW``), each against its own reference: a small output judged stacked over a large one
    would hide in its scale. ``exact``: its error on the op's exact inputs (bench/exact.py)."""

    name: str
    accuracy: Accuracy
    exact: Accuracy | None = None

    def __post_init__(self) -> None:
        if not valid_name(self.name):
            raise ValueError(f"output name {self.name!r}: use letters, digits and _.-")


@dataclass(frozen=True)
class Failure:
    """Why a case has no measurement. ``stage``: where it failed (``first_call``, ``compile``,
    ``check``, ``capture``, ``sample``, ``run``); ``detail``: the exception's first line, as
    the machine wrote it."""

    stage: str
    detail: str


@dataclass(frozen=True)
class MonitorWindow:
    """NVML samples of one GPU over one sampling window (a group of cases measured together).

    Parallel sequences, one entry per sample: seconds since the window opened, SM and memory
    clocks (MHz), temperature (C), power (W); a quantity NVML would not give is None. ``reasons``
    are the active clock-event reasons that slow the GPU at each sample (NVML names, e.g.
    ``sw_power_cap``), an empty tuple where none was active.
    """

    interval_s: float
    t_s: Samples
    sm_mhz: Samples | None = None
    mem_mhz: Samples | None = None
    temperature_c: Samples | None = None
    power_w: Samples | None = None
    reasons: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        for name in ("t_s", "sm_mhz", "mem_mhz", "temperature_c", "power_w"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, Samples):
                object.__setattr__(self, name, Samples(v))
        n = len(self.t_s)
        for name in ("sm_mhz", "mem_mhz", "temperature_c", "power_w"):
            v = getattr(self, name)
            if v is not None and len(v) != n:
                raise ValueError(f"monitor {name} has {len(v)} samples, t_s has {n}")
        if self.reasons and len(self.reasons) != n:
            raise ValueError(f"monitor reasons has {len(self.reasons)} samples, t_s has {n}")


@dataclass(frozen=True)
class MonitorSummary:
    """NVML extremes over a case, as schema-1 reports stored them (no samples were kept then)."""

    samples: int
    sm_clock_mhz_min: float | None = None
    sm_clock_mhz_max: float | None = None
    mem_clock_mhz_min: float | None = None
    mem_clock_mhz_max: float | None = None
    temperature_c_max: float | None = None
    power_w_max: float | None = None
    throttle_reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    """One measured (op, implementation, dtype, precision, shape), raw.

    ``shape``: (n,) for vector ops, (rows, cols) for softmax / row_sum, (M, N, K) for matmul.
    ``precision``: the arithmetic used (``tf32`` for an fp32 matmul on tensor cores; TF32 is
    on for exactly those cases, on every implementation). ``failure``: set when the case could
    not be measured (then it has no timings). ``window``: index into ``Bench.windows`` of the
    NVML samples taken while its group was sampled. ``rotation_sets``: sets of inputs and
    outputs it cycled through to keep L2 cold (1: none). ``notes``: what went wrong without
    stopping the measurement (e.g. no GPU time because graph capture failed). ``phases``: the
    seconds its own phases took (``CASE_PHASES``); ``span_s``: when its work began and ended, in
    seconds since its worker started (the implementations of a group are prepared one after the
    other, then sampled one after the other: spans of one group overlap).
    """

    op: str
    impl: str
    dtype: str
    precision: str
    shape: tuple[int, ...]
    gpu: Timing | None = None
    launch: Timing | None = None
    compile_s: float | None = None
    accuracy: Accuracy | None = None
    outputs: tuple[OutputAccuracy, ...] = ()  # per output, for ops with several (schema 4)
    exact: Accuracy | None = None  # the error on the op's exact inputs (bench/exact.py; issue 48)
    failure: Failure | None = None
    window: int | None = None
    rotation_sets: int = 1
    kernel: str | None = None  # which of envcheck's Triton kernels and tile ran (matmul: the race's winner)
    notes: tuple[Note, ...] = ()
    monitor: MonitorSummary | None = None  # schema-1 reports only; see ``window``
    phases: Mapping[str, float] = field(default_factory=dict)
    span_s: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        # A built-in op is checked against the registry here; a declared (user's) op only for
        # the form of its names and shape: its declaration is the Bench's (``Bench.ops``).
        builtin = self.op in OPS
        if not builtin and not valid_name(self.op):
            raise ValueError(f"unknown op {self.op!r}")
        if not (self.impl in IMPLS if builtin else valid_name(self.impl)):
            raise ValueError(f"unknown implementation {self.impl!r}")
        if self.dtype not in DTYPES or self.precision not in PRECISIONS:
            raise ValueError(f"unknown dtype/precision {self.dtype!r}/{self.precision!r}")
        if not isinstance(self.shape, tuple):
            object.__setattr__(self, "shape", tuple(self.shape))
        if builtin:
            OPS[self.op].check_shape(self.shape)
        elif not self.shape or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in self.shape):
            raise ValueError(f"{self.op} needs a shape of positive integers, got {self.shape}")
        if self.failure is None and self.gpu is None and self.launch is None:
            raise ValueError("a case is measured (a timing) or failed (a failure)")
        if self.compile_s is not None and not (self.compile_s >= 0 and math.isfinite(self.compile_s)):
            raise ValueError("compile_s must be a finite non-negative number")
        if self.rotation_sets < 1:
            raise ValueError("rotation_sets must be at least 1")
        check_phases(self.phases)
        if self.span_s is not None and not (0 <= self.span_s[0] <= self.span_s[1] and math.isfinite(self.span_s[1])):
            raise ValueError("span_s must be a start and an end in seconds, 0 <= start <= end")

    @property
    def key(self) -> CaseKey:
        """What identifies a case across reports."""
        return (self.op, self.impl, self.dtype, self.precision, self.shape)

    @property
    def measured(self) -> bool:
        return self.failure is None

    @property
    def best_time(self) -> Timing | None:
        """The time a case is quoted at: GPU time, or launch time where there is none."""
        return self.gpu or self.launch


CaseKey = tuple[str, str, str, str, tuple[int, ...]]


@dataclass(frozen=True)
class Skip:
    """A planned case that was not measured, and why (``reason``: a key and parameters)."""

    op: str
    impl: str
    dtype: str
    shape: tuple[int, ...]
    reason: Note
    precision: str | None = None  # None only in schema-1 reports that did not record it

    @property
    def key(self) -> CaseKey:
        return (self.op, self.impl, self.dtype, self.precision or self.dtype, self.shape)


@dataclass(frozen=True)
class CeilingRun:
    """One measurement behind a measured ceiling: a kernel, its size and its samples.

    ``kernel``: ``copy`` (read + write), ``read`` (a reduction: read only), ``fill`` (write
    only), ``triad`` (a = b + s*c), ``matmul`` (cuBLAS, ``precision`` its arithmetic);
    ``shape``: elements for the bandwidth kernels, (M, N, K) for matmul. The bytes and FLOPs
    each moves are derived (analysis/ceilings.py), as for cases.
    """

    kernel: str
    dtype: str
    shape: tuple[int, ...]
    timing: Timing
    precision: str | None = None

    def __post_init__(self) -> None:
        # The analysis looks the dtype and precision up in its tables and reads the shape's
        # items (elements, or M, N, K): what it would trip over is refused here, at load.
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r} (known: {', '.join(DTYPES)})")
        if self.precision is not None and self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r} (known: {', '.join(PRECISIONS)})")
        if not isinstance(self.shape, tuple):
            object.__setattr__(self, "shape", tuple(self.shape))
        if self.kernel == "matmul":
            OPS["matmul"].check_shape(self.shape)
        elif not self.shape or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in self.shape):
            raise ValueError(f"a {self.kernel} run needs a shape of positive integers, got {self.shape}")


@dataclass(frozen=True)
class RecordedCeiling:
    """A measured ceiling as a schema-1 report stored it (a value, no samples). Loaded for the
    old reports' sake; new reports keep ``CeilingRun`` samples instead."""

    name: str
    value: float
    unit: str
    source: str


class StopCause(str, Enum):
    """Why a run ended before every planned case was reported."""

    USER = "user"  # Ctrl-C
    SIGNAL = "signal"  # SIGTERM or SIGHUP (a batch scheduler's end of job)
    TIMEOUT = "timeout"  # the run's --timeout
    CRASHED = "crashed"  # the worker died of a signal
    EXITED = "exited"  # the worker exited before reporting every case
    HUNG = "hung"  # the worker exited but its output never closed
    START_FAILED = "start_failed"  # the worker could not be started
    LEGACY = "legacy"  # a schema-1 report: ``detail`` holds what it recorded


@dataclass(frozen=True)
class Stop:
    """How an unfinished run ended. ``finished`` of ``planned`` cases were reported; ``during``
    is the case the worker was on. ``signal`` / ``returncode`` / ``timeout_s`` as the cause
    has them; ``detail``: the worker's last line on stderr, as it wrote it."""

    cause: StopCause
    finished: int = 0
    planned: int = 0
    during: CaseKey | None = None
    signal: str | None = None
    returncode: int | None = None
    timeout_s: float | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Settings:
    """How a run measured: the one definition, read by the planner, the worker, the timer and
    the report. ``threads``: CPU threads torch used (CPU baseline only). ``repeat``: independent
    repeats of every case (``run --repeat``; the sample counts are then per repeat).
    ``control``: a deliberate, documented change to one kernel for the diff's positive
    control (``CONTROLS``), None in every ordinary run."""

    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    min_samples: int = 10
    max_samples: int = 200
    cold_l2: bool = True
    seed: int = 0
    quick: bool = False
    ops: tuple[str, ...] = ()
    impls: tuple[str, ...] = ()
    threads: int | None = None
    repeat: int | None = None  # None: one run (left out of the JSON, as in reports before repeats)
    control: str | None = None
    # Triton kernels run by its interpreter on the CPU (``run --interpret``, schema 4).
    interpret: bool = field(default=False, metadata={OMIT_DEFAULT: True})
    # Sequential stopping (bench/timer.py): a window of GPU-time samples ends once the 95% confidence
    # interval of every graph region's median is within this fraction of it (None: each takes its count).
    stop_ci: float | None = field(default=None, metadata={OMIT_DEFAULT: True})

    def __post_init__(self) -> None:
        if self.repeat is not None and self.repeat < 1:
            raise ValueError("repeat must be at least 1")
        if self.control is not None and self.control not in CONTROLS:
            raise ValueError(f"unknown control {self.control!r} (known: {', '.join(CONTROLS)})")
        for name in ("warmup_ms", "rep_ms"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite non-negative number")
        if not 1 <= self.min_samples <= self.max_samples:
            raise ValueError("need 1 <= min_samples <= max_samples")
        if self.stop_ci is not None and not (math.isfinite(self.stop_ci) and 0 < self.stop_ci < 1):
            raise ValueError("stop_ci must be a fraction between 0 and 1")


@dataclass(frozen=True)
class BenchDevice:
    """The device a bench ran on. ``uuid`` names the GPU across reports (NVML's GPU-... form)."""

    backend: str  # cuda | cpu
    name: str
    index: int | None = None
    uuid: str | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_total_bytes: int | None = None
    compute_capability: str | None = None
    pci_bus_id: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}")


@dataclass(frozen=True)
class Bench:
    """Everything one device's benchmark produced."""

    device: BenchDevice
    settings: Settings = field(default_factory=Settings)
    cases: tuple[Case, ...] = ()
    skipped: tuple[Skip, ...] = ()
    ceiling_runs: tuple[CeilingRun, ...] = ()
    windows: tuple[MonitorWindow, ...] = ()
    notes: tuple[Note, ...] = ()
    stop: Stop | None = None
    started: str | None = None
    duration_s: float | None = None
    versions: dict[str, str] = field(default_factory=dict)  # torch / triton / cuda used for the run
    recorded_ceilings: tuple[RecordedCeiling, ...] = ()  # schema-1 reports only
    ops: tuple[OpSpec, ...] = ()  # the user's own ops (``envcheck bench``): their declarations
    phases: Mapping[str, float] = field(default_factory=dict)  # seconds, BENCH_PHASES

    def __post_init__(self) -> None:
        check_phases(self.phases)
        for c in self.cases:
            if c.window is not None and not 0 <= c.window < len(self.windows):
                raise ValueError(f"case window {c.window} is not one of the {len(self.windows)} monitor windows")
        names = [s.name for s in self.ops]
        if len(set(names)) != len(names):
            raise ValueError("a declared op is declared once")
        for s in self.ops:
            if s.declared is None or s.name in OPS or not valid_name(s.name):
                raise ValueError(f"op {s.name!r} is not a declared op")
        for item in (*self.cases, *self.skipped):
            if item.op in OPS:
                continue
            op = self.spec(item.op)  # ValueError naming the op if it was never declared
            if item.impl not in op.impls:
                raise ValueError(f"{item.op} declares no implementation {item.impl!r}")
            op.check_shape(item.shape)

    def spec(self, op: str) -> OpSpec:
        """What ``op`` is: a built-in op, or one this bench declared."""
        return lookup(op, self.ops)

    @property
    def partial(self) -> bool:
        return self.stop is not None

    def window_of(self, case: Case) -> MonitorWindow | None:
        return self.windows[case.window] if case.window is not None else None
