"""NVML sampling while an implementation is measured: clocks, temperature, power, clock-event reasons, kept raw
(``model.MonitorWindow``; the analysis decides what counts as throttled). A daemon thread, one NVML call per
quantity per sample (ctypes releases the GIL). It never raises: without NVML there is no window. Samples stay
aligned: a quantity refused for good or missing from most samples is left out, and so is a sample missing one.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from envcheck.model import MonitorWindow
from envcheck.probes.nvml import (
    CLOCK_MEM,
    CLOCK_SM,
    GPU_IS_LOST,
    PERMANENT_ERRORS,
    TEMPERATURE_GPU,
    NvmlCallError,
    NvmlLike,
    reason_names,
    slowing,
)

__all__ = ["LimitWatch", "Monitor", "reason_names", "window_state"]

# The clock-event reasons' query, then its name in drivers before R535.
EVENT_CALLS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


# MonitorWindow's field -> its query (nvidia-smi's Clocks, Temperature, Power Draw in mW).
READERS: dict[str, Callable[[NvmlLike, object], float]] = {
    "sm_mhz": lambda n, h: n.call("nvmlDeviceGetClockInfo", h, CLOCK_SM),
    "mem_mhz": lambda n, h: n.call("nvmlDeviceGetClockInfo", h, CLOCK_MEM),
    "temperature_c": lambda n, h: n.call("nvmlDeviceGetTemperature", h, TEMPERATURE_GPU),
    "power_w": lambda n, h: n.call("nvmlDeviceGetPowerUsage", h) * 1e-3,
}


@dataclass(frozen=True)
class NvmlSample:
    """One sample: seconds since the start, the quantities read (by field name), the active clock-event reasons
    (None: this driver gives none), and whether the GPU was lost."""

    t_s: float
    values: dict[str, float] = field(default_factory=dict)
    reasons: tuple[str, ...] | None = None
    lost: bool = False


def window_state(window: MonitorWindow | None) -> str:
    """A window's mean SM clock and power for the timer checks' logs (``1874 MHz 556 W``; ``n/a``: no clocks)."""
    if window is None or window.sm_mhz is None:
        return "n/a"
    power = f" {statistics.fmean(window.power_w):.0f} W" if window.power_w is not None else ""
    return f"{statistics.fmean(window.sm_mhz):.0f} MHz{power}"


class Monitor:
    """Samples one GPU every ``interval_s`` while the ``with`` block runs, and on enter and exit (so a short case
    gets two). ``index``: NVML's index, or better its UUID (torch's, without the prefix, too) or PCI bus id, since
    NVML ignores CUDA_VISIBLE_DEVICES. ``nvml``: the seam (None: no samples; initialised here, shut down by the
    caller); ``clock`` and ``sleep``: the time seam. ``window()`` holds every sample, across repeated blocks."""

    def __init__(self, nvml: NvmlLike | None, index: int | str, interval_s: float = 0.02, *,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] | None = None) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.nvml = nvml
        self.index = index
        self.interval_s = interval_s
        self._clock = clock
        self._stop = threading.Event()
        self._sleep = sleep if sleep is not None else self._stop.wait
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._handle: object = None  # NVML's device handle
        self._events_call: str | None = None
        self._rows: list[NvmlSample] = []
        self._t0 = 0.0
        self._dead: set[str] = set()  # quantities refused for good

    def __enter__(self) -> Monitor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Take the first sample and start the sampling thread (no-op without NVML)."""
        if self._thread is not None:
            return
        self._stop.clear()
        if not self._rows:  # a monitor entered again keeps one window: times from its first start
            self._t0 = self._clock()
        self._handle = self._open()
        if self._handle is None:
            return
        self._sample()
        self._thread = threading.Thread(target=every, name=f"envcheck-monitor-{self.index}", daemon=True,
                                        args=(self.interval_s, self._clock, self._sleep, self._stop, self._sample))
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and take the last sample; safe to call twice."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join(timeout=max(1.0, 10 * self.interval_s))
        self._sample()

    def window(self) -> MonitorWindow | None:
        """Every sample so far, raw; None when there is none (no NVML, or the GPU was lost at once)."""
        with self._lock:
            rows = list(self._rows)
        rows, keys, with_reasons = aligned(rows, [k for k in READERS if k not in self._dead])
        if not rows:
            return None
        columns = {k: [r.values[k] for r in rows] for k in keys}
        reasons = tuple(r.reasons or () for r in rows) if with_reasons else ()
        return MonitorWindow(interval_s=self.interval_s, t_s=[r.t_s for r in rows], reasons=reasons, **columns)

    def _open(self) -> object:
        """The device handle, and which clock-event query this driver answers; None disables sampling."""
        if self.nvml is None:
            return None
        try:
            if self.nvml.init() is not None:  # idempotent on an already initialised seam
                return None
            handle = self.nvml.call(*_handle_call(self.index))
        except Exception:  # noqa: BLE001 - a monitor must never break the benchmark it watches
            return None
        for name in EVENT_CALLS:
            try:
                self.nvml.call(name, handle)
            except NvmlCallError as e:
                if e.error_name in PERMANENT_ERRORS:
                    continue
            except Exception:  # noqa: BLE001 - see read_nvml
                continue
            self._events_call = name
            break
        return handle

    def _sample(self) -> None:
        handle = self._handle
        if handle is None:
            return
        t_s = self._clock() - self._t0
        readings: dict[str, float] = {}
        for key, read in READERS.items():
            if key in self._dead:
                continue
            value = self._read(lambda read=read: read(self.nvml, handle))
            if value is LOST:
                return
            if value is GONE:
                self._dead.add(key)
            elif isinstance(value, (int, float)):
                readings[key] = float(value)
        reasons: tuple[str, ...] | None = None
        if self._events_call is not None:
            mask = self._read(lambda: self.nvml.call(self._events_call, handle))
            if mask is LOST:
                return
            if mask is GONE:
                self._events_call = None
            elif isinstance(mask, int):
                reasons = tuple(sorted(slowing(reason_names(mask))))
        if not readings and reasons is None:
            return
        with self._lock:
            self._rows.append(NvmlSample(t_s, readings, reasons))

    def _read(self, call: Callable[[], object]) -> object:
        got = read_nvml(call)
        if got is LOST:
            self._handle = None  # nothing more to read from this GPU
        return got


class LimitWatch(Monitor):
    """Whether the GPU slowed for power or heat while the ``with`` block ran (the clock-event reasons ``slowing``
    keeps); ``limited()`` is None where the driver gives no reasons, or there is no NVML: unknown."""

    def __init__(self, nvml: NvmlLike | None, index: int | str, interval_s: float = 0.025) -> None:
        super().__init__(nvml, index, interval_s)

    def limited(self) -> bool | None:
        window = self.window()
        if window is None or not window.reasons:
            return None
        return any(window.reasons)


def _handle_call(device: int | str) -> tuple[str, int | str]:
    """The NVML call that finds ``device``: by index, by PCI bus id (has a colon) or by UUID."""
    if isinstance(device, int):
        return "nvmlDeviceGetHandleByIndex", device
    ident = str(device).strip()
    if ":" in ident:
        return "nvmlDeviceGetHandleByPciBusId", ident
    if not ident.upper().startswith(("GPU-", "MIG-")):
        ident = f"GPU-{ident}"  # torch's device properties print the UUID without NVML's prefix
    return "nvmlDeviceGetHandleByUUID", ident


LOST, GONE = object(), object()  # read_nvml's answers: the GPU is lost; the query is refused for good


def read_nvml(call: Callable[[], object]) -> object:
    """``call()``'s answer, ``LOST``, ``GONE``, or None where it failed this time only."""
    try:
        return call()
    except NvmlCallError as e:
        if e.error_name == GPU_IS_LOST:
            return LOST
        return GONE if e.error_name in PERMANENT_ERRORS else None
    except Exception:  # noqa: BLE001 - a malformed answer: none this time; sampling never breaks what it watches
        return None


def every(interval_s: float, clock: Callable[[], float], sleep: Callable[[float], object], stop: threading.Event,
          sample: Callable[[], object]) -> None:
    """``sample()`` every ``interval_s`` until ``stop``, at a fixed rate: a slow NVML call shortens the next wait."""
    next_at = clock() + interval_s
    while not stop.is_set():
        sleep(max(0.0, next_at - clock()))
        if stop.is_set():
            break
        sample()
        next_at = max(next_at + interval_s, clock())


def aligned(rows: Sequence[NvmlSample], keys: Iterable[str]) -> tuple[list[NvmlSample], list[str], bool]:
    """(the rows kept, the quantities kept, whether reasons are): a quantity, or the reasons, present in most rows
    is kept, and a row missing one kept is left out, so every column has one entry per row."""
    def mostly(present: Callable[[NvmlSample], bool]) -> bool:
        hits = sum(map(present, rows))
        return hits > 0 and 2 * hits >= len(rows)

    kept = [k for k in keys if mostly(lambda r, k=k: k in r.values)]
    reasons = mostly(lambda r: r.reasons is not None)
    rows = [r for r in rows if all(k in r.values for k in kept) and (r.reasons is not None or not reasons)]
    return rows, kept, reasons
