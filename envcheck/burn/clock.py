"""Device time for the burn's intervals: CUDA events on a GPU, the host clock on a CPU (where
every torch call is synchronous, so the host clock is the device's)."""

from __future__ import annotations

import time
from typing import Any


class Stopwatch:
    """``start()`` then ``stop()`` -> seconds of device work between them (synchronises)."""

    def __init__(self, torch: Any, cuda: bool) -> None:
        self.torch = torch
        self.cuda = cuda
        self._t0 = 0.0
        self._start: Any = None

    def start(self) -> None:
        if self.cuda:
            self._start = self.torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> float:
        if self.cuda:
            end = self.torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            return max(float(self._start.elapsed_time(end)) / 1e3, 1e-9)
        return max(time.perf_counter() - self._t0, 1e-9)


def next_count(count: int, took_s: float, target_s: float) -> int:
    """Iterations for the next interval so it lasts about ``target_s`` (never more than 4x the last)."""
    if took_s <= 0:
        return count * 2
    return max(1, min(count * 4, int(count * target_s / took_s)))
