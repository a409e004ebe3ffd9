"""Where the worker's time goes: host seconds per named phase (``model.BENCH_PHASES``, ``CASE_PHASES``)."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Stopwatch:
    """Seconds per phase since ``zero`` (``clock``: seconds, the test seam)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter, zero: float | None = None) -> None:
        self._clock = clock
        self.zero = clock() if zero is None else zero
        self.seconds: dict[str, float] = {}

    def now(self) -> float:
        return self._clock() - self.zero

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + max(0.0, seconds)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as part of ``name`` (also when it raises: the time was spent)."""
        start = self._clock()
        try:
            yield
        finally:
            self.add(name, self._clock() - start)

    def child(self) -> Stopwatch:
        """A stopwatch of its own (a case's phases) on the same clock and zero."""
        return Stopwatch(self._clock, self.zero)

    def rounded(self) -> dict[str, float]:
        """The phases in milliseconds' precision, as a report keeps them."""
        return {name: round(s, 4) for name, s in self.seconds.items()}
