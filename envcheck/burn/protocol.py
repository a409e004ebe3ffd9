"""The burn worker's contract (``envcheck.burn.worker:main``): its ``BurnPlan`` (``plans``: most of M minutes to
the GEMM, a quarter to the memory test, the rest to streaming) and its events, encoded as bench/protocol.py's::

    start      Started(device)
    sample     Sampled(sample)              about twice a second, from the telemetry thread, throughout
    phase      PhaseStarted(...)            per phase of the plan in order (gemm, bandwidth, memtest)
    interval   IntervalDone(...)            one per ``interval_s``: device time and work
    phase_end  PhaseEnded(phase, sdc, memtest)
    note       Noted(note)                  any time

Samples keep coming while a phase hangs: the parent judges a worker hung by its other events (run.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from envcheck.bench import protocol as bench_protocol
from envcheck.burn.telemetry import TelemetrySample
from envcheck.model.burn import CONTROLS, MemtestRecord, SdcRecord

SHARES = {"gemm": 0.60, "bandwidth": 0.15, "memtest": 0.25}
# A CPU burn (CI and tests, no GPU needed) runs tiny sizes: the point is the pipeline.
CPU_OPTIONS = {"gemm_n": 128, "max_bytes": 1 << 20, "interval_s": 0.25}


@dataclass(frozen=True)
class BurnPlan:
    """What one worker runs: seconds per phase; ``dtype`` None: the GPU's best (gemm.best_dtype); the shares of free
    memory the memory test and the bandwidth phase cover, capped by ``max_bytes`` (tests run tiny)."""

    backend: str
    index: int
    gemm_s: float
    bandwidth_s: float
    memtest_s: float
    seed: int = 0
    gemm_n: int = 8192
    dtype: str | None = None
    allow_fp8: bool = True
    memory_fraction: float = 0.9
    stream_fraction: float = 0.8
    max_bytes: int | None = None
    interval_s: float = 1.0
    telemetry_interval_s: float = 0.5
    control: str | None = None  # a positive control (model.burn.CONTROLS) this worker runs

    def __post_init__(self) -> None:
        if self.backend not in ("cuda", "cpu"):
            raise ValueError(f"backend must be cuda or cpu, got {self.backend!r}")
        if min(self.gemm_s, self.bandwidth_s, self.memtest_s) < 0 or self.index < 0 or self.gemm_n < 1:
            raise ValueError("phase seconds, index and gemm_n must not be negative")
        if not 0 < self.memory_fraction <= 1 or not 0 < self.stream_fraction <= 1:
            raise ValueError("memory fractions must be in (0, 1]")
        if self.interval_s <= 0 or self.telemetry_interval_s <= 0:
            raise ValueError("intervals must be positive")
        if self.control is not None and self.control not in CONTROLS:
            raise ValueError(f"unknown burn control {self.control!r}")

    @property
    def seconds(self) -> float:
        return self.gemm_s + self.bandwidth_s + self.memtest_s


def plans(gpus: Sequence[int], minutes: float, backend: str = "cuda", seed: int = 0, *,
          control: str | None = None, control_gpu: int | None = None, **options: object) -> tuple[BurnPlan, ...]:
    """One plan per GPU (``options``: BurnPlan's other fields); ``control`` runs on ``control_gpu`` (None: the
    first) alone."""
    s = {phase: minutes * 60.0 * share for phase, share in SHARES.items()}
    target = gpus[0] if control_gpu is None and gpus else control_gpu
    return tuple(BurnPlan(backend, g, s["gemm"], s["bandwidth"], s["memtest"], seed=seed,
                          control=control if g == target else None, **options) for g in gpus)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Sampled:
    kind: ClassVar[str] = "sample"
    sample: TelemetrySample


@dataclass(frozen=True)
class PhaseStarted:
    kind: ClassVar[str] = "phase"
    phase: str
    dtype: str
    shape: tuple[int, ...]
    unit: str
    started_s: float
    planned_s: float


@dataclass(frozen=True)
class IntervalDone:
    kind: ClassVar[str] = "interval"
    phase: str
    t_s: float
    dt_s: float
    work: float
    iterations: int


@dataclass(frozen=True)
class PhaseEnded:
    kind: ClassVar[str] = "phase_end"
    phase: str
    sdc: SdcRecord | None = None
    memtest: MemtestRecord | None = None


Started, Noted = bench_protocol.Started, bench_protocol.Noted  # the same events as the benchmark worker's
Event = Started | Sampled | PhaseStarted | IntervalDone | PhaseEnded | Noted
EVENTS: dict[str, type] = {c.kind: c for c in (Started, Sampled, PhaseStarted, IntervalDone, PhaseEnded, Noted)}


def encode(event: Event) -> dict[str, object]:
    return bench_protocol.encode(event, EVENTS)


def decode(data: object) -> Event:
    """The event in a message's data; ProtocolError for anything else."""
    return bench_protocol.decode(data, EVENTS)  # type: ignore[no-any-return]


def decode_plan(data: object) -> BurnPlan:
    return bench_protocol.decode_plan(data, BurnPlan)  # type: ignore[return-value]
