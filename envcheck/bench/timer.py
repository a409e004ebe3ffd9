"""Timing of device work: warm-up, sample counts, interleaved sampling, and the clock seam.

A ``Clock`` places timestamps in the stream of work (CUDA events on a GPU, ``perf_counter``
around synchronous calls on the CPU) and reads the time between two of them once the device
is synchronised. ``Timer.clock_factory`` is the one seam: tests swap it for a fake clock
whose "device" advances by seeded noisy costs, so the statistics are checked without a GPU.

What a sample is decides what the time means (a ``Region``): a CUDA-graph replay of ``k``
back-to-back calls (GPU time, launch gaps removed; graphs.py sizes ``k``), a batch of eager
calls between CUDA events (launch time, what a Python caller pays) or, on the CPU, a batch of
calls between host-clock reads. Each sample is divided by its calls.

How many samples (the stated rule, ``Timer.sample_count``): ``rep_ms`` of sampling at the
estimated sample length (the median of three discarded samples), clamped to
[``min_samples``, ``max_samples``]: a fixed sampling window with a cap, so a report keeps every
raw sample and stays compact (200 samples of float32 are about 1 KiB of JSON).

An implementation's two times are taken interleaved (``Timer.measure_interleaved``): its GPU
time's graph and its launch time's eager batch take their samples in turns of about
``INTERLEAVE_TURN_US``, round-robin, forwards then backwards, until each has its count, so both
see the same drift. A GPU at its power cap (an H200 at 700 W under tensor-core load) lowers its
clocks by 20-30% within a second; the implementations of a group are therefore not sampled in
turns with each other (they would share one power budget: sampling.py) but one after another,
each once it has settled (``Timer.settle``): its graph replayed back to back in blocks of
``SETTLE_BLOCK_US`` until the median of a block is within ``SETTLE_TOLERANCE`` of the block
before, at most ``SETTLE_MAX_MS``. Its samples then measure the state it keeps under its own
load, whatever ran before it. A compute-bound one whose load meets the GPU's power or thermal
limit (``sampling.py`` says how that is seen) settles at least ``SUSTAIN_SETTLE_MS`` and its GPU
time's samples span at least ``SUSTAIN_WINDOW_MS``: such a load holds the top clock for its first
100-250 ms, until the power limiter cuts in, and swings with a period of about a second after that.

Sequential stopping (``stop_ci``, recorded as ``Settings.stop_ci``): a window whose regions are
not sustained may end before every region has its count. After each round of turns, once every
region has at least ``min_samples`` samples and every graph region (GPU time) at least
``STOP_MIN_SAMPLES``, the window ends if each graph region's median lies within ``stop_ci`` of both
ends of its distribution-free 95% confidence interval (the order statistics at n/2 -+ 0.98 sqrt(n):
``median_ci``). The interval says how well the samples taken so far fix the median, whatever their
distribution; only its width decides, never the value, so stopping early biases no estimate. A graph
replay of ~1 ms that has settled (H200, memory-bound cases: CV 0.1-0.5%) fixes its median within
0.5% after 20-30 samples instead of the 100 of ``rep_ms`` = 100; the launch time, sampled in the same
turns, stops with it (launch gaps on the host are not what the window must pin down). A sustained
region (``window_ms``) is never cut short: it must span the power limiter's swing.

Two rules at the turn boundaries, both applied before a sample is taken, none dropped after:

* an eager (launch-time) turn starts on an idle GPU (the timer synchronises first): launch
  time is what a Python caller pays, seen only when the GPU is not already busy; queued behind
  graph replays, eager calls would be launched ahead of the GPU and their events would show
  the GPU's spacing instead (torch vector_add 1024 read 1.9 us instead of ~5.5 us on an H200);
* a graph turn that starts on an idle GPU (the first turn, or one after an eager turn) begins
  with one untimed replay of its graph (the *spacer*). Without it the first timed replay of
  the turn carries the graph's launch latency (the start event fires at once on an idle GPU,
  the kernels only after the launch): on an H200 that gave 6-19% spikes every 32-64 samples.
  With the spacer every timed replay is queued behind GPU work, as the other replays are.
  Within a round the graph turns come first and the eager turns after them (reversed every
  other round), so one spacer per round is enough.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from envcheck.model import Settings, Timing

# A launch-time or CPU sample should last at least this long: CUDA events resolve about 0.5 us,
# and a few-us sample would be mostly resolution and event overhead.
TARGET_SAMPLE_US = 100.0
MAX_CALLS_PER_SAMPLE = 100
MIN_WARMUP_CALLS = 3
ESTIMATE_SAMPLES = 3
# One region's turn in an interleaved measurement lasts about this long: far shorter than the
# power-cap and thermal swings it must share out evenly (hundreds of ms), long enough that a
# turn holds several 1 ms graph replays, so the spacer replay (one per round) costs a small
# share of the window.
INTERLEAVE_TURN_US = 5000.0
# Settling (Timer.settle): blocks of about 25 ms, long enough that a block's median moves by less
# than the tolerance when the clock holds (1 ms graph replays: 0.1-0.3% apart), short enough that
# a clock still falling moves it by more; never more than a second in all (or twice the minimum).
SETTLE_BLOCK_US = 25_000.0
SETTLE_TOLERANCE = 0.005
SETTLE_MAX_MS = 1000.0
# A compute-bound implementation (tensor-core work near the power cap) is timed in the state it
# holds under seconds of its own load. From an idle GPU its time holds for the first 100-250 ms at
# the top clock, then the power limiter cuts in; after that the clock swings with a period of about a
# second (NVML's one-second power average reaching the cap). On an H100 at its 700 W cap, cuDNN's
# conv2d read 533 us 50 ms in, 551 us at 0.25-0.5 s and 567 us in the fourth second, linear
# forward + backward 620, 673 and 686 us (evidence/device-logs/2026-11-26_0558Z_h100_power_ramp.txt.gz).
# So it settles at least SUSTAIN_SETTLE_MS, and its samples span at least SUSTAIN_WINDOW_MS: one
# period of the swing, not a phase of it.
SUSTAIN_SETTLE_MS = 400.0
SUSTAIN_WINDOW_MS = 1000.0
# Sequential stopping: a graph region's median is judged fixed only from this many samples on (the
# 95% interval then spans the middle half of the samples, about the IQR).
STOP_MIN_SAMPLES = 20
Z95 = 1.96

GRAPH = "cuda_graph"
EAGER = "cuda_events"
HOST = "host_clock"


class Clock(Protocol):
    """Timestamps in the device's stream of work."""

    def mark(self) -> Any:
        """Place a timestamp after the work enqueued so far."""

    def elapsed_us(self, start: Any, end: Any) -> float:
        """Microseconds between two marks; valid after ``synchronize``."""

    def synchronize(self) -> None:
        """Wait until all enqueued work has finished."""

    def host_s(self) -> float:
        """Host wall time in seconds (for the warm-up and sample budgets)."""


class CudaEventClock:
    """CUDA events on the current stream (``elapsed_time`` is in milliseconds)."""

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def mark(self) -> Any:
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def elapsed_us(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) * 1e3

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()

    def host_s(self) -> float:
        return time.perf_counter()


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


def make_clock(backend: str) -> Clock:
    return CudaEventClock() if backend == "cuda" else HostClock()


def calls_per_sample(single_call_us: float, target_us: float = TARGET_SAMPLE_US,
                     cap: int = MAX_CALLS_PER_SAMPLE) -> int:
    """Calls to put in one sample so it lasts at least ``target_us`` (1 for long calls)."""
    if not single_call_us > 0:
        return cap
    return max(1, min(cap, math.ceil(target_us / single_call_us)))


@dataclass(frozen=True)
class Region:
    """What one implementation times: ``run`` makes ``calls_per_sample`` calls of the op.

    ``method``: ``cuda_graph`` (``run`` replays a graph), ``cuda_events`` (eager calls) or
    ``host_clock`` (CPU). The Region of a graph keeps the graph alive through ``run``.
    """

    run: Callable[[], Any]
    method: str
    calls_per_sample: int = 1
    # How long its samples span (None: the settings' ``rep_ms``), and the untimed run that puts
    # GPU work ahead of its first sample after an idle GPU (None: ``run`` itself).
    window_ms: float | None = None
    spacer: Callable[[], Any] | None = None


def median_ci(samples: Sequence[float]) -> tuple[float, float]:
    """Distribution-free 95% confidence interval of the median: the order statistics of ranks
    n/2 - 0.98 sqrt(n) and 1 + n/2 + 0.98 sqrt(n) (1-based), clamped to the samples."""
    xs = sorted(samples)
    n = len(xs)
    half = Z95 * math.sqrt(n) / 2
    lo = max(math.floor(n / 2 - half), 1)
    hi = min(math.ceil(1 + n / 2 + half), n)
    return xs[lo - 1], xs[hi - 1]


def median_fixed(samples: Sequence[float], stop_ci: float) -> bool:
    """Whether ``samples``' median lies within ``stop_ci`` of both ends of its 95% interval."""
    if len(samples) < STOP_MIN_SAMPLES:
        return False
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
        """How eager calls are timed on this backend."""
        return EAGER if self.backend == "cuda" else HOST

    def first_call_s(self, fn: Callable[[], Any]) -> float:
        """Wall time of one call until its work is done: compile + autotune on a first call."""
        t0 = self.clock.host_s()
        fn()
        self.clock.synchronize()
        return self.clock.host_s() - t0

    def warmup(self, fn: Callable[[], Any], budget_ms: float | None = None) -> int:
        """Call ``fn`` until ``warmup_ms`` (or ``budget_ms``) has passed, at least 3 calls; returns the count.

        Fills caches that would otherwise land in the first samples: allocator blocks, the
        cuBLAS handle and workspace, Triton's launcher, CPU thread pools, GPU clocks ramping up.
        """
        calls = 0
        start = self.clock.host_s()
        budget_s = (self.settings.warmup_ms if budget_ms is None else budget_ms) / 1e3
        while calls < MIN_WARMUP_CALLS or self.clock.host_s() - start < budget_s:
            fn()
            calls += 1
            if calls % 8 == 0 or calls <= MIN_WARMUP_CALLS:
                # Bound the queue: without this the host could enqueue seconds of work
                # before the budget check sees any of it finish.
                self.clock.synchronize()
        self.clock.synchronize()
        return calls

    def settle(self, region: Callable[[], Any], min_ms: float = 0.0) -> tuple[int, bool]:
        """Run ``region`` back to back in blocks of about ``SETTLE_BLOCK_US`` until, ``min_ms`` or
        more into it, the median of a block is within ``SETTLE_TOLERANCE`` of the previous block's,
        or ``max(SETTLE_MAX_MS, 2 min_ms)`` have passed; returns the blocks run and whether the
        time settled (module docstring)."""
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

    def _samples(self, region: Callable[[], Any], n: int) -> list[float]:
        marks = self._enqueue(region, n)
        self.clock.synchronize()
        return [self.clock.elapsed_us(s, e) for s, e in marks]

    def _enqueue(self, region: Callable[[], Any], n: int) -> list[tuple[Any, Any]]:
        """``n`` samples enqueued back to back, not synchronised: their (start, end) marks."""
        marks = []
        for _ in range(n):
            start = self.clock.mark()
            region()
            marks.append((start, self.clock.mark()))
        return marks

    def sample_count(self, estimate_us: float, window_ms: float | None = None) -> int:
        """``window_ms`` (default ``rep_ms``) of samples of ``estimate_us`` each, clamped to
        [min_samples, max_samples]."""
        s = self.settings
        if not estimate_us > 0:
            return s.max_samples
        n = math.ceil((s.rep_ms if window_ms is None else window_ms) * 1e3 / estimate_us)
        return max(s.min_samples, min(s.max_samples, n))

    def estimate_us(self, region: Callable[[], Any]) -> float:
        """Median time of a few (discarded) samples of ``region``."""
        return statistics.median(self._samples(region, ESTIMATE_SAMPLES))

    def shortest_us(self, region: Callable[[], Any]) -> float:
        """Shortest of a few (discarded) samples: for sizing, where a sample can be too long
        (a slow first replay, a host that fell behind) but never too short."""
        return min(self._samples(region, ESTIMATE_SAMPLES))

    def _fixed(self, regions: Sequence[Region], marks: dict[int, list[tuple[Any, Any]]], stop_ci: float
               ) -> tuple[bool, bool]:
        """Whether the marks were read (the device synchronised to read them), and whether the window
        can end now (sequential stopping): every region has its minimum and every graph region's
        median is fixed within ``stop_ci``."""
        graphs = [i for i in marks if regions[i].method == GRAPH]
        if not graphs or any(len(m) < self.settings.min_samples for m in marks.values()):
            return False, False
        if any(len(marks[i]) < STOP_MIN_SAMPLES for i in graphs):
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
        """One Timing per region, their samples taken in turns so that drift falls on all alike.

        Each region gets its own sample count (``sample_count`` of its estimate), split into
        the same number of turns; the turns go round-robin, forwards then backwards, so every
        region's samples spread evenly over the whole window. A region that raises (in its
        estimate or a turn) gets the exception as its result and drops out; the others go on.
        Marks are read after one synchronisation at the end; the other waits are those of
        the turn rules in the module docstring. With ``stop_ci`` (and no region with a
        ``window_ms`` of its own) the window may end early: sequential stopping, module docstring.
        """
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
            # Graph turns side by side, then eager ones: a graph turn after an eager one needs a
            # spacer, and this way only one per round does.
            marks: dict[int, list[tuple[Any, Any]]] = {
                i: [] for i in sorted(counts, key=lambda i: regions[i].method == EAGER)}
            idle = True  # the estimates ended with a synchronisation
            for t in range(turns):
                # Every other round runs backwards (a, b, c, c, b, a, ...): within a round the
                # later regions meet a slightly slower GPU; alternating cancels that linear part.
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
