"""Timing of device work: warm-up, sample budget, and the clock seam tests replace.

A ``Clock`` places timestamps in the stream of work (CUDA events on a GPU, ``perf_counter``
around synchronous calls on the CPU) and reads the time between two of them once the device
is synchronised. ``Timer.clock_factory`` is the one seam: tests swap it for a fake clock
whose "device" advances by seeded noisy costs, so the statistics are checked without a GPU.

How a measurement goes (``Timer.measure``), following triton.testing.do_bench:
1. three estimation samples (discarded; they also finish warming caches and clocks);
2. the number of samples ``n`` = rep_ms / estimate, clamped to [min_samples, max_samples];
3. ``n`` samples enqueued back to back, each a ``start`` mark, the region, an ``end`` mark;
   one synchronisation at the end, so the host never stalls the GPU between samples;
4. each sample divided by ``calls_per_sample`` (several calls per sample when one call is
   shorter than the clock's resolution is fine-grained).

What the region is decides what the time means: a CUDA-graph replay (GPU time, launch gaps
removed) or a batch of eager calls (launch time, what a Python caller pays); see worker.py.

Comparisons are taken interleaved (``Timer.measure_interleaved``): the regions of one group
(torch, Triton, torch.compile of the same op and shape) take their samples in turns of about
``INTERLEAVE_TURN_US`` each, round-robin, until every one has its count. A GPU at its power
cap (an H200 at 700 W under tensor-core load) lowers its clocks by 20-30% within a second, so
timing one implementation's samples as a block and then the next one's measures the order
of the blocks (the second meets a hotter, slower GPU), not the implementations. Interleaved,
each implementation's samples are spread evenly over the same window and see the same drift.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from envcheck.model import Timing

# A sample should last at least this long: CUDA events resolve about 0.5 us, and a few-us
# sample would be mostly resolution and event overhead.
TARGET_SAMPLE_US = 20.0
MAX_CALLS_PER_SAMPLE = 200
# A graph-replay sample should last this long: the replay's launch latency (~4-5 us) is then
# under 5% of it. Graphs hold at most MAX_GRAPH_CALLS calls (capture time, memory of
# implementations that allocate their output).
GRAPH_TARGET_US = 100.0
MAX_GRAPH_CALLS = 500
MIN_WARMUP_CALLS = 3
ESTIMATE_SAMPLES = 3
# One region's turn in an interleaved measurement lasts about this long: far shorter than the
# power-cap and thermal swings it must share out evenly (hundreds of ms), long enough that a
# turn of a 1 ms region is still a few samples.
INTERLEAVE_TURN_US = 2000.0


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


@dataclass(frozen=True)
class TimerSettings:
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    min_samples: int = 30
    max_samples: int = 200

    @classmethod
    def from_plan(cls, settings: dict[str, Any]) -> TimerSettings:
        d = cls()
        return cls(
            warmup_ms=float(settings.get("warmup_ms", d.warmup_ms)),
            rep_ms=float(settings.get("rep_ms", d.rep_ms)),
            min_samples=max(1, int(settings.get("min_samples", d.min_samples))),
            max_samples=max(1, int(settings.get("max_samples", d.max_samples))),
        )

    def scaled_for_cpu(self) -> TimerSettings:
        """A smaller budget for the CPU baseline: each call can take milliseconds there."""
        return TimerSettings(self.warmup_ms, self.rep_ms, max(3, min(self.min_samples, 10)),
                             max(3, min(self.max_samples, 50)))


def calls_per_sample(single_call_us: float, target_us: float = TARGET_SAMPLE_US,
                     cap: int = MAX_CALLS_PER_SAMPLE) -> int:
    """Calls to put in one sample so it lasts at least ``target_us`` (1 for long calls)."""
    if not single_call_us > 0:
        return cap
    return max(1, min(cap, math.ceil(target_us / single_call_us)))


class Timer:
    """Warm-up and sampling of callables on one backend (``cuda`` or ``cpu``)."""

    clock_factory: ClassVar[Callable[[str], Clock]] = staticmethod(make_clock)

    def __init__(self, backend: str, settings: TimerSettings) -> None:
        self.backend = backend
        self.settings = settings
        self.clock = type(self).clock_factory(backend)

    def first_call_s(self, fn: Callable[[], Any]) -> float:
        """Wall time of one call until its work is done: compile + autotune on a first call."""
        t0 = self.clock.host_s()
        fn()
        self.clock.synchronize()
        return self.clock.host_s() - t0

    def warmup(self, fn: Callable[[], Any]) -> int:
        """Call ``fn`` until ``warmup_ms`` has passed (at least 3 calls); returns the count.

        Fills caches that would otherwise land in the first samples: allocator blocks, the
        cuBLAS handle and workspace, Triton's launcher, GPU clocks ramping up from idle.
        """
        calls = 0
        start = self.clock.host_s()
        budget_s = self.settings.warmup_ms / 1e3
        while calls < MIN_WARMUP_CALLS or self.clock.host_s() - start < budget_s:
            fn()
            calls += 1
            if calls % 8 == 0 or calls <= MIN_WARMUP_CALLS:
                # Bound the queue: without this the host could enqueue seconds of work
                # before the budget check sees any of it finish.
                self.clock.synchronize()
        self.clock.synchronize()
        return calls

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

    def sample_count(self, estimate_us: float) -> int:
        s = self.settings
        if not estimate_us > 0:
            return s.max_samples
        n = math.ceil(s.rep_ms * 1e3 / estimate_us)
        return max(s.min_samples, min(s.max_samples, n))

    def estimate_us(self, region: Callable[[], Any]) -> float:
        """Median time of a few (discarded) samples of ``region``."""
        return statistics.median(self._samples(region, ESTIMATE_SAMPLES))

    def shortest_us(self, region: Callable[[], Any]) -> float:
        """Shortest of a few (discarded) samples: for sizing, where a sample can be too long
        (a slow first replay, a host that fell behind) but never too short."""
        return min(self._samples(region, ESTIMATE_SAMPLES))

    def measure(self, region: Callable[[], Any], *, method: str, calls_per_sample: int = 1) -> Timing:
        """Timing per call of ``region``, which makes ``calls_per_sample`` calls of the op."""
        (result,) = self.measure_interleaved([Region(region, method, calls_per_sample)])
        if isinstance(result, BaseException):
            raise result
        return result

    def measure_interleaved(self, regions: Sequence[Region]) -> list[Timing | BaseException]:
        """One Timing per region, their samples taken in turns so that drift falls on all alike.

        Each region gets its own sample count (``rep_ms`` / its estimate, clamped), split into
        the same number of turns; the turns go round-robin, forwards then backwards, so every
        region's samples spread evenly over the whole window. A region that raises (in its estimate or a turn) gets
        the exception as its result and drops out; the others go on. Marks are read after one
        synchronisation at the end; the only other waits are before each turn of an eager
        (launch-time) region, which must start on an idle GPU.
        """
        results: list[Timing | BaseException | None] = [None] * len(regions)
        counts: dict[int, int] = {}
        busy_us = 0.0  # the longest region's share of the window
        for i, r in enumerate(regions):
            try:
                estimate = self.estimate_us(r.run)
            except Exception as e:  # noqa: BLE001 - this region's failure, not the group's
                results[i] = e
                continue
            counts[i] = self.sample_count(estimate)
            busy_us = max(busy_us, counts[i] * max(estimate, 0.0))
        if counts:
            turns = max(1, min(min(counts.values()), math.ceil(busy_us / INTERLEAVE_TURN_US)))
            marks: dict[int, list[tuple[Any, Any]]] = {i: [] for i in counts}
            for t in range(turns):
                # Every other round runs backwards (a, b, c, c, b, a, ...): within a round the
                # later regions meet a slightly slower GPU; alternating cancels that linear part.
                order = list(marks) if t % 2 == 0 else list(reversed(marks))
                for i in order:
                    n, r = counts[i], regions[i]
                    if r.method == EAGER:
                        # Launch time is what a Python caller pays: the host's launch rate, seen
                        # only when the GPU is idle as the batch starts. Queued behind graph
                        # replays, eager calls would be launched ahead of the GPU and their events
                        # would show the GPU's spacing instead (torch 1024 elements read 1.9 us
                        # instead of ~5.5 us on an H200). Waiting here costs no GPU time.
                        self.clock.synchronize()
                    try:
                        marks[i] += self._enqueue(r.run, n * (t + 1) // turns - n * t // turns)
                    except Exception as e:  # noqa: BLE001
                        results[i] = e
                        del marks[i]
            self.clock.synchronize()
            for i, m in marks.items():
                k = max(1, regions[i].calls_per_sample)
                samples = [self.clock.elapsed_us(s, e) / k for s, e in m]
                results[i] = Timing.from_samples(regions[i].method, samples, calls_per_sample=k)
        return [r if r is not None else RuntimeError("not measured") for r in results]


EAGER = "cuda_events"  # Region.method of eager calls timed with events (launch time)


@dataclass(frozen=True)
class Region:
    """What one implementation times: ``run`` makes ``calls_per_sample`` calls of the op."""

    run: Callable[[], Any]
    method: str
    calls_per_sample: int = 1


# --------------------------------------------------------------------------- CUDA-only helpers


def capture_graph(fn: Callable[[], Any], calls: int) -> Any:
    """A ``torch.cuda.CUDAGraph`` of ``calls`` back-to-back calls of ``fn`` (already warmed up).

    Warm-up calls run on a side stream first, as the torch CUDA-graph docs require (lazy
    initialisation, e.g. cuBLAS workspaces, must not happen during capture); the capture
    itself runs on the side stream ``torch.cuda.graph`` creates.
    """
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    return graph


def graph_time(timer: Timer, fn: Callable[[], Any], sets: int = 1) -> Timing:
    """GPU time per call of ``fn`` (warmed up) from CUDA-graph replays between CUDA events."""
    region = graph_region(timer, fn, sets)
    return timer.measure(region.run, method=region.method, calls_per_sample=region.calls_per_sample)


def graph_region(timer: Timer, fn: Callable[[], Any], sets: int = 1) -> Region:
    """The CUDA graph of ``fn`` (warmed up) to replay for its GPU time, as a Region to sample.

    ``k`` calls per graph so a sample lasts >= GRAPH_TARGET_US, the time divided by ``k``. A
    replay has its own launch latency (about 4-5 us on an H100/H200), so ``k`` comes from the
    per-call time of multi-call graphs, where that latency is amortised, re-sized until it
    holds; sizing it from a one-call replay would take the latency for kernel time and choose
    ``k`` = 2 for a 1 us kernel, reporting 5 us.

    With ``sets`` > 1, ``fn`` is a ``Rotation`` over that many sets of inputs and outputs (the
    memory-bound cases kept out of L2, see flags.rotation_sets): ``k`` is a whole number of
    cycles, m x ``sets`` calls, so every call of the graph works on a set that the other sets'
    traffic has evicted from L2 since its last use. One cycle of a 12 MiB vector_add on an
    H200 is 15 calls (~75 us), so m = 2: 30 calls, the replay latency under 5% of a sample.
    The rotation restarts at set 0 before each capture, so the graphs of a group's
    implementations visit the shared sets in the same order and one's graph never starts on
    the set the other's just touched. The Region keeps the graph alive (through ``replay``).
    """
    if sets > 1:
        if isinstance(fn, Rotation):
            fn.restart()
        graph = _warm_capture(timer, fn, sets)
        cycle = timer.shortest_us(graph.replay)  # its latency is shared by ``sets`` calls already
        m = calls_per_sample(cycle, GRAPH_TARGET_US, max(1, MAX_GRAPH_CALLS // sets))
        if m > 1:
            del graph
            if isinstance(fn, Rotation):
                fn.restart()
            graph = capture_graph(fn, m * sets)
        return Region(graph.replay, "cuda_graph", m * sets)
    # k only grows: each estimate can be too long (the replay's own latency, or a host that
    # submits replays more slowly than the GPU runs them), never too short, so a per-call time
    # that shrinks as k grows was inflated and k is sized again from the longer graph. The
    # first graph holds 2 calls: a one-call replay can read 100 us for a 2 us kernel (seen on
    # an H100, vector_add 65536: k = 1 and 20 us reported), which would stop sizing at once.
    k = 2
    graph = _warm_capture(timer, fn, k)
    for _ in range(MAX_SIZING_ROUNDS):
        per_call = timer.shortest_us(graph.replay) / k
        want = calls_per_sample(per_call, GRAPH_TARGET_US, MAX_GRAPH_CALLS)
        if want <= k:
            break
        del graph
        k = want
        graph = _warm_capture(timer, fn, k)
    return Region(graph.replay, "cuda_graph", k)


# How many times graph_region may re-size a graph (2 -> ~40 -> ~500 calls in practice).
MAX_SIZING_ROUNDS = 4


def _warm_capture(timer: Timer, fn: Callable[[], Any], calls: int) -> Any:
    """``capture_graph`` and one replay: the first replay of a graph uploads it to the device."""
    graph = capture_graph(fn, calls)
    graph.replay()
    timer.clock.synchronize()
    return graph


class Rotation:
    """One call of the op per call, cycling through ``fns``: the same implementation bound to
    R independent sets of inputs and outputs (``fns[0]`` on the set that was checked).

    Memory-bound cases whose working set could stay in L2 between calls (1 MiB to 3x L2) are
    timed through this in both the graph and the eager batches: between two uses of a set the
    other R - 1 sets stream through L2 and evict it, so every call reads and writes DRAM as a
    caller with fresh data would, with no flush or single-call replay inside the timed region.
    Each set's last result is kept until that set is called again: an implementation that
    allocates its output (torch.compile) then writes R distinct buffers, as the others do into
    their R outputs, instead of getting the same (L2-hot) block back from the allocator.
    The cycling costs the host one index step per call (well under 1 us, in the launch time).
    """

    def __init__(self, fns: Sequence[Callable[[], Any]]) -> None:
        if not fns:
            raise ValueError("a rotation needs at least one set")
        self.fns = tuple(fns)
        self._next = 0
        self._kept: list[Any] = [None] * len(self.fns)

    @property
    def sets(self) -> int:
        return len(self.fns)

    def restart(self) -> None:
        """The next call is on set 0."""
        self._next = 0

    def __call__(self) -> Any:
        i = self._next
        self._next = (i + 1) % len(self.fns)
        result = self.fns[i]()
        self._kept[i] = result
        return result
