"""Timing of device work: warm-up, settling, sample counts, interleaved sampling, the clock seam
(``Timer.clock_factory``). A ``Region`` is what a sample times (a graph replay of k calls, eager calls between
events, a host-clock batch), each sample divided by its calls. The rules and why: docs/measurement.md.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeAlias

from envcheck.model import Settings, Timing

if TYPE_CHECKING:
    import torch

# A launch-time or CPU sample lasts at least this long (CUDA events resolve about 0.5 us).
TARGET_SAMPLE_US = 100.0
MAX_CALLS_PER_SAMPLE = 100
MIN_WARMUP_CALLS = 3
ESTIMATE_SAMPLES = 3
# A turn: far shorter than the power and thermal swings it shares out, long enough for several 1 ms replays.
INTERLEAVE_TURN_US = 5000.0
# Settling: a held clock moves a block's median less than the tolerance, a falling one more; at most 1 s.
SETTLE_BLOCK_US = 25_000.0
SETTLE_TOLERANCE = 0.005
SETTLE_MAX_MS = 1000.0
# A load at the GPU's power limit holds the top clock 100-250 ms, then swings with a period of about a second:
# it settles past the first and its samples span one period (sampling.py).
SUSTAIN_SETTLE_MS = 400.0
SUSTAIN_WINDOW_MS = 1000.0
# From here on the 95% interval of the median spans about the middle half of the samples (the IQR).
STOP_MIN_SAMPLES = 20
Z95 = 1.96

GRAPH = "cuda_graph"
EAGER = "cuda_events"
HOST = "host_clock"
Mark: TypeAlias = "float | torch.cuda.Event"  # a host time, or a CUDA event recorded in the stream


class Clock(Protocol):
    """Marks in the stream of work (``elapsed_us`` valid after ``synchronize``); ``host_s``: host wall time."""

    def mark(self) -> Mark: ...

    def elapsed_us(self, start: Mark, end: Mark) -> float: ...

    def synchronize(self) -> None: ...

    def host_s(self) -> float: ...


class HostClock:
    """``perf_counter`` around synchronous work (CPU tensors finish before the call returns)."""

    def mark(self) -> float:
        return time.perf_counter()

    def elapsed_us(self, start: float, end: float) -> float:
        return (end - start) * 1e6

    def synchronize(self) -> None:
        pass

    def host_s(self) -> float:
        return time.perf_counter()


class CudaEventClock(HostClock):
    """CUDA events on the current stream (``elapsed_time`` is in milliseconds)."""

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def mark(self) -> torch.cuda.Event:
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def elapsed_us(self, start: torch.cuda.Event, end: torch.cuda.Event) -> float:
        return float(start.elapsed_time(end)) * 1e3

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()


def make_clock(backend: str) -> Clock:
    return CudaEventClock() if backend == "cuda" else HostClock()


def calls_per_sample(single_call_us: float, target_us: float = TARGET_SAMPLE_US,
                     cap: int = MAX_CALLS_PER_SAMPLE) -> int:
    """Calls in one sample so it lasts at least ``target_us``."""
    if not single_call_us > 0:
        return cap
    return max(1, min(cap, math.ceil(target_us / single_call_us)))


@dataclass(frozen=True)
class Region:
    """``run`` makes ``calls_per_sample`` calls of the op, timed by ``method``; ``window_ms``: how long its samples
    span (None: ``rep_ms``); ``spacer``: the untimed run ahead of a turn on an idle GPU (None: ``run``)."""

    run: Callable[[], object]
    method: str
    calls_per_sample: int = 1
    window_ms: float | None = None
    spacer: Callable[[], object] | None = None


def median_ci(samples: Sequence[float]) -> tuple[float, float]:
    """Distribution-free 95% interval of the median: order statistics n/2 -/+ 0.98 sqrt(n) (1-based), clamped."""
    xs = sorted(samples)
    n = len(xs)
    half = Z95 * math.sqrt(n) / 2
    lo = max(math.floor(n / 2 - half), 1)
    hi = min(math.ceil(1 + n / 2 + half), n)
    return xs[lo - 1], xs[hi - 1]


def median_fixed(samples: Sequence[float], stop_ci: float) -> bool:
    """Whether ``samples``' median lies within ``stop_ci`` of both ends of its 95% interval."""
    lo, hi = median_ci(samples)
    median = statistics.median(samples)
    return max(median - lo, hi - median) <= stop_ci * median


class Timer:
    """Warm-up and sampling of callables on one backend (``cuda`` or ``cpu``)."""

    clock_factory: ClassVar[Callable[[str], Clock]] = staticmethod(make_clock)

    def __init__(self, backend: str, settings: Settings) -> None:
        self.backend = backend
        self.settings = settings
        self.clock = type(self).clock_factory(backend)
        self.stopped_by: str | None = None  # why the last measure_interleaved ended (model.SAMPLING_STOPS)

    @property
    def eager_method(self) -> str:
        return EAGER if self.backend == "cuda" else HOST

    def first_call_s(self, fn: Callable[[], object]) -> float:
        """Wall time of one call until its work is done (a first call's compile and autotuning)."""
        t0 = self.clock.host_s()
        fn()
        self.clock.synchronize()
        return self.clock.host_s() - t0

    def warmup(self, fn: Callable[[], object], budget_ms: float | None = None) -> int:
        """Call ``fn`` for ``warmup_ms`` (or ``budget_ms``), at least 3 calls; the count."""
        calls = 0
        start = self.clock.host_s()
        budget_s = (self.settings.warmup_ms if budget_ms is None else budget_ms) / 1e3
        while calls < MIN_WARMUP_CALLS or self.clock.host_s() - start < budget_s:
            fn()
            calls += 1
            if calls % 8 == 0 or calls <= MIN_WARMUP_CALLS:  # never seconds of queued work
                self.clock.synchronize()
        self.clock.synchronize()
        return calls

    def settle(self, region: Callable[[], object], min_ms: float = 0.0) -> tuple[int, bool]:
        """Run ``region`` in blocks until, ``min_ms`` or more in, a block's median is within ``SETTLE_TOLERANCE`` of
        the one before (or ``max(SETTLE_MAX_MS, 2 min_ms)`` passed); (blocks run, whether it settled)."""
        longest_ms = max(SETTLE_MAX_MS, 2 * min_ms)
        start = self.clock.host_s()
        first = self._samples(region, ESTIMATE_SAMPLES)
        n = max(1, math.ceil(SETTLE_BLOCK_US / max(statistics.median(first), 1e-3)))
        before: float | None = None
        blocks = 0
        while True:
            now = statistics.median(self._samples(region, n))
            blocks += 1
            ran_ms = (self.clock.host_s() - start) * 1e3
            if before is not None and ran_ms >= min_ms and abs(now - before) <= SETTLE_TOLERANCE * before:
                return blocks, True
            if ran_ms >= longest_ms:
                return blocks, False
            before = now

    def _samples(self, region: Callable[[], object], n: int) -> list[float]:
        marks = self._enqueue(region, n)
        self.clock.synchronize()
        return [self.clock.elapsed_us(s, e) for s, e in marks]

    def _enqueue(self, region: Callable[[], object], n: int) -> list[tuple[Mark, Mark]]:
        """``n`` samples enqueued back to back, not synchronised: their (start, end) marks."""
        marks = []
        for _ in range(n):
            start = self.clock.mark()
            region()
            marks.append((start, self.clock.mark()))
        return marks

    def sample_count(self, estimate_us: float, window_ms: float | None = None) -> int:
        """``window_ms`` (``rep_ms``) of samples of ``estimate_us``, within [min_samples, max_samples]."""
        s = self.settings
        if not estimate_us > 0:
            return s.max_samples
        n = math.ceil((s.rep_ms if window_ms is None else window_ms) * 1e3 / estimate_us)
        return max(s.min_samples, min(s.max_samples, n))

    def estimate_us(self, region: Callable[[], object]) -> float:
        """Median time of a few (discarded) samples of ``region``."""
        return statistics.median(self._samples(region, ESTIMATE_SAMPLES))

    def shortest_us(self, region: Callable[[], object]) -> float:
        """Shortest of a few (discarded) samples: for sizing, where a sample may be too long, never too short."""
        return min(self._samples(region, ESTIMATE_SAMPLES))

    def _fixed(self, regions: Sequence[Region], marks: dict[int, list[tuple[Mark, Mark]]], stop_ci: float
               ) -> tuple[bool, bool]:
        """(whether the marks were read: a synchronisation, whether every graph median is fixed within ``stop_ci``)."""
        graphs = [i for i in marks if regions[i].method == GRAPH]
        if (not graphs or any(len(m) < self.settings.min_samples for m in marks.values())
                or any(len(marks[i]) < STOP_MIN_SAMPLES for i in graphs)):
            return False, False
        self.clock.synchronize()
        return True, all(median_fixed([self.clock.elapsed_us(s, e) for s, e in marks[i]], stop_ci) for i in graphs)

    def measure(self, region: Region) -> Timing:
        """Timing per call of one region (raises what the region raised)."""
        (result,) = self.measure_interleaved([region])
        if isinstance(result, BaseException):
            raise result
        return result

    def measure_interleaved(self, regions: Sequence[Region], stop_ci: float | None = None
                            ) -> list[Timing | BaseException]:
        """One Timing per region, their samples taken in turns (forwards, then backwards) so drift falls on all alike;
        a region that raises gets its exception. With ``stop_ci`` and no ``window_ms`` the window may end early;
        ``stopped_by`` says why it ended."""
        windowed = any(r.window_ms is not None for r in regions)
        if windowed:
            stop_ci = None
        self.stopped_by = "window" if windowed else "count"
        results: list[Timing | BaseException | None] = [None] * len(regions)
        counts: dict[int, int] = {}
        busy_us = 0.0  # the longest region's share of the window
        for i, r in enumerate(regions):
            try:
                estimate = self.estimate_us(r.run)
            except Exception as e:  # noqa: BLE001 - this region's failure, not the group's
                results[i] = e
                continue
            counts[i] = self.sample_count(estimate, r.window_ms)
            busy_us = max(busy_us, counts[i] * max(estimate, 0.0))
        if counts:
            turns = max(1, min(min(counts.values()), math.ceil(busy_us / INTERLEAVE_TURN_US)))
            # Graph turns side by side, then eager ones: one spacer per round.
            marks: dict[int, list[tuple[Mark, Mark]]] = {
                i: [] for i in sorted(counts, key=lambda i: regions[i].method == EAGER)}
            idle = True  # the estimates ended with a synchronisation
            for t in range(turns):
                # Every other round backwards: a drift's linear part cancels.
                order = list(marks) if t % 2 == 0 else list(reversed(marks))
                for i in order:
                    n, r = counts[i], regions[i]
                    try:
                        if r.method == EAGER:
                            self.clock.synchronize()
                        elif r.method == GRAPH and idle:
                            (r.spacer or r.run)()  # the spacer: see the module docstring
                        marks[i] += self._enqueue(r.run, n * (t + 1) // turns - n * t // turns)
                    except Exception as e:  # noqa: BLE001
                        results[i] = e
                        del marks[i]
                    idle = r.method == EAGER
                if stop_ci is not None and t + 1 < turns:
                    synced, fixed = self._fixed(regions, marks, stop_ci)
                    if fixed:
                        self.stopped_by = "ci"
                        break
                    idle = idle or synced  # after a synchronisation the next graph turn needs its spacer
            self.clock.synchronize()
            for i, m in marks.items():
                k = max(1, regions[i].calls_per_sample)
                samples = [self.clock.elapsed_us(s, e) / k for s, e in m]
                try:
                    results[i] = Timing.from_samples(regions[i].method, samples, calls_per_sample=k)
                except ValueError as e:  # a clock that read zero or less: no timing, said so
                    results[i] = e
        return [r if r is not None else RuntimeError("not measured") for r in results]
