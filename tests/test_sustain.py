"""Which compute-bound implementations are timed sustained (sampling.settle): those under which the GPU
slowed for power or heat while NVML was watched, and those that follow a sustained one back to back
(issue 39: a run spent 1.1-2 s on each of 80 matmul cases, most of which never met the power cap)."""

from __future__ import annotations

import time

import pytest
from fake_clock import FakeClock
from fake_nvml import FakeNvml

from envcheck.bench.suite import PlannedCase
from envcheck.model import Accuracy, Note, Settings

SETTINGS = Settings(warmup_ms=1, rep_ms=100, min_samples=10, max_samples=150)
COST = 560.0
MATMUL = PlannedCase("matmul", "torch", "fp16", "fp16", (4096, 4096, 4096))


class CappedDevice(FakeClock):
    """A GPU at its power cap, as the timer tests' LimitedDevice: the top clock for the first 200 ms
    of work, then 1.3x slower with a 6% dip for 200 ms of every second, 1% a second slower as it warms."""

    def kernel(self, cost_us: float, gap_us: float = 0.0):
        def call() -> None:
            t = self.t_us / 1e6
            dip = 1.06 if (t - 0.2) % 1.0 >= 0.8 else 1.0
            self.t_us += gap_us + cost_us * (1.0 if t < 0.2 else 1.3 * dip * (1 + 0.01 * t))
        return call


class FlatDevice(FakeClock):
    """A load under the cap: the same time from the first call on."""

    def kernel(self, cost_us: float, gap_us: float = 0.0):
        def call() -> None:
            self.t_us += gap_us + cost_us
        return call


class Watch:
    """What NVML's clock-event reasons said over the block (None: the driver gives none)."""

    def __init__(self, limited: bool | None, log: list[str]) -> None:
        self._limited, self.log = limited, log

    def __enter__(self) -> Watch:
        self.log.append("watch")
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def limited(self) -> bool | None:
        return self._limited


@pytest.fixture
def timed(monkeypatch):
    pytest.importorskip("torch")
    from envcheck.bench.device import Runtime
    from envcheck.bench.group import Prepared
    from envcheck.bench.sampling import sample, settle
    from envcheck.bench.timer import Region, Timer

    def make(dev: FakeClock, limited: bool | None | str, log: list[str] | None = None):
        import torch

        monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))

        class GpuLike(Runtime):
            cuda = True  # type: ignore[assignment]

        rt = GpuLike(torch, "cpu", 0, None, Timer("cuda", SETTINGS), SETTINGS)
        seen = log if log is not None else []
        if limited != "no nvml":
            rt.limit_watch = lambda: Watch(limited, seen)  # type: ignore[arg-type]

        def run(impl: str = "torch"):
            case = PlannedCase(MATMUL.op, impl, MATMUL.dtype, MATMUL.precision, MATMUL.shape)
            p = Prepared(case, dev.kernel(COST, gap_us=5.0), None, Accuracy(0.0, 0.0, 0.0, 0, 1), rotation_sets=1)
            p.graph = Region(dev.kernel(COST), "cuda_graph", 1)
            start = dev.t_us
            settle(rt, p)
            opened = dev.t_us
            sample(rt, p)
            return p, (opened - start) / 1e3, (dev.t_us - opened) / 1e3  # settled, sampled: ms

        return rt, run

    return make


def test_a_load_that_never_slows_is_sampled_as_a_memory_bound_one(timed) -> None:
    from envcheck.bench.sampling import POWER_PROBE_MS
    from envcheck.bench.timer import SETTLE_BLOCK_US, SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS

    dev = FlatDevice()
    _, run = timed(dev, False)
    p, settled_ms, sampled_ms = run()
    assert p.sustained is False and Note("case.sustained", {"window_ms": 1000}) not in p.notes
    assert POWER_PROBE_MS <= settled_ms < SUSTAIN_SETTLE_MS + SETTLE_BLOCK_US / 1e3
    assert sampled_ms < SUSTAIN_WINDOW_MS / 2  # rep_ms for the graph, the eager batch beside it
    assert p.gpu.median_us == pytest.approx(COST)


@pytest.mark.parametrize("limited", [True, None, "no nvml"])
def test_a_load_that_slows_or_unknown_is_timed_sustained_and_says_so(timed, limited) -> None:
    from envcheck.bench.timer import SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS

    dev = CappedDevice()
    _, run = timed(dev, limited)
    p, settled_ms, sampled_ms = run()
    assert p.sustained is True and Note("case.sustained", {"window_ms": round(SUSTAIN_WINDOW_MS)}) in p.notes
    assert settled_ms >= SUSTAIN_SETTLE_MS and sampled_ms >= SUSTAIN_WINDOW_MS
    middle = (dev.t_us - sampled_ms * 1e3 / 2) / 1e6
    assert p.gpu.median_us == pytest.approx(COST * 1.3 * (1 + 0.01 * middle), rel=0.01)


def test_the_next_implementation_back_to_back_settles_briefly_and_is_sustained(timed) -> None:
    from envcheck.bench.sampling import POWER_PROBE_MS, RECENT_MS, RECENT_SETTLE_MS
    from envcheck.bench.timer import SETTLE_BLOCK_US, SUSTAIN_WINDOW_MS

    dev = CappedDevice()
    log: list[str] = []
    rt, run = timed(dev, True, log)
    run("torch")
    assert log == ["watch"]
    p, settled_ms, sampled_ms = run("triton")  # right after: the GPU is in the limiter's state
    assert log == ["watch"] and p.sustained is True  # no second probe
    assert RECENT_SETTLE_MS <= settled_ms < POWER_PROBE_MS and settled_ms < RECENT_SETTLE_MS + 3 * SETTLE_BLOCK_US / 1e3
    assert sampled_ms >= SUSTAIN_WINDOW_MS
    middle = (dev.t_us - sampled_ms * 1e3 / 2) / 1e6
    assert p.gpu.median_us == pytest.approx(COST * 1.3 * (1 + 0.01 * middle), rel=0.01)
    # After a pause longer than RECENT_MS (the next group's preparation), the limits are watched again.
    dev.t_us += 2 * RECENT_MS * 1e3
    run("compile")
    assert log == ["watch", "watch"]


def test_nvmls_reasons_say_whether_the_gpu_slowed() -> None:
    from envcheck.bench.monitor import LimitWatch

    def limited(reasons: list[int]) -> bool | None:
        fake = FakeNvml.fixture("h200")
        fake.set(0, "nvmlDeviceGetCurrentClocksEventReasons", {"values": reasons})
        watch = LimitWatch(fake, 0, interval_s=0.001)
        with watch:
            time.sleep(0.01)
        return watch.limited()

    assert limited([0x1]) is False  # idle only: not a slowing reason
    assert limited([0x1, 0x4]) is True  # sw_power_cap
    assert limited([0x1, 0x40]) is True  # hw thermal slowdown
    assert LimitWatch(None, 0).limited() is None  # no NVML: unknown


def test_verify_ops_checks_a_sustained_and_a_held_clock_headline_per_compute_bound_op() -> None:
    """tools/evidence/verify_ops.py --ops: the largest case, and the largest not timed sustained."""
    import importlib.util
    from pathlib import Path

    from envcheck.model import Case, Timing

    path = Path(__file__).resolve().parents[1] / "tools" / "evidence" / "verify_ops.py"
    loaded = importlib.util.spec_from_file_location("verify_ops", path)
    verify_ops = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(verify_ops)
    t = Timing.from_samples("cuda_graph", [10.0, 11.0])
    held = Note("case.sustained", {"window_ms": 1000})

    def case(op: str, shape: tuple[int, ...], sustained: bool = False) -> Case:
        return Case(op, "torch", "fp16", "fp16", shape, gpu=t, notes=(held,) if sustained else ())

    cases = [case("matmul", (8192, 8192, 8192), True), case("matmul", (1024, 1024, 1024)),
             case("matmul", (512, 512, 512)), case("relu", (1 << 28,))]
    ops = ("relu", "matmul")
    assert verify_ops.parse(["--ops", "relu,matmul", "r.json"]) == (ops, ["r.json"])
    assert verify_ops.parse(["r.json"]) == (verify_ops.NEW_OPS, ["r.json"]) and verify_ops.parse(["--x"]) is None
    assert verify_ops.headline(cases, ops)["matmul"].shape == (8192, 8192, 8192)
    assert {op: c.shape for op, c in verify_ops.headline(cases, ops, held=True).items()} == {"matmul": (1024, 1024, 1024)}
