"""The timer, the graph sizing and the rotation with a fake clock (seeded noise)."""

from __future__ import annotations

import random

import pytest
from fake_clock import FakeClock

from envcheck.bench import graphs, l2
from envcheck.bench.l2 import Rotation
from envcheck.bench.timer import EAGER, GRAPH, Region, Timer, calls_per_sample
from envcheck.model import Settings, Timing


def settings(warmup_ms: float = 25, rep_ms: float = 100, min_samples: int = 10,
                  max_samples: int = 200) -> Settings:
    return Settings(warmup_ms=warmup_ms, rep_ms=rep_ms, min_samples=min_samples, max_samples=max_samples)


class FakeDevice(FakeClock):
    """A device whose clock advances only when work "runs": each op call costs ``cost_us`` plus noise."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.rng = random.Random(seed)

    def op(self, cost_us: float, noise: float = 0.02):
        def call() -> None:
            self.t_us += cost_us * (1 + self.rng.gauss(0, noise))
        return call


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> FakeDevice:
    dev = FakeDevice(seed=1234)
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    return dev


def test_median_iqr_cv_follow_the_seeded_noise(device: FakeDevice) -> None:
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=10, min_samples=30, max_samples=500))
    t = timer.measure(Region(device.op(50.0, noise=0.02), GRAPH))
    # rep_ms / estimate: 10 ms of 50 us samples is about 200 samples.
    assert 180 <= t.n <= 220
    assert t.median_us == pytest.approx(50.0, rel=0.01)
    # Gaussian noise of 2%: CV near 0.02, IQR near 1.349 sigma = 1.35 us.
    assert t.cv == pytest.approx(0.02, rel=0.25)
    assert t.iqr_us == pytest.approx(1.349 * 1.0, rel=0.25)
    assert t.method == "cuda_graph"


def test_calls_per_sample_divides_each_sample(device: FakeDevice) -> None:
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=2, min_samples=10, max_samples=50))
    one = device.op(1.5, noise=0.0)

    def ten_calls() -> None:
        for _ in range(10):
            one()

    t = timer.measure(Region(ten_calls, GRAPH, calls_per_sample=10))
    assert t.calls_per_sample == 10
    assert t.median_us == pytest.approx(1.5)
    assert all(s == pytest.approx(1.5) for s in t.samples_us)


def test_warmup_runs_until_the_budget_and_is_not_sampled(device: FakeDevice) -> None:
    timer = Timer("cuda", settings(warmup_ms=5, rep_ms=2, min_samples=20, max_samples=50))
    costs = iter([100_000.0] + [100.0] * 10_000)  # the first call compiles: 100 ms

    def fn() -> None:
        device.t_us += next(costs)

    first = timer.first_call_s(fn)
    assert first == pytest.approx(0.1)
    calls = timer.warmup(fn)
    assert 50 <= calls <= 51  # 5 ms of 100 us calls (the last comparison is in floating point)
    t = timer.measure(Region(fn, EAGER))
    assert max(t.samples_us) == pytest.approx(100.0)  # the compile call never shows


def test_warmup_makes_at_least_three_calls(device: FakeDevice) -> None:
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=1, min_samples=5, max_samples=5))
    assert timer.warmup(device.op(10_000.0)) == 3


def test_sample_count_is_a_fixed_window_with_a_cap(device: FakeDevice) -> None:
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=100, min_samples=30, max_samples=200))
    assert timer.sample_count(1.0) == 200  # 100 ms of 1 us samples would be 100000
    assert timer.sample_count(50_000.0) == 30  # 2 samples fit the budget; min wins
    assert timer.sample_count(1000.0) == 100  # ~1 ms graph replays: 100 samples


def test_calls_per_sample_targets_a_hundred_microseconds() -> None:
    assert calls_per_sample(1.1) == 91
    assert calls_per_sample(100.0) == 1
    assert calls_per_sample(500.0) == 1
    assert calls_per_sample(0.001) == 100  # capped
    assert calls_per_sample(0.0) == 100


# --------------------------------------------------------------------------- graph sizing


def graph_time(timer: Timer, fn, sets: int = 1) -> Timing:
    return timer.measure(graphs.graph_region(timer, fn, sets))


def test_graph_replays_last_a_millisecond_so_the_replay_cost_is_under_half_a_percent(
        device: FakeDevice, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1 us kernel behind a 3 us replay cost (an H100/H200's): sized from the 2-call graph
    (2.5 us per call, k = 400), then the 400-call graph (1.0075 us, k = 993); the reported time
    per call is within 0.5% of the kernel's. With replays near 100 us the same cost was a 3%
    bias (what made envcheck read 1-1.4% slower than do_bench_cudagraph on memory-bound rows)."""
    captured: list[int] = []

    class FakeGraph:
        def __init__(self, calls: int) -> None:
            self.calls = calls

        def replay(self) -> None:
            device.t_us += 3.0 + 1.0 * self.calls

    monkeypatch.setattr(graphs, "capture_graph", lambda fn, calls: captured.append(calls) or FakeGraph(calls))
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=20, min_samples=10, max_samples=50))
    t = graph_time(timer, lambda: None)
    assert captured == [2, 400, 993] and t.calls_per_sample == 993
    assert t.median_us == pytest.approx(1.0, rel=0.005)
    assert 1.0 * t.calls_per_sample >= 0.95 * graphs.GRAPH_TARGET_US
    assert t.method == "cuda_graph"


def test_graph_sizing_survives_slow_first_replays(device: FakeDevice, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1.5 us kernel whose graphs read 150 us on their first three replays (upload, lazy set-up)
    and whose host submits a replay every 18 us at best: sized from those replays alone, k would
    be 1 and the report 20 us (an H100, vector_add 65536). Warmed and re-sized, k holds about
    1 ms of kernel and the time per call is the kernel's."""
    class FakeGraph:
        def __init__(self, calls: int) -> None:
            self.calls, self.replays = calls, 0

        def replay(self) -> None:
            self.replays += 1
            slow = 150.0 if self.replays <= 3 else 0.0
            device.t_us += max(18.0, 1.5 * self.calls) + slow

    monkeypatch.setattr(graphs, "capture_graph", lambda fn, calls: FakeGraph(calls))
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=5, min_samples=10, max_samples=50))
    t = graph_time(timer, lambda: None)
    assert 1.5 * t.calls_per_sample >= graphs.GRAPH_TARGET_US / graphs.SIZING_SLACK
    assert t.median_us == pytest.approx(1.5)


class SetDevice(FakeDevice):
    """One op bound to ``sets`` buffer sets: each call costs ``cost_us`` and records its set in
    ``history``, so a test can check which set every call used."""

    def __init__(self, sets: int, cost_us: float) -> None:
        super().__init__()
        self.history: list[int] = []
        self.cost_us = cost_us
        self.fns = [self._on(i) for i in range(sets)]

    def _on(self, i: int):
        def call() -> int:
            self.history.append(i)
            self.t_us += self.cost_us
            return i
        return call


def test_rotation_cycles_through_the_sets_and_keeps_each_result() -> None:
    dev = SetDevice(3, 1.0)
    rot = Rotation(dev.fns)
    assert [rot() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert rot.sets == 3 and rot._kept == [0, 1, 2]  # each set's last result stays alive
    rot.restart()
    assert rot() == 0
    with pytest.raises(ValueError):
        Rotation([])


def test_graph_region_with_rotation_holds_whole_cycles_and_divides_per_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """vector_add fp32 2^20 on an H200: 15 sets of 12 MiB, a 4 us kernel behind a 5 us replay
    cost. One cycle (65 us) is short of 1 ms, so the graph holds 16 cycles: 240 calls, and
    the time per call is the replay over 240; every set comes back only after the 14 others."""
    sets = l2.rotation_sets(12 << 20, 60 << 20, memory_bound=True)
    assert sets == 15
    dev = SetDevice(sets, 4.0)
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    captured: list[list[int]] = []

    class FakeGraph:
        def __init__(self, order: list[int]) -> None:
            self.order = order

        def replay(self) -> None:
            dev.t_us += 5.0
            for i in self.order:
                dev.fns[i]()

    def fake_capture(fn, calls: int) -> FakeGraph:
        for _ in range(2):  # capture_graph's warm-up calls, as the real one makes them
            fn()
        start = len(dev.history)
        for _ in range(calls):
            fn()
        order = dev.history[start:]
        del dev.history[start:]
        captured.append(order)
        return FakeGraph(order)

    monkeypatch.setattr(graphs, "capture_graph", fake_capture)
    rot = Rotation(dev.fns)
    rot()  # mid-cycle, as after a warm-up: the capture restarts the rotation
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=2, min_samples=10, max_samples=10))
    t = graph_time(timer, rot, sets)
    assert [len(g) for g in captured] == [15, 240]
    assert t.calls_per_sample == 240 and t.method == "cuda_graph"
    assert t.median_us == pytest.approx((5.0 + 240 * 4.0) / 240)
    order = captured[-1]
    assert order[:15] == [(2 + i) % 15 for i in range(15)] and order[15:30] == order[:15]
    # Replayed back to back, every call's set was last used 15 calls earlier: the other 14
    # sets' traffic (14 x 12 MiB = 2.8x L2) came between.
    stream = order * 2
    assert all(stream[j] == stream[j - 15] and stream[j] not in stream[j - 14:j] for j in range(15, len(stream)))


def test_graph_region_rotation_is_capped_but_never_shorter_than_one_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = FakeDevice()
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    captured: list[int] = []

    class FakeGraph:
        def __init__(self, calls: int) -> None:
            self.calls = calls

        def replay(self) -> None:
            dev.t_us += 0.1 * self.calls

    monkeypatch.setattr(graphs, "capture_graph", lambda fn, calls: captured.append(calls) or FakeGraph(calls))
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=1, min_samples=5, max_samples=5))
    assert graphs.graph_region(timer, lambda: None, 600).calls_per_sample == 600  # 1000 // 600 = 1 cycle
    assert graphs.graph_region(timer, lambda: None, 154).calls_per_sample == 6 * 154  # capped at 1000 calls
    assert captured == [600, 154, 924]


# --------------------------------------------------------------------------- interleaved sampling


class DriftingDevice(FakeDevice):
    """A GPU sliding into its power cap: every call costs more the longer the device has run
    (+0.033% per ms of work: an H200 loses 20-30% of its clock within a second or two)."""

    def op(self, cost_us: float, noise: float = 0.0):
        def call() -> None:
            self.t_us += cost_us * (1 + self.t_us / 3_000_000.0) * (1 + self.rng.gauss(0, noise))
        return call


@pytest.fixture
def drifting(monkeypatch: pytest.MonkeyPatch) -> DriftingDevice:
    dev = DriftingDevice(seed=7)
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    return dev


def test_identical_impls_measured_as_blocks_differ_under_drift(drifting: DriftingDevice) -> None:
    """The old way, one block after the other: the second block meets a slower device."""
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=200, min_samples=10, max_samples=500))
    first = timer.measure(Region(drifting.op(400.0), GRAPH))
    second = timer.measure(Region(drifting.op(400.0), GRAPH))
    assert second.median_us / first.median_us > 1.03


def test_identical_impls_interleaved_get_equal_medians_under_drift(drifting: DriftingDevice) -> None:
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=200, min_samples=10, max_samples=500))
    a, b, c = timer.measure_interleaved([Region(drifting.op(400.0, noise=0.01), "cuda_graph"),
                                         Region(drifting.op(400.0, noise=0.01), "cuda_graph"),
                                         Region(drifting.op(800.0, noise=0.01), "cuda_graph")])
    assert isinstance(a, Timing) and isinstance(b, Timing) and isinstance(c, Timing)
    assert 495 <= a.n <= 500 and 495 <= b.n <= 500 and 245 <= c.n <= 251  # rep_ms / each one's estimate
    assert b.median_us == pytest.approx(a.median_us, rel=0.003)
    assert c.median_us / a.median_us == pytest.approx(2.0, rel=0.003)  # the true ratio survives the drift


def test_interleaved_turns_go_round_robin_and_sync_once(device: FakeDevice) -> None:
    from envcheck.bench import timer as timer_mod

    calls: list[str] = []

    def region(name: str, cost: float):
        def run() -> None:
            calls.append(name)
            device.t_us += cost
        return run

    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=50, min_samples=5, max_samples=500))
    syncs = device.syncs
    got = timer.measure_interleaved([Region(region("a", 100.0), "cuda_graph"),
                                     Region(region("b", 500.0), "cuda_graph", calls_per_sample=5)])
    assert device.syncs - syncs == 3  # one per estimate, one for all the turns
    sampled = calls[2 * timer_mod.ESTIMATE_SAMPLES:]
    assert sampled.count("b") == 100
    # 50 ms of work each, in 5 ms turns: 10 rounds of 50 "a" and 10 "b", every other one
    # backwards; the first turn, on an idle device, starts with one untimed replay (the spacer).
    assert sampled == ["a"] + (["a"] * 50 + ["b"] * 10 + ["b"] * 10 + ["a"] * 50) * 5
    assert got[0].n == 500 and got[1].n == 100
    assert got[1].median_us == pytest.approx(100.0) and got[1].calls_per_sample == 5


class LaunchLatencyDevice(FakeDevice):
    """Work enqueued on an idle device waits out a launch latency before it runs; queued behind
    other work it does not (the latency overlaps the work ahead of it)."""

    LATENCY_US = 10.0

    def __init__(self) -> None:
        super().__init__()
        self.idle = True
        self.log: list[str] = []

    def mark(self) -> float:
        self.log.append("mark")
        return self.t_us

    def synchronize(self) -> None:
        self.log.append("sync")
        self.idle = True

    def op(self, name: str, cost_us: float):  # type: ignore[override]
        def call() -> None:
            self.log.append(name)
            self.t_us += cost_us + (self.LATENCY_US if self.idle else 0.0)
            self.idle = False
        return call


def test_eager_turns_start_idle_and_graph_turns_after_them_start_with_a_spacer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On an H200 a graph turn following a synced eager batch started on an idle GPU: its first
    timed replay carried the launch latency, 6-19% spikes every 32-64 samples. With the spacer
    (one untimed replay) every timed replay is queued behind work: no spike, no sample dropped."""
    from envcheck.bench import timer as timer_mod

    dev = LaunchLatencyDevice()
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=50, min_samples=5, max_samples=500))
    gpu, launch = timer.measure_interleaved([Region(dev.op("graph", 100.0), GRAPH),
                                             Region(dev.op("eager", 100.0), timer_mod.EAGER)])
    assert isinstance(gpu, Timing) and gpu.n == 500
    assert max(gpu.samples_us) == min(gpu.samples_us) == 100.0  # no spike at any turn boundary
    assert max(launch.samples_us) == 110.0  # each eager turn starts idle: what a Python caller pays
    log = dev.log[2 * (3 * timer_mod.ESTIMATE_SAMPLES + 1):]  # past the two estimates
    # Walk the log: a call between a start and an end mark is timed, any other is a spacer.
    timed, spacers, turns = True, [], []
    in_sample, previous = False, None
    for e in log:
        if e == "mark":
            in_sample = not in_sample
        elif e in ("graph", "eager"):
            if e != previous:
                turns.append((e, in_sample))
            if not in_sample:
                spacers.append((e, previous))
            previous = e
        timed = timed and (in_sample or e != "eager")
    assert timed  # every eager call is timed
    # Every graph turn that starts idle (the first, and each after an eager turn) opens with
    # one spacer replay; a graph turn after a graph turn has none.
    assert spacers and all(e == "graph" and prev in (None, "eager") for e, prev in spacers)
    assert len(spacers) == sum(1 for k, (e, _) in enumerate(turns) if e == "graph" and (k == 0 or turns[k - 1][0] == "eager"))
    # 50 ms of each in 5 ms turns: 10 rounds, graph then eager, reversed every other round, so
    # the runs are G | EE | GG | EE | GG | EE | GG | EE | GG | EE | G: six graph runs, six
    # spacers, and a wait before each of the ten eager turns, plus the final one.
    assert [e for e, _ in turns] == ["graph", "eager"] * 5 + ["graph"] and len(spacers) == 6
    assert log.count("sync") == 10 + 1


def test_a_failing_region_drops_out_and_the_others_are_measured(device: FakeDevice) -> None:
    from envcheck.bench.timer import Region

    state = {"calls": 0}

    def flaky() -> None:
        state["calls"] += 1
        device.t_us += 50.0
        if state["calls"] > 10:  # after the estimate, in its second turn
            raise RuntimeError("illegal instruction")

    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=5, min_samples=5, max_samples=500))
    ok, bad = timer.measure_interleaved([Region(device.op(50.0, noise=0.0), "cuda_graph"),
                                         Region(flaky, "cuda_graph")])
    assert isinstance(ok, Timing) and ok.n == 100 and ok.median_us == pytest.approx(50.0)
    assert isinstance(bad, RuntimeError)


# --------------------------------------------------------------------------- settling


def test_settle_stops_after_two_blocks_when_the_time_holds(device: FakeDevice) -> None:
    from envcheck.bench.timer import SETTLE_BLOCK_US, SETTLE_TOLERANCE

    timer = Timer("cuda", settings())
    blocks, settled = timer.settle(device.op(1000.0, noise=SETTLE_TOLERANCE / 10))
    assert settled and blocks == 2
    assert device.t_us < 3.5 * SETTLE_BLOCK_US  # the estimate and two blocks, nothing more


def test_settle_waits_for_a_clock_that_falls_then_holds(device: FakeDevice) -> None:
    """A power-capped GPU: each call 1.0 ms at first, 30% slower after 400 ms of work, falling
    linearly in between. Settling runs until the fall is over; the samples after it read the
    held time, where sampling straight away read the fall."""
    def capped() -> None:
        device.t_us += 1000.0 * (1.0 + 0.3 * min(1.0, device.t_us / 400_000.0))

    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=50, min_samples=10, max_samples=200))
    early = timer.measure(Region(capped, GRAPH))
    assert early.median_us < 1250.0
    device.t_us = 0.0
    blocks, settled = timer.settle(capped)
    assert settled and device.t_us >= 400_000.0
    assert timer.measure(Region(capped, GRAPH)).median_us == pytest.approx(1300.0, rel=0.005)


def test_settle_gives_up_after_its_longest_wait_and_says_so(device: FakeDevice) -> None:
    """A time that never holds (each call 0.02% slower than the one before, 5% a block) stops settling at
    SETTLE_MAX_MS and reports it as not settled."""
    from envcheck.bench.timer import SETTLE_BLOCK_US, SETTLE_MAX_MS

    cost = [100.0]

    def slowing() -> None:
        device.t_us += cost[0]
        cost[0] *= 1.0002

    timer = Timer("cuda", settings())
    blocks, settled = timer.settle(slowing)
    assert not settled
    assert SETTLE_MAX_MS * 1e3 <= device.t_us <= SETTLE_MAX_MS * 1e3 + 3 * SETTLE_BLOCK_US


def test_settle_runs_at_least_its_minimum_before_it_stops(device: FakeDevice) -> None:
    """A time that holds from the start still settles ``min_ms`` (the power limiter cuts in 100-250 ms
    into a load: a held time before then says nothing), and stops at the first block after it."""
    from envcheck.bench.timer import SETTLE_BLOCK_US, SETTLE_TOLERANCE, SUSTAIN_SETTLE_MS

    timer = Timer("cuda", settings())
    blocks, settled = timer.settle(device.op(1000.0, noise=SETTLE_TOLERANCE / 10), min_ms=SUSTAIN_SETTLE_MS)
    assert settled
    assert SUSTAIN_SETTLE_MS * 1e3 <= device.t_us <= SUSTAIN_SETTLE_MS * 1e3 + 2 * SETTLE_BLOCK_US


def test_a_minimum_past_the_longest_wait_lengthens_the_wait(device: FakeDevice) -> None:
    """``min_ms`` above SETTLE_MAX_MS is still honoured: settling gives up only at twice the minimum."""
    from envcheck.bench.timer import SETTLE_BLOCK_US, SETTLE_MAX_MS

    cost = [100.0]

    def slowing() -> None:
        device.t_us += cost[0]
        cost[0] *= 1.00005  # 1.25% a block of 25 ms at first

    timer = Timer("cuda", settings())
    blocks, settled = timer.settle(slowing, min_ms=SETTLE_MAX_MS)
    assert not settled
    assert 2 * SETTLE_MAX_MS * 1e3 <= device.t_us <= 2 * SETTLE_MAX_MS * 1e3 + 4 * SETTLE_BLOCK_US  # the last block, by then about twice as long


def test_a_region_with_its_own_window_and_spacer(device: FakeDevice) -> None:
    """``Region.window_ms`` replaces ``rep_ms`` for that region's sample count, and its ``spacer``, not its
    ``run``, is what an idle GPU gets before the first graph sample."""
    timer = Timer("cuda", settings(rep_ms=10, min_samples=10, max_samples=1000))
    assert timer.sample_count(100.0) == 100
    assert timer.sample_count(100.0, window_ms=50.0) == 500
    assert timer.sample_count(100.0, window_ms=500.0) == 1000  # the cap still holds
    spaced: list[int] = []
    op = device.op(100.0, noise=0.0)

    def spacer() -> None:
        spaced.append(1)
        op()

    t = timer.measure(Region(op, GRAPH, window_ms=50.0, spacer=spacer))
    assert t.n == 500 and spaced == [1]


def test_sequential_stopping_ends_a_window_once_its_median_is_fixed(device: FakeDevice) -> None:
    """Issue 39: a settled GPU time holds within 0.5% after a few dozen samples; the window ends
    there instead of after rep_ms, a noisy one still takes its count, a sustained one its span."""
    from envcheck.bench.timer import STOP_MIN_SAMPLES, median_ci

    assert median_ci(list(range(1, 21))) == (5, 16)  # n = 20: ranks 5 and 16 (1-based)
    timer = Timer("cuda", settings(warmup_ms=1, rep_ms=100, min_samples=10, max_samples=150))

    def window(noise: float, stop_ci: float | None, window_ms: float | None = None) -> tuple[Timing, Timing]:
        graph = Region(device.op(1000.0, noise=noise), GRAPH, window_ms=window_ms)
        got = timer.measure_interleaved([graph, Region(device.op(120.0, noise=0.05), EAGER)], stop_ci=stop_ci)
        assert all(isinstance(t, Timing) for t in got)
        return got[0], got[1]  # type: ignore[return-value]

    steady, launch = window(0.001, 0.005)
    assert STOP_MIN_SAMPLES <= steady.n < 50 and launch.n >= 10 and timer.stopped_by == "ci"
    assert steady.median_us == pytest.approx(1000.0, rel=0.005)
    assert window(0.001, None)[0].n >= 100 and timer.stopped_by == "count"  # without the rule: rep_ms's samples
    assert window(0.05, 0.005)[0].n >= 100  # 5% noise never fixes a median within 0.5% in 100 samples
    assert timer.stopped_by == "count"
    assert window(0.001, 0.005, window_ms=100.0)[0].n >= 100  # a window of its own is never cut short
    assert timer.stopped_by == "window"
