"""The burn-in section of a report, raw: per GPU each phase's work per interval, NVML telemetry, the memory test
and every silent-data-corruption mismatch."""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.model.bench import BenchDevice, Note, Samples, Stop, StopCause, samples_of
from envcheck.model.facts import check_in
from envcheck.model.node import XidEvent
from envcheck.outside_json import Int

PHASES = ("gemm", "bandwidth", "memtest")
UNITS = ("flop", "byte")
SDC_CHECKS = ("checksum", "full", "fp64")
# Positive controls (``burn --control``): ``slow_gemm`` times an uncounted GEMM after every ninth (10% low);
# ``flip_bit`` flips one output bit once.
CONTROLS = ("slow_gemm", "flip_bit")
SLOW_GEMM_EVERY = 9
TELEMETRY_FIELDS = ("sm_mhz", "mem_mhz", "power_w", "power_limit_w", "temperature_c", "mem_temperature_c",
                    "ecc_corrected", "ecc_uncorrected", "pcie_replays", "remap_pending", "remapped_uncorrectable")


@dataclass(frozen=True)
class Telemetry:
    """NVML samples of one GPU over the whole burn (None: NVML would not give it; ECC counts volatile); ``lost_s``:
    when NVML said the GPU fell off the bus."""

    interval_s: float
    t_s: Samples
    sm_mhz: Samples | None = None
    mem_mhz: Samples | None = None
    power_w: Samples | None = None
    power_limit_w: Samples | None = None
    temperature_c: Samples | None = None
    mem_temperature_c: Samples | None = None
    ecc_corrected: Samples | None = None
    ecc_uncorrected: Samples | None = None
    pcie_replays: Samples | None = None
    remap_pending: Samples | None = None
    remapped_uncorrectable: Samples | None = None
    reasons: tuple[tuple[str, ...], ...] = ()
    lost_s: float | None = None

    def __post_init__(self) -> None:
        n = samples_of(self, "t_s", *TELEMETRY_FIELDS)
        if self.reasons and len(self.reasons) != n:
            raise ValueError(f"reasons has {len(self.reasons)} samples, t_s has {n}")
        if not self.interval_s > 0:
            raise ValueError("interval_s must be positive")


@dataclass(frozen=True)
class PhaseRun:
    """One phase on one GPU, per interval (about a second): its end, device time and work (FLOP for ``gemm``, bytes
    otherwise); ``shape``: (M, N, K) for the GEMM, (bytes,) otherwise."""

    phase: str
    dtype: str
    shape: tuple[Int, ...]
    unit: str
    started_s: float
    planned_s: float
    t_s: Samples
    dt_s: Samples
    work: Samples
    iterations: Int = 0
    finished: bool = False

    def __post_init__(self) -> None:
        check_in("burn phase", self.phase, PHASES)
        check_in("unit", self.unit, UNITS)
        samples_of(self, "t_s", "dt_s", "work")
        if any(x <= 0 for x in self.dt_s):
            raise ValueError("interval times must be positive")


@dataclass(frozen=True)
class SdcMismatch:
    """A result that differed from the first iteration's or from float64; ``element``: its flat index (-1: only the
    checksum saw it)."""

    check: str
    iteration: Int
    t_s: float
    element: Int = -1
    expected: float | None = None
    got: float | None = None

    def __post_init__(self) -> None:
        check_in("SDC check", self.check, SDC_CHECKS)


@dataclass(frozen=True)
class SdcRecord:
    """The GEMM's correctness checks (``fp64_max_error`` in units of the tolerance's bound); the first
    ``mismatches`` found and the ``mismatch_count`` of all."""

    iterations: Int
    checksums: Int
    full_compares: Int
    fp64_checks: Int
    fp64_elements: Int
    fp64_max_error: float | None = None
    mismatches: tuple[SdcMismatch, ...] = ()
    mismatch_count: Int = 0


@dataclass(frozen=True)
class BitErrorRange:
    """Consecutive words that read back wrong in one pattern of one pass: addresses [start, end), words, bits."""

    pattern: str
    pass_index: Int
    start_address: Int
    end_address: Int
    words: Int
    bits: Int


@dataclass(frozen=True)
class MemtestRecord:
    """The memory test's coverage (``bytes_tested`` of ``free_bytes``, patterns, passes) and its bit errors."""

    bytes_tested: Int
    free_bytes: Int
    patterns: tuple[str, ...]
    passes: Int
    duration_s: float
    errors: tuple[BitErrorRange, ...] = ()
    error_bits: Int = 0


@dataclass(frozen=True)
class BurnGpu:
    """One GPU's burn; ``stop``: how its worker ended early; ``control``: a positive control (``CONTROLS``)."""

    index: Int
    device: BenchDevice | None = None
    phases: tuple[PhaseRun, ...] = ()
    telemetry: Telemetry | None = None
    sdc: SdcRecord | None = None
    memtest: MemtestRecord | None = None
    stop: Stop | None = None
    notes: tuple[Note, ...] = ()
    control: str | None = None

    def __post_init__(self) -> None:
        if self.control is not None and self.control not in CONTROLS:
            raise ValueError(f"unknown burn control {self.control!r} (known: {', '.join(CONTROLS)})")


@dataclass(frozen=True)
class Burn:
    """Every selected GPU's burn, run at once, and the Xid lines new during it."""

    minutes: float
    started: str
    duration_s: float
    gpus: tuple[BurnGpu, ...]
    xid_source: str | None = None
    xid_reasons: tuple[str, ...] = ()
    new_xids: tuple[XidEvent, ...] = ()
    stopped: StopCause | None = None
    signal: str | None = None
