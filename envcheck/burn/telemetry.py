"""NVML telemetry of one GPU for the whole burn, about twice a second, in a daemon thread of the burn's worker
(NVML calls release the GIL, so samples keep coming while a phase hangs). A quantity refused for good is not
asked again; "GPU is lost" ends the sampling with a sample that says so."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from envcheck.bench.monitor import EVENT_CALLS, GONE, LOST, NvmlSample, aligned, every, read_nvml
from envcheck.model.burn import TELEMETRY_FIELDS, Telemetry
from envcheck.probes.nvml import (
    CLOCK_MEM,
    CLOCK_SM,
    ECC_COUNTER_VOLATILE,
    FI_MEMORY_TEMP,
    MEMORY_ERROR_CORRECTED,
    MEMORY_ERROR_UNCORRECTED,
    TEMPERATURE_GPU,
    NvmlCallError,
    NvmlLike,
    field_value,
    reason_names,
)

INTERVAL_S = 0.5  # twice a second: "at least once a second" even when a call runs late


TelemetrySample = NvmlSample  # its values named as ``TELEMETRY_FIELDS``


def _remap(nvml: NvmlLike, handle: object) -> tuple[float, float]:
    rows = nvml.call("nvmlDeviceGetRemappedRows", handle)  # [correctable, uncorrectable, pending, failure]
    return float(bool(rows[2])), float(rows[1])


# Each quantity: how to read it from a handle (a number, or a pair for the two remap columns).
READERS: dict[str, Callable[[NvmlLike, object], float | tuple[float, float]]] = {
    "sm_mhz": lambda n, h: n.call("nvmlDeviceGetClockInfo", h, CLOCK_SM),
    "mem_mhz": lambda n, h: n.call("nvmlDeviceGetClockInfo", h, CLOCK_MEM),
    "power_w": lambda n, h: n.call("nvmlDeviceGetPowerUsage", h) / 1e3,  # nvidia-smi: Power Draw (mW)
    "power_limit_w": lambda n, h: n.call("nvmlDeviceGetEnforcedPowerLimit", h) / 1e3,  # Enforced Power Limit
    "temperature_c": lambda n, h: n.call("nvmlDeviceGetTemperature", h, TEMPERATURE_GPU),
    "mem_temperature_c": lambda n, h: _field(n, h, FI_MEMORY_TEMP),
    "ecc_corrected": lambda n, h: n.call("nvmlDeviceGetTotalEccErrors", h, MEMORY_ERROR_CORRECTED,
                                         ECC_COUNTER_VOLATILE),
    "ecc_uncorrected": lambda n, h: n.call("nvmlDeviceGetTotalEccErrors", h, MEMORY_ERROR_UNCORRECTED,
                                           ECC_COUNTER_VOLATILE),
    "pcie_replays": lambda n, h: n.call("nvmlDeviceGetPcieReplayCounter", h),
    "remap": _remap,
}


def _field(nvml: NvmlLike, handle: object, field_id: int) -> float:
    value, why = field_value(nvml, handle, field_id)
    if value is None:
        raise NvmlCallError("nvmlDeviceGetFieldValues", "NVMLError_NotSupported", why or "no value")
    return value


class Sampler:
    """Samples GPU ``target`` (NVML index, UUID or PCI bus id) every ``interval_s`` into ``sink``
    from ``start()`` until ``stop()``. Never raises; without NVML it samples nothing."""

    def __init__(self, nvml: NvmlLike, handle: object, sink: Callable[[TelemetrySample], None], t0: float,
                 interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.nvml = nvml
        self.handle = handle
        self.sink = sink
        self.t0 = t0
        self.interval_s = interval_s
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._dead: set[str] = set()
        self._events: str | None = EVENT_CALLS[0]
        self.lost = False

    def sample(self) -> TelemetrySample | None:
        """One sample, handed to the sink (None once the GPU is lost or without a handle)."""
        if self.handle is None or self.lost:
            return None
        t_s = self.clock() - self.t0
        values: dict[str, float] = {}
        for name, read in READERS.items():
            if name in self._dead:
                continue
            got = read_nvml(lambda read=read: read(self.nvml, self.handle))
            if got is LOST:
                return self._lost(t_s)
            if got is GONE:
                self._dead.add(name)
            elif isinstance(got, tuple):
                values["remap_pending"], values["remapped_uncorrectable"] = got
            elif isinstance(got, (int, float)):
                values[name] = float(got)
        reasons: tuple[str, ...] | None = None
        while self._events is not None:
            mask = read_nvml(lambda name=self._events: self.nvml.call(name, self.handle))
            if mask is LOST:
                return self._lost(t_s)
            if mask is GONE:  # drivers before R535 have only the old name
                self._events = EVENT_CALLS[1] if self._events == EVENT_CALLS[0] else None
                continue
            if isinstance(mask, int):
                reasons = tuple(sorted(reason_names(mask)))
            break
        s = TelemetrySample(t_s, values, reasons)
        self.sink(s)
        return s

    def _lost(self, t_s: float) -> TelemetrySample:
        self.lost = True
        s = TelemetrySample(t_s, {}, None, lost=True)
        self.sink(s)
        return s

    def start(self) -> None:
        self.sample()
        self._thread = threading.Thread(target=every, name="envcheck-burn-telemetry", daemon=True,
                                        args=(self.interval_s, self.clock, self._stop.wait, self._stop, self.sample))
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.interval_s + 1)
            self._thread = None
        self.sample()


def to_telemetry(samples: Sequence[TelemetrySample], interval_s: float) -> Telemetry | None:
    """The samples as aligned columns (monitor.aligned); None without a sample."""
    lost = next((s.t_s for s in samples if s.lost), None)
    rows, keys, with_reasons = aligned([s for s in samples if not s.lost], TELEMETRY_FIELDS)
    if not rows and lost is None:
        return None
    columns = {k: [s.values[k] for s in rows] for k in keys}
    reasons = tuple(s.reasons or () for s in rows) if with_reasons and rows else ()
    return Telemetry(interval_s, [s.t_s for s in rows], reasons=reasons, lost_s=lost, **columns)  # type: ignore[arg-type]
