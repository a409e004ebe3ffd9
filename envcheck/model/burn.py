"""The burn-in section of a report (``envcheck burn``, ``envcheck run --burn``): raw results only.

Per GPU: what each phase did per interval (seconds and work, so the analysis derives TFLOP/s and
GB/s), the NVML telemetry sampled about twice a second throughout, the memory test's coverage
and every bit error it found (with its address range), and every silent-data-corruption mismatch
(iteration, time, element). Xid lines the kernel logged during the burn belong to the host and
are kept once, at the burn's level. Verdicts, thresholds and rates are the analysis's
(``envcheck.analysis.burn``): nothing here judges.
"""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.model.bench import BenchDevice, Note, Samples, Stop, StopCause
from envcheck.model.node import XidEvent

PHASES = ("gemm", "bandwidth", "memtest")
UNITS = ("flop", "byte")
SDC_CHECKS = ("checksum", "full", "fp64")
# Positive controls of the burn's verdicts (``envcheck burn --control``), applied to one GPU and
# recorded on it; never for real measurements. ``slow_gemm``: every ninth counted GEMM is followed by
# one more that is timed but not counted, so the GPU's GEMM rate reads 10% low however its clocks
# move (the extra call costs what a counted one costs); ``flip_bit``: one bit of one GEMM output is
# flipped once, as silent data corruption would.
CONTROLS = ("slow_gemm", "flip_bit")
SLOW_GEMM_EVERY = 9
# Telemetry quantities besides time, in the order they are sampled (Telemetry's Samples fields).
TELEMETRY_FIELDS = ("sm_mhz", "mem_mhz", "power_w", "power_limit_w", "temperature_c", "mem_temperature_c",
                    "ecc_corrected", "ecc_uncorrected", "pcie_replays", "remap_pending", "remapped_uncorrectable")


def _samples(obj: object, names: tuple[str, ...]) -> int:
    """Makes each named field a ``Samples`` and checks they are as long as ``t_s``; the length."""
    n = len(obj.t_s)  # type: ignore[attr-defined]
    for name in names:
        v = getattr(obj, name)
        if v is not None and not isinstance(v, Samples):
            object.__setattr__(obj, name, v := Samples(v))
        if v is not None and len(v) != n:
            raise ValueError(f"{name} has {len(v)} samples, t_s has {n}")
    return n


@dataclass(frozen=True)
class Telemetry:
    """NVML samples of one GPU over the whole burn, one entry per sample in every quantity (None:
    NVML would not give it). ``t_s``: seconds since the burn started. Clocks MHz, power and the
    enforced limit W, temperatures C; ECC counts are the volatile ones (since the driver loaded),
    ``pcie_replays`` NVML's replay counter, ``remap_pending`` 1 while a row remap waits for a
    reset. ``reasons``: every active clock-event reason at each sample (NVML names, the SW power
    cap included). ``lost_s``: when NVML said the GPU is lost (fell off the bus), if it did."""

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
        n = _samples(self, ("t_s", *TELEMETRY_FIELDS))
        if self.reasons and len(self.reasons) != n:
            raise ValueError(f"reasons has {len(self.reasons)} samples, t_s has {n}")
        if not self.interval_s > 0:
            raise ValueError("interval_s must be positive")


@dataclass(frozen=True)
class PhaseRun:
    """One phase on one GPU: per interval (about a second each) its end (seconds since the burn
    started), its device time, and the work done in it (FLOP for ``gemm``, bytes read plus written
    for ``bandwidth`` and ``memtest``). ``shape``: (M, N, K) for the GEMM, (bytes,) otherwise."""

    phase: str
    dtype: str
    shape: tuple[int, ...]
    unit: str
    started_s: float
    planned_s: float
    t_s: Samples
    dt_s: Samples
    work: Samples
    iterations: int = 0
    finished: bool = False

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"unknown burn phase {self.phase!r}")
        if self.unit not in UNITS:
            raise ValueError(f"unknown unit {self.unit!r}")
        _samples(self, ("t_s", "dt_s", "work"))
        if any(x <= 0 for x in self.dt_s):
            raise ValueError("interval times must be positive")


@dataclass(frozen=True)
class SdcMismatch:
    """One result that differed from the first iteration's (``checksum``, ``full``: bit for bit) or
    from a float64 recomputation (``fp64``). ``element``: flat index in the output (-1 when only
    the checksum saw it); ``expected`` / ``got`` as the output's values, when known."""

    check: str
    iteration: int
    t_s: float
    element: int = -1
    expected: float | None = None
    got: float | None = None

    def __post_init__(self) -> None:
        if self.check not in SDC_CHECKS:
            raise ValueError(f"unknown SDC check {self.check!r}")


@dataclass(frozen=True)
class SdcRecord:
    """The GEMM's correctness checks: every iteration's checksum against the first's, a full
    bit-for-bit compare of a result each interval, float64 spot checks of ``fp64_elements``
    sampled outputs (``fp64_max_error``: the largest error in units of the tolerance's bound).
    ``mismatches``: the first ones found (at most ``MAX_MISMATCHES``), ``mismatch_count``: all."""

    iterations: int
    checksums: int
    full_compares: int
    fp64_checks: int
    fp64_elements: int
    fp64_max_error: float | None = None
    mismatches: tuple[SdcMismatch, ...] = ()
    mismatch_count: int = 0


@dataclass(frozen=True)
class BitErrorRange:
    """Consecutive words that read back wrong in one pattern of one pass: device addresses
    [start, end) and how many words and bits were wrong."""

    pattern: str
    pass_index: int
    start_address: int
    end_address: int
    words: int
    bits: int


@dataclass(frozen=True)
class MemtestRecord:
    """The memory test's coverage and findings: ``bytes_tested`` of ``free_bytes`` (free when it
    started), the patterns (``walking_ones`` and ``walking_zeros`` are 32 writes each), full
    passes over all of them, the time, and every bit error range (``error_bits`` in all)."""

    bytes_tested: int
    free_bytes: int
    patterns: tuple[str, ...]
    passes: int
    duration_s: float
    errors: tuple[BitErrorRange, ...] = ()
    error_bits: int = 0


@dataclass(frozen=True)
class BurnGpu:
    """One GPU's burn. ``stop``: how its worker ended early (None: every phase finished);
    ``control``: the positive control its worker ran (``CONTROLS``), if any."""

    index: int
    device: BenchDevice | None = None
    phases: tuple[PhaseRun, ...] = ()
    telemetry: Telemetry | None = None
    sdc: SdcRecord | None = None
    memtest: MemtestRecord | None = None
    stop: Stop | None = None
    notes: tuple[Note, ...] = ()
    control: str | None = None  # a positive control applied to this GPU (CONTROLS); None in every real burn

    def __post_init__(self) -> None:
        if self.control is not None and self.control not in CONTROLS:
            raise ValueError(f"unknown burn control {self.control!r} (known: {', '.join(CONTROLS)})")


@dataclass(frozen=True)
class Burn:
    """Every selected GPU's burn, run at once. ``minutes``: asked per GPU. ``xid_source``: where
    the kernel log was read (None: nowhere, ``xid_reasons`` say why), ``new_xids``: Xid lines that
    appeared during the burn. ``stopped``: Ctrl-C or a signal ended it (what was seen is kept)."""

    minutes: float
    started: str
    duration_s: float
    gpus: tuple[BurnGpu, ...]
    xid_source: str | None = None
    xid_reasons: tuple[str, ...] = ()
    new_xids: tuple[XidEvent, ...] = ()
    stopped: StopCause | None = None
    signal: str | None = None
