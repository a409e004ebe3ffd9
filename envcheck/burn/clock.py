"""Device time for the burn's intervals: CUDA events on a GPU, the host clock on a CPU (where torch is synchronous)."""

from __future__ import annotations

import time
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.cuda import Event


class Laps:
    """Device time between ``begin()`` and ``end()``, summed over the laps when the interval ends: the GEMM's calls
    alone (the checksums between them are not its work), or a whole interval of copies as one lap."""

    def __init__(self, torch: ModuleType, cuda: bool) -> None:
        self.torch = torch
        self.cuda = cuda
        self._pairs: list[tuple[Event, Event | None]] = []
        self._host = 0.0
        self._t0 = 0.0

    def begin(self) -> None:
        if self.cuda:
            e = self.torch.cuda.Event(enable_timing=True)
            e.record()
            self._pairs.append((e, None))
        else:
            self._t0 = time.perf_counter()

    def end(self) -> None:
        if self.cuda:
            e = self.torch.cuda.Event(enable_timing=True)
            e.record()
            self._pairs[-1] = (self._pairs[-1][0], e)
        else:
            self._host += time.perf_counter() - self._t0

    def total(self) -> float:
        """Seconds of every call since the last total (synchronises)."""
        if self.cuda:
            if self._pairs and self._pairs[-1][1] is not None:
                self._pairs[-1][1].synchronize()
            took = sum(float(a.elapsed_time(b)) for a, b in self._pairs if b is not None) / 1e3
            self._pairs = []
        else:
            took, self._host = self._host, 0.0
        return max(took, 1e-9)


def next_count(count: int, took_s: float, target_s: float) -> int:
    """Iterations for the next interval so it lasts about ``target_s`` (never more than 4x the last): the
    phase's time left caps it, so a phase ends near its planned time."""
    if took_s <= 0:
        return count * 2
    return max(1, min(count * 4, int(count * max(target_s, 0.0) / took_s)))
