"""The report model: immutable dataclasses and their versioned JSON form.

A report is the single source of truth. Probes and benchmarks build one; the
renderers and the comparisons only read one. Nothing here probes, measures or
renders.

JSON format history (``schema_version``):
  1 - first format: environment sections + GPUs as facts, checks, bench cases
      with raw timing samples (2026-11).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import tempfile
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

SCHEMA_VERSION = 1
FORMAT_NAME = "envcheck-report"

Status = Literal["pass", "warn", "fail", "skip"]
STATUSES: tuple[str, ...] = ("fail", "warn", "pass", "skip")  # worst first


class ReportError(Exception):
    """A file that cannot be read as an envcheck report (one-line message)."""


# --------------------------------------------------------------------------- environment


@dataclass(frozen=True)
class Fact:
    """One probed value, or the reason it is missing.

    Units live in the key name (``memory_total_bytes``, ``sm_clock_mhz``).
    """

    value: Any = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.value is not None and self.reason is not None:
            raise ValueError("a fact has a value or a reason, not both")

    @property
    def ok(self) -> bool:
        return self.value is not None


def known(value: Any) -> Fact:
    return Fact(value=value)


def missing(reason: str) -> Fact:
    return Fact(reason=reason)


Facts = dict[str, Fact]


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML sees it; ``lost`` is set when the GPU could not be queried at all."""

    index: int
    facts: Facts = field(default_factory=dict)
    lost: str | None = None

    def get(self, key: str) -> Any:
        f = self.facts.get(key)
        return f.value if f else None


@dataclass(frozen=True)
class Environment:
    """Sections of facts (``system``, ``wsl``, ``driver``, ``cuda``, ``env``, ``torch``,
    ``torch_runtime``, ``triton``, ``triton_runtime``) and one entry per GPU."""

    sections: dict[str, Facts] = field(default_factory=dict)
    gpus: tuple[Gpu, ...] = ()
    probe_s: float | None = None  # wall time of the probe

    def get(self, section: str, key: str) -> Any:
        f = self.sections.get(section, {}).get(key)
        return f.value if f else None

    def fact(self, section: str, key: str) -> Fact:
        return self.sections.get(section, {}).get(key) or missing("not probed")


@dataclass(frozen=True)
class Check:
    """One health rule's verdict. ``fix`` is the exact command or setting, when not passing."""

    id: str
    status: Status
    title: str
    finding: str
    fix: str | None = None
    details: str | None = None  # what a crashed subprocess printed, trimmed

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown check status {self.status!r}")
        if "\n" in self.finding:
            raise ValueError("a finding is one line")


# --------------------------------------------------------------------------- benchmarks


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


# --------------------------------------------------------------------------- the report

Kind = Literal["probe", "check", "run"]


@dataclass(frozen=True)
class Report:
    tool_version: str
    created: str  # ISO 8601, UTC, seconds
    host: str
    kind: str
    environment: Environment
    checks: tuple[Check, ...] = ()
    bench: Bench | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.kind not in ("probe", "check", "run"):
            raise ValueError(f"unknown report kind {self.kind!r}")

    @property
    def verdict(self) -> str:
        """Worst check status: fail > warn > pass (skip never decides)."""
        statuses = {c.status for c in self.checks}
        for s in ("fail", "warn"):
            if s in statuses:
                return s
        return "pass"

    @property
    def gpu_name(self) -> str | None:
        if self.bench and self.bench.device.backend == "cuda":
            return self.bench.device.name
        for g in self.environment.gpus:
            if g.get("name"):
                return g.get("name")
        return None


# --------------------------------------------------------------------------- JSON

def to_dict(obj: Any) -> Any:
    """Plain JSON-ready data from model objects (dataclasses, tuples, dicts)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def build(tp: Any, data: Any) -> Any:
    """A model object of type ``tp`` (a dataclass, tuple, dict or union of them) from its JSON form."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if data is None:
            return None
        inner = [a for a in args if a is not type(None)]
        return build(inner[0], data)
    if data is None:
        return None
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise ValueError(f"expected an object for {tp.__name__}")
        hints = _hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        kwargs = {k: build(hints[k], v) for k, v in data.items() if k in names}
        return tp(**kwargs)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(build(args[0], x) for x in data)
        return tuple(data)
    if origin is dict:
        return {k: build(args[1], v) for k, v in data.items()}
    if origin is Literal or tp is Any:
        return data
    if tp is float and isinstance(data, int):
        return float(data)
    return data


def from_dict(data: dict[str, Any]) -> Report:
    """A Report from its JSON form, any schema version this tool knows."""
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise ReportError("not an envcheck report (no 'format': 'envcheck-report' field)")
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise ReportError("report has no integer schema_version")
    if version > SCHEMA_VERSION:
        raise ReportError(
            f"report schema {version} is newer than this envcheck understands ({SCHEMA_VERSION}): "
            "upgrade envcheck (pip install -U envcheck)"
        )
    if version < 1:
        raise ReportError(f"unknown report schema version {version}")
    # Version 1 is the only one so far; older versions will be upgraded here, step by step.
    body = {k: v for k, v in data.items() if k != "format"}
    try:
        return build(Report, body)
    except (TypeError, ValueError, AttributeError, KeyError) as e:
        raise ReportError(f"report is malformed: {e}") from None


def dumps(report: Report) -> str:
    data = {"format": FORMAT_NAME, **to_dict(report)}
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def loads(text: str) -> Report:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"not valid JSON ({e.msg} at line {e.lineno})") from None
    return from_dict(data)


def load(path: str | os.PathLike[str]) -> Report:
    """Read a report; every failure is a ReportError whose message names the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ReportError(f"{p}: is a directory, not a report file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{p}: cannot read ({e.__class__.__name__}: {e})") from None
    try:
        return loads(text)
    except ReportError as e:
        raise ReportError(f"{p}: {e}") from None


def write_new(path: str | os.PathLike[str], content: str | bytes) -> Path:
    """Write ``content`` to ``path`` without ever replacing an existing file.

    The file appears whole or not at all (written beside it, then linked into place;
    the link fails if the name was taken meanwhile).
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); a report gets the permissions any new file would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        data = content.encode("utf-8") if isinstance(content, str) else content
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.link(tmp, p)
    finally:
        os.unlink(tmp)
    return p


def dump(report: Report, path: str | os.PathLike[str]) -> Path:
    return write_new(path, dumps(report))
