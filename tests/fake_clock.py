"""A fake device clock for the timer: time advances only when a test's "work" advances ``t_us``.

It is what ``Timer.clock_factory`` returns in the tests (``mark``, ``elapsed_us``, ``synchronize``,
``host_s``); tests add the work they need (a noisy op, a kernel whose speed drifts).
"""

from __future__ import annotations


class FakeClock:
    def __init__(self) -> None:
        self.t_us = 0.0
        self.syncs = 0

    def mark(self) -> float:
        return self.t_us

    def elapsed_us(self, start: float, end: float) -> float:
        return end - start

    def synchronize(self) -> None:
        self.syncs += 1

    def host_s(self) -> float:
        return self.t_us / 1e6
