"""The timer with a fake clock (seeded noise), and the flags judged from timings."""

from __future__ import annotations

import random
import statistics

import pytest

from envcheck.bench import flags
from envcheck.bench.timer import Timer, TimerSettings, calls_per_sample
from envcheck.model import MonitorSummary, Timing


class FakeDevice:
    """A device whose clock advances only when work "runs": each op call costs ``cost_us`` plus noise."""

    def __init__(self, seed: int = 0) -> None:
        self.t_us = 0.0
        self.rng = random.Random(seed)
        self.syncs = 0

    def mark(self) -> float:
        return self.t_us

    def elapsed_us(self, start: float, end: float) -> float:
        return end - start

    def synchronize(self) -> None:
        self.syncs += 1

    def host_s(self) -> float:
        return self.t_us / 1e6

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
    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=10, min_samples=30, max_samples=500))
    t = timer.measure(device.op(50.0, noise=0.02), method="cuda_graph")
    # rep_ms / estimate: 10 ms of 50 us samples is about 200 samples.
    assert 180 <= t.n <= 220
    assert t.median_us == pytest.approx(50.0, rel=0.01)
    # Gaussian noise of 2%: CV near 0.02, IQR near 1.349 sigma = 1.35 us.
    assert t.cv == pytest.approx(0.02, rel=0.25)
    assert t.iqr_us == pytest.approx(1.349 * 1.0, rel=0.25)
    assert t.method == "cuda_graph"
    assert not flags.is_noisy(t)


def test_calls_per_sample_divides_each_sample(device: FakeDevice) -> None:
    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=2, min_samples=10, max_samples=50))
    one = device.op(1.5, noise=0.0)

    def ten_calls() -> None:
        for _ in range(10):
            one()

    t = timer.measure(ten_calls, method="cuda_graph", calls_per_sample=10)
    assert t.calls_per_sample == 10
    assert t.median_us == pytest.approx(1.5)
    assert all(s == pytest.approx(1.5) for s in t.samples_us)


def test_warmup_runs_until_the_budget_and_is_not_sampled(device: FakeDevice) -> None:
    timer = Timer("cuda", TimerSettings(warmup_ms=5, rep_ms=2, min_samples=20, max_samples=50))
    costs = iter([100_000.0] + [100.0] * 10_000)  # the first call compiles: 100 ms

    def fn() -> None:
        device.t_us += next(costs)

    first = timer.first_call_s(fn)
    assert first == pytest.approx(0.1)
    calls = timer.warmup(fn)
    assert 50 <= calls <= 51  # 5 ms of 100 us calls (the last comparison is in floating point)
    t = timer.measure(fn, method="cuda_events")
    assert max(t.samples_us) == pytest.approx(100.0)  # the compile call never shows


def test_warmup_makes_at_least_three_calls(device: FakeDevice) -> None:
    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=1, min_samples=5, max_samples=5))
    assert timer.warmup(device.op(10_000.0)) == 3


def test_sample_count_is_clamped(device: FakeDevice) -> None:
    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=100, min_samples=30, max_samples=200))
    assert timer.sample_count(1.0) == 200  # 100 ms of 1 us samples would be 100000
    assert timer.sample_count(50_000.0) == 30  # 2 samples fit the budget; min wins
    assert timer.sample_count(1000.0) == 100


def test_calls_per_sample_targets_twenty_microseconds() -> None:
    assert calls_per_sample(1.1) == 19
    assert calls_per_sample(20.0) == 1
    assert calls_per_sample(500.0) == 1
    assert calls_per_sample(0.001) == 200  # capped
    assert calls_per_sample(0.0) == 200


def test_cpu_budget_is_smaller() -> None:
    s = TimerSettings(25, 100, 30, 200).scaled_for_cpu()
    assert (s.min_samples, s.max_samples) == (10, 50)
    assert TimerSettings.from_plan({"min_samples": 7, "rep_ms": 3}).min_samples == 7


# --------------------------------------------------------------------------- flags from timings


def _timing(median: float, spread: float, n: int = 101, seed: int = 0) -> Timing:
    rng = random.Random(seed)
    return Timing.from_samples("cuda_graph", [median * (1 + rng.gauss(0, spread)) for _ in range(n)])


def test_noisy_by_cv_or_iqr() -> None:
    assert not flags.is_noisy(_timing(10.0, 0.01))
    assert flags.is_noisy(_timing(10.0, 0.08))
    # Bimodal: every other sample 12% slower. CV ~6% and IQR/median 12%: both say noisy.
    bimodal = Timing.from_samples("cuda_graph", [10.0, 11.2] * 50)
    assert bimodal.iqr_us / bimodal.median_us > flags.NOISY_IQR_RATIO
    assert flags.is_noisy(bimodal)
    # One huge outlier among steady samples: IQR is zero, CV catches it.
    outlier = Timing.from_samples("cuda_graph", [10.0] * 99 + [100.0])
    assert outlier.iqr_us == 0 and flags.is_noisy(outlier)


def test_launch_bound_when_eager_exceeds_graph_by_half() -> None:
    gpu = Timing.from_samples("cuda_graph", [1.1] * 5)
    assert flags.is_launch_bound(gpu, Timing.from_samples("cuda_events", [8.5] * 5))
    assert not flags.is_launch_bound(gpu, Timing.from_samples("cuda_events", [1.6] * 5))
    assert not flags.is_launch_bound(None, Timing.from_samples("cuda_events", [8.5] * 5))


def test_throttled_only_with_active_reasons() -> None:
    assert flags.is_throttled(MonitorSummary(10, throttle_reasons=("sw_power_cap",)))
    assert not flags.is_throttled(MonitorSummary(10))
    assert not flags.is_throttled(None)


def test_case_flags_in_model_order() -> None:
    gpu = Timing.from_samples("cuda_graph", [1.0, 1.0, 1.3, 1.0])
    launch = Timing.from_samples("cuda_events", [9.0] * 4)
    got = flags.case_flags(gpu=gpu, launch=launch, monitor=MonitorSummary(3, throttle_reasons=("hw_slowdown",)),
                           working_set_bytes=4096, l2_bytes=50 << 20, cold=False)
    assert got == ("launch_bound", "l2_resident", "throttled", "noisy")
    cpu = flags.case_flags(gpu=None, launch=launch, monitor=None, working_set_bytes=4096, l2_bytes=None,
                           cold=False, backend="cpu")
    assert cpu == ()
    assert statistics.median(launch.samples_us) == 9.0


def test_graph_time_sizes_k_from_amortised_per_call_time(device: FakeDevice, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1 us kernel behind a 5 us replay latency: the 2-call graph reads 3.5 us per call (k = 29),
    the 29-call graph 1.17 us (k = 86), the 86-call graph 1.06 us (k = 95), then k stays: 1.05 us.
    Sized from the first estimate alone, k would be 29 and report 1.17 us."""
    from envcheck.bench import timer as timer_mod

    captured: list[int] = []

    class FakeGraph:
        def __init__(self, calls: int) -> None:
            self.calls = calls

        def replay(self) -> None:
            device.t_us += 5.0 + 1.0 * self.calls

    def fake_capture(fn, calls: int) -> FakeGraph:
        captured.append(calls)
        return FakeGraph(calls)

    monkeypatch.setattr(timer_mod, "capture_graph", fake_capture)
    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=5, min_samples=10, max_samples=50))
    t = timer_mod.graph_time(timer, lambda: None)
    assert captured == [2, 29, 86, 95] and t.calls_per_sample == 95
    assert t.median_us == pytest.approx(100 / 95)
    assert t.method == "cuda_graph"


def test_graph_sizing_survives_slow_first_replays(device: FakeDevice, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1.5 us kernel whose graphs read 150 us on their first three replays (upload, lazy set-up)
    and whose host submits a replay every 18 us at best: sized from those replays alone, k would
    be 1 and the report 20 us (an H100, vector_add 65536). Warmed and re-sized, k holds >= 100 us
    of kernel and the time per call is the kernel's."""
    from envcheck.bench import timer as timer_mod

    class FakeGraph:
        def __init__(self, calls: int) -> None:
            self.calls, self.replays = calls, 0

        def replay(self) -> None:
            self.replays += 1
            slow = 150.0 if self.replays <= 3 else 0.0
            device.t_us += max(18.0, 1.5 * self.calls) + slow

    monkeypatch.setattr(timer_mod, "capture_graph", lambda fn, calls: FakeGraph(calls))
    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=5, min_samples=10, max_samples=50))
    t = timer_mod.graph_time(timer, lambda: None)
    assert 1.5 * t.calls_per_sample >= timer_mod.GRAPH_TARGET_US
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
    from envcheck.bench.timer import Rotation

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
    latency. One cycle (65 us) is short of 100 us, so the graph holds 2 cycles: 30 calls, and
    the time per call is the replay over 30; every set comes back only after the 14 others."""
    from envcheck.bench import flags
    from envcheck.bench import timer as timer_mod
    from envcheck.bench.timer import Rotation

    sets = flags.rotation_sets(12 << 20, 60 << 20, memory_bound=True)
    assert sets == 15
    dev = SetDevice(sets, 4.0)
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    graphs: list[list[int]] = []

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
        graphs.append(order)
        return FakeGraph(order)

    monkeypatch.setattr(timer_mod, "capture_graph", fake_capture)
    rot = Rotation(dev.fns)
    rot()  # mid-cycle, as after a warm-up: the capture restarts the rotation
    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=2, min_samples=10, max_samples=10))
    t = timer_mod.graph_time(timer, rot, sets)
    assert [len(g) for g in graphs] == [15, 30]
    assert t.calls_per_sample == 30 and t.method == "cuda_graph"
    assert t.median_us == pytest.approx((5.0 + 30 * 4.0) / 30)
    order = graphs[-1]
    assert order[:15] == [(2 + i) % 15 for i in range(15)] and order[15:] == order[:15]
    # Replayed back to back, every call's set was last used 15 calls earlier: the other 14
    # sets' traffic (14 x 12 MiB = 2.8x L2) came between.
    stream = order * 3
    assert all(stream[j] == stream[j - 15] and stream[j] not in stream[j - 14:j] for j in range(15, len(stream)))


def test_graph_region_rotation_is_capped_but_never_shorter_than_one_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    from envcheck.bench import timer as timer_mod

    dev = FakeDevice()
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    captured: list[int] = []

    class FakeGraph:
        def __init__(self, calls: int) -> None:
            self.calls = calls

        def replay(self) -> None:
            dev.t_us += 0.1 * self.calls

    monkeypatch.setattr(timer_mod, "capture_graph", lambda fn, calls: captured.append(calls) or FakeGraph(calls))
    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=1, min_samples=5, max_samples=5))
    assert timer_mod.graph_region(timer, lambda: None, 300).calls_per_sample == 300  # 500 // 300 = 1 cycle
    assert timer_mod.graph_region(timer, lambda: None, 154).calls_per_sample == 3 * 154  # capped at 500 calls
    assert captured == [300, 154, 462]


# --------------------------------------------------------------------------- interleaved sampling


class DriftingDevice(FakeDevice):
    """A GPU sliding into its power cap: every call costs more the longer the device has run
    (+0.2% per ms of work: steeper than an H200's 20-30% over a second or two, to make the
    order effect plain within a 20 ms budget)."""

    def op(self, cost_us: float, noise: float = 0.0):
        def call() -> None:
            self.t_us += cost_us * (1 + self.t_us / 500_000.0) * (1 + self.rng.gauss(0, noise))
        return call


@pytest.fixture
def drifting(monkeypatch: pytest.MonkeyPatch) -> DriftingDevice:
    dev = DriftingDevice(seed=7)
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    return dev


def test_identical_impls_measured_as_blocks_differ_under_drift(drifting: DriftingDevice) -> None:
    """The old way, one block after the other: the second block meets a slower device."""
    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=20, min_samples=10, max_samples=500))
    first = timer.measure(drifting.op(200.0), method="cuda_graph")
    second = timer.measure(drifting.op(200.0), method="cuda_graph")
    assert second.median_us / first.median_us > 1.03


def test_identical_impls_interleaved_get_equal_medians_under_drift(drifting: DriftingDevice) -> None:
    from envcheck.bench.timer import Region

    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=20, min_samples=10, max_samples=500))
    a, b, c = timer.measure_interleaved([Region(drifting.op(200.0, noise=0.01), "cuda_graph"),
                                         Region(drifting.op(200.0, noise=0.01), "cuda_graph"),
                                         Region(drifting.op(400.0, noise=0.01), "cuda_graph")])
    assert isinstance(a, Timing) and isinstance(b, Timing) and isinstance(c, Timing)
    assert 95 <= a.n <= 101 and 95 <= b.n <= 101 and 45 <= c.n <= 51  # rep_ms / each one's estimate
    assert b.median_us == pytest.approx(a.median_us, rel=0.005)
    assert c.median_us / a.median_us == pytest.approx(2.0, rel=0.005)  # the true ratio survives the drift


def test_interleaved_turns_go_round_robin_and_sync_once(device: FakeDevice) -> None:
    from envcheck.bench import timer as timer_mod
    from envcheck.bench.timer import Region

    calls: list[str] = []

    def region(name: str, cost: float):
        def run() -> None:
            calls.append(name)
            device.t_us += cost
        return run

    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=10, min_samples=5, max_samples=500))
    syncs = device.syncs
    got = timer.measure_interleaved([Region(region("a", 100.0), "cuda_graph"),
                                     Region(region("b", 500.0), "cuda_graph", calls_per_sample=5)])
    assert device.syncs - syncs == 3  # one per estimate, one for all the turns
    sampled = calls[2 * timer_mod.ESTIMATE_SAMPLES:]
    assert sampled.count("a") == 100 and sampled.count("b") == 20
    # 10 ms of work each, in 2 ms turns: 5 rounds of 20 "a" and 4 "b", every other one backwards.
    assert sampled == (["a"] * 20 + ["b"] * 4 + ["b"] * 4 + ["a"] * 20) * 2 + ["a"] * 20 + ["b"] * 4
    assert got[1].median_us == pytest.approx(100.0) and got[1].calls_per_sample == 5


def test_eager_turns_start_on_an_idle_gpu_graph_turns_do_not_wait(device: FakeDevice) -> None:
    from envcheck.bench import timer as timer_mod
    from envcheck.bench.timer import Region

    log: list[str] = []
    device.synchronize = lambda: log.append("sync")  # type: ignore[method-assign]

    def region(name: str, cost: float):
        def run() -> None:
            log.append(name)
            device.t_us += cost
        return run

    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=10, min_samples=5, max_samples=500))
    timer.measure_interleaved([Region(region("graph", 100.0), "cuda_graph"),
                               Region(region("eager", 100.0), timer_mod.EAGER)])
    estimates = 2 * timer_mod.ESTIMATE_SAMPLES + 2  # each region's estimate runs and its sync
    sampled = log[estimates:]
    eager_runs = [i for i, e in enumerate(sampled) if e == "eager" and (i == 0 or sampled[i - 1] != "eager")]
    graph_runs = [i for i, e in enumerate(sampled) if e == "graph" and (i == 0 or sampled[i - 1] != "graph")]
    assert len(eager_runs) >= 2 and len(graph_runs) >= 2
    assert all(i > 0 and sampled[i - 1] == "sync" for i in eager_runs)  # every eager turn waits first
    # Graph turns never wait: the only syncs are the eager turns' and the final one.
    assert sampled.count("sync") == len(eager_runs) + 1 and sampled[-1] == "sync"


def test_a_failing_region_drops_out_and_the_others_are_measured(device: FakeDevice) -> None:
    from envcheck.bench.timer import Region

    state = {"calls": 0}

    def flaky() -> None:
        state["calls"] += 1
        device.t_us += 50.0
        if state["calls"] > 10:  # after the estimate, in its second turn
            raise RuntimeError("illegal instruction")

    timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=5, min_samples=5, max_samples=500))
    ok, bad = timer.measure_interleaved([Region(device.op(50.0, noise=0.0), "cuda_graph"),
                                         Region(flaky, "cuda_graph")])
    assert isinstance(ok, Timing) and ok.n == 100 and ok.median_us == pytest.approx(50.0)
    assert isinstance(bad, RuntimeError)
