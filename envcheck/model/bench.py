"""One device's benchmark results, raw: what the isolated worker measured; notes are keys plus parameters, what
the machine said stays in ``detail`` fields. Derived numbers are ``envcheck.analysis``'s.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, overload

from envcheck.model.facts import check_in
from envcheck.ops import DTYPES, IMPLS, OPS, PRECISIONS, OpSpec, lookup, valid_name
from envcheck.outside_json import Int

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

TIMING_METHODS = ("cuda_graph", "cuda_events", "host_clock")
# How many samples ``compute_stats`` works on at once: bounds its padded arrays' memory.
STATS_BATCH_SAMPLES = 1 << 21
LITTLE_ENDIAN = sys.byteorder == "little"
BACKENDS = ("cuda", "cpu")
CONTROLS = ("vector_add_extra_bytes",)

ParamValue = str | Int | float | bool | None | tuple[str | Int | float, ...]

# Where a bench's wall time went, seconds: the parts of no one case (``Bench.phases``) and a case's own
# (``Case.phases``). Other names are kept.
BENCH_PHASES = ("startup", "ceilings", "inputs", "torch_compile", "shutdown")
CASE_PHASES = ("first_call", "check", "warmup", "graph", "settle", "sampling")
# Whether a case's first call came from a cache (bench/compile_cache.py): ``raced``: cached kernels, tile raced.
CACHE_STATES = ("hit", "raced", "miss")
# Why a case's sampling ended (bench/timer.py): median fixed within ``stop_ci``, sample count, sustained window.
SAMPLING_STOPS = ("ci", "count", "window")


class Samples(Sequence[float]):
    """An immutable sequence of float32 samples, rounded when made (a report in memory and read back hold the same
    numbers), 4 bytes a sample (a tuple of floats costs 32)."""

    __slots__ = ("_a",)
    _a: array[float]

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

    @overload
    def __getitem__(self, i: int) -> float: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[float]: ...
    def __getitem__(self, i: int | slice) -> float | Sequence[float]:
        return self._a[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Samples):
            return self._a == other._a
        if isinstance(other, (tuple, list)):
            return list(self._a) == list(Samples(other)._a)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._a.tobytes())

    def numpy(self) -> NDArray[np.float32]:
        """A read-only float32 numpy view (numpy imported here: probes and checks never need it)."""
        import numpy as np

        a = np.frombuffer(self._a, dtype=np.float32)
        a.flags.writeable = False
        return a

    def __repr__(self) -> str:
        shown = ", ".join(f"{x:g}" for x in self._a[:4])
        return f"Samples([{shown}{', ...' if len(self._a) > 4 else ''}], n={len(self._a)})"


def samples_of(obj: object, *names: str) -> int:
    """Each named field (None allowed) made ``Samples`` of one length; that length (-1: none)."""
    n = -1
    for name in names:
        v = getattr(obj, name)
        if v is not None and not isinstance(v, Samples):
            object.__setattr__(obj, name, v := Samples(v))
        if v is not None and n >= 0 and len(v) != n:
            raise ValueError(f"{name} has {len(v)} samples, {names[0]} has {n}")
        n = len(v) if v is not None and n < 0 else n
    return n


@dataclass(frozen=True)
class TimingStats:
    median: float
    q1: float
    q3: float
    mean: float
    cv: float  # population standard deviation / mean


@dataclass(frozen=True)
class Timing:
    """Raw samples of one timed region, microseconds per call; ``passes``: each ``run --repeat``'s count."""

    method: str
    samples_us: Samples
    calls_per_sample: Int = 1
    passes: tuple[Int, ...] = ()

    def __post_init__(self) -> None:
        samples_of(self, "samples_us")
        check_in("timing method", self.method, TIMING_METHODS)
        if not len(self.samples_us):
            raise ValueError("a timing needs at least one sample")
        # In C: a NaN or infinity makes the sum non-finite, a zero or negative sample the minimum.
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
        if "_stats" not in self.__dict__:
            compute_stats((self,))
        stats: TimingStats = self.__dict__["_stats"]
        return stats

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
    """The statistics of many timings at once (numpy over batches of similar length), kept with each. Rows are
    padded with +inf, sorted last and never summed: a timing gets the same statistics alone or in any batch."""
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


def _check_params(params: Mapping[str, object]) -> None:
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
    """A statement about a run, a case or a skip: a catalogue key and its parameters, whose names carry their unit
    (``_bytes``, ``_s``); ``legacy.text``: a schema-1 report's English, shown as recorded."""

    key: str
    params: Mapping[str, ParamValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.key or not isinstance(self.key, str):
            raise ValueError("a note needs a key")
        _check_params(self.params)

    def __hash__(self) -> int:
        return hash((self.key, tuple(sorted(self.params.items()))))


def check_phases(phases: Mapping[str, float]) -> None:
    for name, seconds in phases.items():
        if not valid_name(name):
            raise ValueError(f"phase name {name!r}: use letters, digits and _.-")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
                math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"phase {name}: seconds must be a finite non-negative number")


LEGACY_TEXT = "legacy.text"
# Field metadata: the JSON leaves the field out at its default (an addition whose default says "as before").
OMIT_DEFAULT = "omit_default"


def legacy(text: str) -> Note:
    return Note(LEGACY_TEXT, {"text": text})


@dataclass(frozen=True)
class Accuracy:
    """Error of one output against its float64 reference (bench/accuracy.py, docs/judge.md): ``rel_l2`` is
    ||out - ref|| / ||ref||; ``max_rel_elem`` the largest |out - ref| / mag (mag: the op on |inputs|); ``excess_l2``
    the error beyond the one rounding to the output's dtype; ``max_ulps`` the largest error in ulps beside the op's
    own roundings (what exact inputs are judged on); non-finite outputs count as zeros, and in ``nonfinite``."""

    rel_l2: float
    max_abs: float
    max_rel_elem: float | None = None
    nonfinite: Int | None = None
    elements: Int | None = None
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
    """The error of one named output of an op with several (``linear_fwbw``: y, dx, dW), against its own reference
    (a small output stacked over a large one would hide in its scale); ``exact``: on exact inputs."""

    name: str
    accuracy: Accuracy
    exact: Accuracy | None = None

    def __post_init__(self) -> None:
        if not valid_name(self.name):
            raise ValueError(f"output name {self.name!r}: use letters, digits and _.-")


@dataclass(frozen=True)
class Failure:
    """Why a case has no measurement: the ``stage`` it failed at and the exception's first line."""

    stage: str
    detail: str


@dataclass(frozen=True)
class MonitorWindow:
    """NVML samples of one GPU over a group of cases (None: NVML would not give it)."""

    interval_s: float
    t_s: Samples
    sm_mhz: Samples | None = None
    mem_mhz: Samples | None = None
    temperature_c: Samples | None = None
    power_w: Samples | None = None
    reasons: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        n = samples_of(self, "t_s", "sm_mhz", "mem_mhz", "temperature_c", "power_w")
        if self.reasons and len(self.reasons) != n:
            raise ValueError(f"monitor reasons has {len(self.reasons)} samples, t_s has {n}")


@dataclass(frozen=True)
class MonitorSummary:
    """NVML extremes over a case, as schema-1 reports stored them (no samples were kept then)."""

    samples: Int
    sm_clock_mhz_min: float | None = None
    sm_clock_mhz_max: float | None = None
    mem_clock_mhz_min: float | None = None
    mem_clock_mhz_max: float | None = None
    temperature_c_max: float | None = None
    power_w_max: float | None = None
    throttle_reasons: tuple[str, ...] = ()


class Planned:
    """What a case and a skip both name (a plain base: no dataclass field)."""

    op: str
    impl: str
    dtype: str
    shape: tuple[Int, ...]


@dataclass(frozen=True)
class Case(Planned):
    """One measured (op, implementation, dtype, precision, shape), raw; ``window``: its NVML samples in
    ``Bench.windows``; ``span_s``: its work's start and end since its worker started."""

    op: str
    impl: str
    dtype: str
    precision: str
    shape: tuple[Int, ...]
    gpu: Timing | None = None
    launch: Timing | None = None
    compile_s: float | None = None
    accuracy: Accuracy | None = None
    outputs: tuple[OutputAccuracy, ...] = ()  # per output, for ops with several (schema 4)
    exact: Accuracy | None = None  # the error on the op's exact inputs (bench/exact.py; issue 48)
    failure: Failure | None = None
    window: Int | None = None
    rotation_sets: Int = 1
    kernel: str | None = None  # which of envcheck's Triton kernels and tile ran (matmul: the race's winner)
    notes: tuple[Note, ...] = ()
    monitor: MonitorSummary | None = None  # schema-1 reports only; see ``window``
    phases: Mapping[str, float] = field(default_factory=dict)
    span_s: tuple[float, float] | None = None
    cache: str | None = field(default=None, metadata={OMIT_DEFAULT: True})  # CACHE_STATES (None: unknown)
    sampled_until: str | None = field(default=None, metadata={OMIT_DEFAULT: True})  # SAMPLING_STOPS

    def __post_init__(self) -> None:
        # A declared (user's) op is checked against its declaration by the Bench (``Bench.ops``).
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
        if self.failure is None and self.gpu is None and self.launch is None and self.accuracy is None:
            raise ValueError("a case is timed, checked (an interpreted kernel: its accuracy alone) or failed")
        if self.compile_s is not None and not (self.compile_s >= 0 and math.isfinite(self.compile_s)):
            raise ValueError("compile_s must be a finite non-negative number")
        if self.rotation_sets < 1:
            raise ValueError("rotation_sets must be at least 1")
        check_phases(self.phases)
        if self.span_s is not None and not (0 <= self.span_s[0] <= self.span_s[1] and math.isfinite(self.span_s[1])):
            raise ValueError("span_s must be a start and an end in seconds, 0 <= start <= end")
        if self.cache not in (None, *CACHE_STATES) or self.sampled_until not in (None, *SAMPLING_STOPS):
            raise ValueError(f"unknown cache state {self.cache!r} or sampling stop {self.sampled_until!r}")

    @property
    def key(self) -> CaseKey:
        return (self.op, self.impl, self.dtype, self.precision, self.shape)

    @property
    def measured(self) -> bool:
        return self.failure is None

    @property
    def best_time(self) -> Timing | None:
        return self.gpu or self.launch


CaseKey = tuple[str, str, str, str, tuple[int, ...]]


@dataclass(frozen=True)
class Skip(Planned):
    """A planned case that was not measured, and why (``reason``: a key and parameters)."""

    op: str
    impl: str
    dtype: str
    shape: tuple[Int, ...]
    reason: Note
    precision: str | None = None  # None only in schema-1 reports that did not record it

    @property
    def key(self) -> CaseKey:
        return (self.op, self.impl, self.dtype, self.precision or self.dtype, self.shape)


@dataclass(frozen=True)
class CeilingRun:
    """One measurement behind a measured ceiling: ``kernel`` (``copy``, ``read``, ``fill``, ``triad``, or cuBLAS
    ``matmul`` at ``precision``), its shape (elements, or M, N, K) and samples."""

    kernel: str
    dtype: str
    shape: tuple[Int, ...]
    timing: Timing
    precision: str | None = None

    def __post_init__(self) -> None:
        check_in("dtype", self.dtype, DTYPES, known=True)
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
    """A measured ceiling as a schema-1 report stored it: a value, no samples."""

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
    """How an unfinished run ended: ``finished`` of ``planned`` cases, the case it was ``during``."""

    cause: StopCause
    finished: Int = 0
    planned: Int = 0
    during: CaseKey | None = None
    signal: str | None = None
    returncode: Int | None = None
    timeout_s: float | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Settings:
    """How a run measured. ``threads``: torch's CPU threads (CPU baseline); ``repeat``: ``run --repeat``;
    ``control``: the diff's positive control (``CONTROLS``: vector_add reads 4% more bytes)."""

    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    min_samples: Int = 10
    max_samples: Int = 200
    cold_l2: bool = True
    seed: Int = 0
    quick: bool = False
    ops: tuple[str, ...] = ()
    impls: tuple[str, ...] = ()
    threads: Int | None = None
    repeat: Int | None = None
    control: str | None = None
    interpret: bool = field(default=False, metadata={OMIT_DEFAULT: True})  # run --interpret: Triton on the CPU
    # Sequential stopping (bench/timer.py): a window ends once each median's 95% CI is within this fraction.
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
    """The device a bench ran on; ``uuid`` names the GPU across reports."""

    backend: str  # cuda | cpu
    name: str
    index: Int | None = None
    uuid: str | None = None
    sm_count: Int | None = None
    l2_bytes: Int | None = None
    memory_total_bytes: Int | None = None
    compute_capability: str | None = None
    pci_bus_id: str | None = None

    def __post_init__(self) -> None:
        check_in("backend", self.backend, BACKENDS)


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
