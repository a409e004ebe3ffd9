"""NVML sampling while a group of benchmark cases runs: clocks, temperature, power, clock-event reasons.

A case measured while the GPU was power- or heat-limited is not the GPU's real speed. The
monitor keeps every sample of its window raw (``model.MonitorWindow``); the analysis decides
what counts as throttled. The sampler runs in a daemon thread and costs one NVML call per
quantity per sample (ctypes releases the GIL during each call, so the thread barely touches
the Python that launches kernels). It never raises: without NVML the window has no samples.

Samples stay aligned (one entry per sample in every quantity of the window): a quantity NVML
refuses for good (Not Supported, No Permission), or that failed in most samples (a timeout on
every call), is left out of the window; a sample that missed a quantity kept in it (a
transient NVML error) is left out of the window.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from envcheck.model import MonitorWindow
from envcheck.probes.nvml import (
    CLOCK_MEM,
    CLOCK_SM,
    GPU_IS_LOST,
    PERMANENT_ERRORS,
    TEMPERATURE_GPU,
    NvmlCallError,
    reason_names,
    slowing,
)

__all__ = ["LimitWatch", "Monitor", "reason_names", "window_state"]

_EVENTS = "nvmlDeviceGetCurrentClocksEventReasons"
_EVENTS_OLD = "nvmlDeviceGetCurrentClocksThrottleReasons"  # drivers before R535


@dataclass
class _Quantity:
    """One sampled NVML query."""

    call: str
    args: tuple[Any, ...]
    scale: float = 1.0
    live: bool = True


def window_state(window: MonitorWindow | None) -> str:
    """The mean SM clock and power of a window, for the timer checks' logs (``1874 MHz 556 W``;
    ``n/a`` without clock samples)."""
    if window is None or window.sm_mhz is None:
        return "n/a"
    power = f" {statistics.fmean(window.power_w):.0f} W" if window.power_w is not None else ""
    return f"{statistics.fmean(window.sm_mhz):.0f} MHz{power}"


# MonitorWindow's field for each quantity.
_FIELDS = {"sm_clock": "sm_mhz", "mem_clock": "mem_mhz", "temperature": "temperature_c", "power": "power_w"}


@dataclass
class _Row:
    t_s: float
    values: dict[str, float]
    reasons: tuple[str, ...] | None  # None: this driver gives no clock-event reasons


class Monitor:
    """Samples one GPU every ``interval_s`` while the ``with`` block runs.

    ``index`` is NVML's device index, or (better, from a CUDA device) its UUID
    (``"GPU-8d0ff531-..."``; torch's ``props.uuid`` without the prefix works too) or
    PCI bus id: NVML ignores ``CUDA_VISIBLE_DEVICES`` and orders devices by PCI bus,
    while CUDA's default order is fastest first, so CUDA device 0 need not be NVML 0.

    ``nvml`` is the NVML seam (initialised here if it is not yet; the caller shuts
    it down), or None: no samples. ``clock`` and
    ``sleep`` are the time seam: by default ``time.monotonic`` and a wait on the
    monitor's stop event (so leaving the block never waits out an interval). A
    sample is also taken on enter and on exit, so even a case shorter than one
    interval gets two. ``window()`` gives every sample taken, across repeated blocks.
    """

    def __init__(
        self,
        nvml: Any,
        index: int | str,
        interval_s: float = 0.02,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
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
        self._handle: Any = None
        self._events_call: str | None = None
        self._rows: list[_Row] = []
        self._t0 = 0.0
        self._quantities: dict[str, _Quantity] = {
            "sm_clock": _Quantity("nvmlDeviceGetClockInfo", (CLOCK_SM,)),
            "mem_clock": _Quantity("nvmlDeviceGetClockInfo", (CLOCK_MEM,)),
            "temperature": _Quantity("nvmlDeviceGetTemperature", (TEMPERATURE_GPU,)),
            "power": _Quantity("nvmlDeviceGetPowerUsage", (), scale=1e-3),  # mW -> W
        }

    # -- lifecycle

    def __enter__(self) -> Monitor:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
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
        self._thread = threading.Thread(target=self._run, name=f"envcheck-monitor-{self.index}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and take the last sample; safe to call twice."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join(timeout=max(1.0, 10 * self.interval_s))
        self._sample()

    # -- results

    def window(self) -> MonitorWindow | None:
        """Every sample so far, raw; None when there is none (no NVML, or the GPU was lost at once)."""
        with self._lock:
            rows = list(self._rows)

        def mostly(present: Callable[[_Row], bool]) -> bool:
            hits = sum(map(present, rows))
            return hits > 0 and 2 * hits >= len(rows)

        keys = [k for k, q in self._quantities.items() if q.live and mostly(lambda r, k=k: k in r.values)]
        with_reasons = mostly(lambda r: r.reasons is not None)
        rows = [r for r in rows if all(k in r.values for k in keys) and (r.reasons is not None or not with_reasons)]
        if not rows:
            return None
        columns = {_FIELDS[k]: [r.values[k] for r in rows] for k in keys}
        reasons = tuple(r.reasons or () for r in rows) if with_reasons else ()
        return MonitorWindow(interval_s=self.interval_s, t_s=[r.t_s for r in rows], reasons=reasons, **columns)

    # -- sampling

    def _open(self) -> Any:
        """The device handle, and which clock-event query this driver answers; None disables sampling."""
        if self.nvml is None:
            return None
        try:
            if self.nvml.init() is not None:  # idempotent on an already initialised seam
                return None
            handle = self.nvml.call(*_handle_call(self.index))
        except Exception:  # noqa: BLE001 - a monitor must never break the benchmark it watches
            return None
        for name in (_EVENTS, _EVENTS_OLD):
            try:
                self.nvml.call(name, handle)
            except NvmlCallError as e:
                if e.error_name in PERMANENT_ERRORS:
                    continue
            except Exception:  # noqa: BLE001 - see _read
                continue
            self._events_call = name
            break
        return handle

    def _run(self) -> None:
        next_at = self._clock() + self.interval_s
        while not self._stop.is_set():
            self._sleep(max(0.0, next_at - self._clock()))
            if self._stop.is_set():
                break
            self._sample()
            # Fixed-rate schedule: a slow NVML call shortens the next wait instead of drifting.
            next_at = max(next_at + self.interval_s, self._clock())

    def _sample(self) -> None:
        handle = self._handle
        if handle is None:
            return
        t_s = self._clock() - self._t0
        readings: dict[str, float] = {}
        for key, q in self._quantities.items():
            if not q.live:
                continue
            value = self._read(q.call, handle, *q.args)
            if value is _LOST:
                return
            if value is _FAILED_FOR_GOOD:
                q.live = False
            elif isinstance(value, (int, float)):
                readings[key] = float(value) * q.scale
        reasons: tuple[str, ...] | None = None
        if self._events_call is not None:
            mask = self._read(self._events_call, handle)
            if mask is _LOST:
                return
            if mask is _FAILED_FOR_GOOD:
                self._events_call = None
            elif isinstance(mask, int):
                reasons = tuple(sorted(slowing(reason_names(mask))))
        if not readings and reasons is None:
            return
        with self._lock:
            self._rows.append(_Row(t_s, readings, reasons))

    def _read(self, name: str, *args: Any) -> Any:
        try:
            return self.nvml.call(name, *args)
        except NvmlCallError as e:
            if e.error_name == GPU_IS_LOST:
                self._handle = None  # nothing more to read from this GPU
                return _LOST
            if e.error_name in PERMANENT_ERRORS:
                return _FAILED_FOR_GOOD
            return None
        except Exception:  # noqa: BLE001 - see _open
            return None


class LimitWatch:
    """Whether the GPU slowed for power or heat while the ``with`` block ran: NVML's clock-event
    reasons (those ``slowing`` keeps) sampled every ``interval_s`` by a ``Monitor``. ``limited()``
    is None where the driver gives no reasons (or there is no NVML): unknown."""

    def __init__(self, nvml: Any, index: int | str, interval_s: float = 0.025) -> None:
        self._monitor = Monitor(nvml, index, interval_s)

    def __enter__(self) -> LimitWatch:
        self._monitor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._monitor.stop()

    def limited(self) -> bool | None:
        window = self._monitor.window()
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


_LOST = object()
_FAILED_FOR_GOOD = object()
