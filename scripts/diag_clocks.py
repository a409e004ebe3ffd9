"""What one GPU's clocks and NVLink error counters did while a burst ran, read from NVML in a thread: the SM and
memory clocks and the clock event reasons every ``period_s``, the NVLink replay, recovery and CRC counters summed
over the active links every ``links_every`` reads. For the torchrun diagnostics (``diag_alltoall_ramp.py
--clocks``): was a burst's slow pace a clock's or a link's doing? One read of 18 links' counters takes tens of
milliseconds, so the first is taken in ``start``, before the burst: the clocks are read from its first
millisecond. (The 1711Z logs were made before, when the thread's first read was a link read and a burst's first
~50 ms had no clock reads.)"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass

import pynvml

LINK_COUNTERS = (("replay", pynvml.NVML_NVLINK_ERROR_DL_REPLAY), ("recovery", pynvml.NVML_NVLINK_ERROR_DL_RECOVERY),
                 ("crc", pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA))


@dataclass(frozen=True)
class Read:
    """One read: seconds since the poller's start, SM and memory clocks (MHz), the event reasons' bitmask, and the
    link counters' sums (None where this read did not take them)."""

    t: float
    sm: int
    mem: int
    reasons: int
    links: tuple[int, ...] | None


class Poller:
    def __init__(self, index: int, period_s: float = 0.0005, links_every: int = 20) -> None:
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.period_s, self.links_every = period_s, links_every
        self.links = [link for link in range(pynvml.NVML_NVLINK_MAX_LINKS) if self._active(link)]
        self.reads: list[Read] = []
        self.t0 = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _active(self, link: int) -> bool:
        try:
            return pynvml.nvmlDeviceGetNvLinkState(self.handle, link) == pynvml.NVML_FEATURE_ENABLED
        except pynvml.NVMLError:
            return False

    def _link_sums(self) -> tuple[int, ...]:
        return tuple(sum(pynvml.nvmlDeviceGetNvLinkErrorCounter(self.handle, link, cid) for link in self.links)
                     for _, cid in LINK_COUNTERS)

    def _read(self, links: tuple[int, ...] | None) -> Read:
        h = self.handle
        return Read(time.perf_counter() - self.t0, pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                    pynvml.nvmlDeviceGetCurrentClocksEventReasons(h), links)

    def _run(self) -> None:
        n = 1
        while not self._stop.is_set():
            self.reads.append(self._read(self._link_sums() if n % self.links_every == 0 else None))
            n += 1
            time.sleep(self.period_s)

    def start(self) -> float:
        """Take the link counters, then start reading the clocks; returns the host time (perf_counter) that
        Read.t counts from (after the link read)."""
        links = self._link_sums()
        self.t0 = time.perf_counter()
        self.reads = [dataclasses.replace(self._read(links), t=0.0)]  # the counters as the burst starts
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self.t0

    def stop(self) -> list[Read]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.reads


def window(reads: list[Read], lo_ms: float, hi_ms: float) -> tuple[int, int, int, tuple[int, ...] | None] | None:
    """(lowest SM clock, lowest memory clock, reasons seen, link counters' growth) over reads between ``lo_ms`` and
    ``hi_ms`` since the start (the growth from the last link read at or before the window's start to the last
    inside it)."""
    inside = [r for r in reads if lo_ms <= r.t * 1e3 < hi_ms]
    if not inside:
        return None
    reasons = 0
    for r in inside:
        reasons |= r.reasons
    before = [r.links for r in reads if r.links is not None and r.t * 1e3 <= lo_ms]
    within = [r.links for r in inside if r.links is not None]
    grew = (tuple(b - a for a, b in zip(before[-1], within[-1], strict=True)) if before and within else None)
    return min(r.sm for r in inside), min(r.mem for r in inside), reasons, grew
