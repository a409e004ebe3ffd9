"""The worker protocol, the worker end to end on the CPU backend, and the worker's steps
(group preparation, interleaved sampling) with fakes where a GPU would be needed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fake_clock import FakeClock

from envcheck.bench import protocol
from envcheck.bench.suite import CPU_QUICK_SETTINGS, PlannedCase
from envcheck.harness.failures import ChildError, Outcome
from envcheck.harness.spawn import spawn
from envcheck.model import (
    Accuracy,
    BenchDevice,
    Case,
    CeilingRun,
    MonitorWindow,
    Note,
    Settings,
    Skip,
    Timing,
    to_dict,
)

FAST = Settings(warmup_ms=1, rep_ms=2, min_samples=3, max_samples=5, cold_l2=False, threads=1)


def _plan(cases: list[PlannedCase], backend: str = "cpu", settings: Settings = FAST) -> protocol.WorkerPlan:
    return protocol.WorkerPlan(backend, 0, tuple(cases), settings)


def _case(op: str, impl: str = "torch", dtype: str = "fp32", precision: str | None = None,
          shape: tuple[int, ...] = (1024,)) -> PlannedCase:
    return PlannedCase(op, impl, dtype, precision or dtype, shape)


# --------------------------------------------------------------------------- protocol

EVENTS = [
    protocol.Started(BenchDevice("cuda", "NVIDIA H200", 0, uuid="GPU-8d0f", pci_bus_id="00000000:19:00.0"),
                     {"torch": "2.11.0+cu130"}),
    protocol.CeilingMeasured(CeilingRun("matmul", "bf16", (8192, 8192, 8192),
                                        Timing.from_samples("cuda_graph", [1500.0, 1510.0]), "bf16")),
    protocol.CaseStarted(3, 10, _case("matmul", "triton", "fp32", "tf32", (512, 512, 512))),
    protocol.WindowSampled(0, MonitorWindow(0.02, [0.0, 0.02], sm_mhz=[1980, 1980], reasons=((), ("sw_power_cap",)))),
    protocol.Measured(Case("matmul", "triton", "fp32", "tf32", (512, 512, 512),
                           gpu=Timing.from_samples("cuda_graph", [32.0, 33.0, 31.5], 31), compile_s=1.4,
                           accuracy=Accuracy(7.7e-4, 0.08, 1.2e-3, 0, 262144), window=0, kernel="pointer 64x128x32 s4 w4",
                           notes=(Note("case.l2_not_cold", {"sets": 15, "set_bytes": 12582912}),))),
    protocol.Skipped(Skip("relu", "triton", "fp16", (1 << 28,), Note("skip.out_of_memory", {"need_bytes": 3 << 30}),
                          "fp16")),
    protocol.Noted(Note("bench.l2_cold", {"l2_bytes": 62914560, "l2_multiple": 3})),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.kind)
def test_every_event_round_trips_as_a_messages_data(event) -> None:
    data = protocol.encode(event)
    assert data["event"] == event.kind
    assert protocol.decode(data) == event


def test_decode_rejects_stray_output_and_malformed_payloads() -> None:
    for bad in ("compiling kernel...", {"event": "bogus"}, [1, 2], {"event": "case"},
                {"event": "case", "case": {"op": "relu"}}, {"event": "case_start", "i": 0, "n": 1, "case":
                {"op": "relu", "impl": "torch", "dtype": "fp32", "precision": "fp32", "shape": [1, 2]}}):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode(bad)
    with pytest.raises(protocol.ProtocolError):
        protocol.encode({"event": "note"})  # type: ignore[arg-type]


def test_plan_round_trips_and_bad_plans_name_the_problem() -> None:
    plan = _plan([_case("relu", dtype="fp16"), _case("matmul", "triton", "fp32", "tf32", (64, 64, 64))], "cuda",
                 CPU_QUICK_SETTINGS)
    assert protocol.decode_plan(to_dict(plan)) == plan
    good = to_dict(plan)
    for patch, fragment in [
        ({"backend": "tpu"}, "backend"),
        ({"index": -1}, "index"),
        ({"cases": [{**good["cases"][0], "op": "conv"}]}, "unknown op"),
        ({"cases": [{**good["cases"][0], "shape": [4, 4]}]}, "1 positive integer"),
        ({"settings": {"min_samples": 0}}, "min_samples"),
    ]:
        with pytest.raises(protocol.ProtocolError, match=fragment):
            protocol.decode_plan({**good, **patch})
    with pytest.raises(protocol.ProtocolError, match="bad plan"):
        protocol.decode_plan("{not a plan")


def test_planned_case_names_its_group() -> None:
    c = _case("matmul", "torch", "fp32", "tf32", (512, 512, 512))
    assert c.group == ("matmul", "fp32", "tf32", (512, 512, 512))
    assert c.group_label == "matmul fp32/tf32 512×512×512" and c.label == "matmul fp32/tf32 512×512×512 torch"
    assert _case("relu", shape=(1 << 20,)).group_label == "relu fp32 1M"
    with pytest.raises(ValueError):
        PlannedCase("relu", "torch", "fp32", "fp32", (4, 4))


# --------------------------------------------------------------------------- the worker, end to end


def _run_worker(plan: Any, timeout: float = 120) -> tuple[Outcome, list]:
    """The real worker through the harness: how it ended, and its events as the runner decodes them."""
    events: list = []
    out = spawn("envcheck.bench.worker:main", plan, timeout=timeout, on_event=lambda d: events.append(protocol.decode(d)))
    return out, events


def test_worker_subprocess_on_cpu() -> None:
    pytest.importorskip("torch")
    cases = [
        _case("vector_add", shape=(4097,)),
        _case("vector_add", "triton", shape=(4097,)),  # no Triton on CPU tensors: a failure, not a crash
        _case("relu", dtype="bf16", shape=(3000,)),
        _case("softmax", shape=(16, 65)),
        _case("row_sum", dtype="fp16", shape=(16, 65)),
        _case("matmul", shape=(33, 17, 25)),
    ]
    out, events = _run_worker(to_dict(_plan(cases)))
    assert out.done and out.failure is None, out.stderr_tail[-2000:]
    assert isinstance(events[0], protocol.Started) and events[0].device.backend == "cpu"
    assert isinstance(out.result, dict)  # its phases
    assert protocol.Noted(Note("bench.cpu_timing", {"threads": 1})) in events
    assert [e.i for e in events if isinstance(e, protocol.CaseStarted)] == list(range(len(cases)))
    got = [e.case for e in events if isinstance(e, protocol.Measured)]
    assert [c.key for c in got] == [c.key for c in cases]
    triton = got[1]
    assert triton.failure is not None and triton.failure.stage == "first_call" and "\n" not in triton.failure.detail
    assert triton.launch is None and triton.gpu is None
    for c in got[:1] + got[2:]:
        assert c.failure is None and c.gpu is None and c.window is None
        assert c.launch is not None and c.launch.method == "host_clock" and 3 <= c.launch.n <= 5
        assert c.sampled_until == "count" and c.cache is None  # no GPU: no sequential stop, no compile cache
        acc = c.accuracy
        assert acc is not None and acc.nonfinite == 0
        bound = 1e-2 if c.dtype in ("fp16", "bf16") else 1e-5
        assert acc.max_rel_elem < bound and acc.rel_l2 < bound, c.key
    assert got[0].accuracy.elements == 4097 and got[4].accuracy.elements == 16


def test_worker_rejects_a_bad_plan_naming_the_problem() -> None:
    out, events = _run_worker({"backend": "tpu", "index": 0, "cases": [], "settings": {}})
    assert isinstance(out.failure, ChildError) and out.failure.type == "ProtocolError" and events == []
    assert "bad plan" in out.failure.message and "backend" in out.failure.message


# --------------------------------------------------------------------------- failures inside one case


@pytest.fixture
def worker_mod():
    pytest.importorskip("torch")
    from envcheck.bench import worker

    return worker


def _run_in_process(worker_mod, cases: list[PlannedCase], settings: Settings = FAST) -> list:
    """The events as the parent would read them, then the phases the worker returned."""
    events: list = []
    phases = worker_mod.Worker(_plan(cases, settings=settings), events.append).run()
    return [*(protocol.decode(protocol.encode(e)) for e in events), phases]


def _measured(events: list) -> list[Case]:
    return [e.case for e in events if isinstance(e, protocol.Measured)]


def test_a_failing_impl_becomes_a_failed_case_and_the_run_goes_on(worker_mod, monkeypatch) -> None:
    from envcheck.bench import impls

    real = impls.torch_impl

    def broken(op, inputs, out):
        if op == "relu":
            def fail():
                raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore detail")
            return fail
        return real(op, inputs, out)

    monkeypatch.setattr(impls, "torch_impl", broken)
    events = _run_in_process(worker_mod, [_case("relu"), _case("vector_add")])
    relu, add = _measured(events)
    assert relu.failure.stage == "first_call"
    assert relu.failure.detail == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert add.failure is None and add.launch is not None
    assert isinstance(events[-1], dict)


def test_an_unwritten_output_shows_in_the_statistics(worker_mod, monkeypatch) -> None:
    from envcheck.bench import impls

    monkeypatch.setattr(impls, "torch_impl", lambda op, inputs, out: lambda: out)  # writes nothing
    (case,) = _measured(_run_in_process(worker_mod, [_case("vector_add", shape=(2048,))]))
    assert case.failure is None  # measured: whether it passes is the analysis's verdict
    assert case.accuracy.nonfinite == 2048 and case.accuracy.elements == 2048
    assert case.accuracy.rel_l2 == pytest.approx(1.0)


def test_out_of_memory_becomes_a_skip(worker_mod, monkeypatch) -> None:
    import torch

    from envcheck.bench import impls

    def oom(op, inputs, out):
        def fail():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB")
        return fail

    monkeypatch.setattr(impls, "torch_impl", oom)
    events = _run_in_process(worker_mod, [_case("vector_add", shape=(1 << 12,)), _case("relu", shape=(64,))])
    skips = [e.skip for e in events if isinstance(e, protocol.Skipped)]
    assert len(skips) == 2 and skips[0].precision == "fp32"
    assert skips[0].reason.key == "skip.out_of_memory"
    assert skips[0].reason.params["need_bytes"] > 3 * 4096 * 4 and skips[0].reason.params["free_bytes"] is None
    assert isinstance(events[-1], dict)


def test_cuda_plan_without_a_gpu_skips_every_case_with_the_reason(worker_mod) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible")
    events: list = []
    phases = worker_mod.Worker(_plan([_case("relu"), _case("relu", "triton")], "cuda"), events.append).run()
    assert isinstance(events[0], protocol.Started) and isinstance(phases, dict)
    (note,) = [e.note for e in events if isinstance(e, protocol.Noted)]
    assert note.key.startswith("bench.no_cuda.")
    skips = [e.skip for e in events if isinstance(e, protocol.Skipped)]
    assert len(skips) == 2 and all(s.reason == note for s in skips)


def test_a_group_is_prepared_then_measured_together_in_plan_order(worker_mod, monkeypatch) -> None:
    from envcheck.bench import impls

    monkeypatch.setattr(impls, "compiled_on_sets",
                        lambda op, sets: [impls.torch_impl(op, s, s["x"].clone()) for s in sets])
    cases = [_case("relu", shape=(4096,)), _case("relu", "triton", shape=(4096,)),  # no Triton on CPU: failure
             _case("relu", "compile", shape=(4096,)), _case("vector_add", shape=(2048,))]
    events = _run_in_process(worker_mod, cases)
    order = [(type(e).__name__, e.i if isinstance(e, protocol.CaseStarted) else e.case.impl) for e in events
             if isinstance(e, (protocol.CaseStarted, protocol.Measured))]
    # Every implementation of the relu group is prepared before any is measured; the results
    # come out in plan order, torch first.
    assert order == [("CaseStarted", 0), ("CaseStarted", 1), ("CaseStarted", 2),
                     ("Measured", "torch"), ("Measured", "triton"), ("Measured", "compile"),
                     ("CaseStarted", 3), ("Measured", "torch")]
    torch_case, triton_case, compiled, _ = _measured(events)
    assert triton_case.failure.stage == "first_call" and compiled.failure is None
    assert compiled.compile_s is not None and torch_case.compile_s is None
    # The compiled stand-in returns its own output, not the group's: checked on a poisoned block.
    assert Note("case.output_not_poisoned") not in compiled.notes and compiled.accuracy.nonfinite == 0


def test_an_impl_failing_while_sampled_loses_only_its_own_case(worker_mod, monkeypatch) -> None:
    from envcheck.bench import impls, sampling

    armed = {"on": False}

    def flaky(op, sets):
        x = sets[0]["x"]

        def fn():
            if armed["on"]:
                raise RuntimeError("device lost\nmore")
            return x.clamp_min(0.0)
        return [fn]

    monkeypatch.setattr(impls, "compiled_on_sets", flaky)
    real = sampling.sample

    def arm_before_sampling(rt, ready):  # the failure comes in the interleaved sampling
        armed["on"] = True
        real(rt, ready)

    monkeypatch.setattr(worker_mod, "sample", arm_before_sampling)
    events = _run_in_process(worker_mod, [_case("relu", shape=(4096,)), _case("relu", "compile", shape=(4096,))])
    torch_case, compiled = _measured(events)
    assert torch_case.failure is None and torch_case.launch is not None
    assert compiled.failure.stage == "sample" and compiled.failure.detail == "RuntimeError: device lost"
    assert isinstance(events[-1], dict)


def test_cpu_threads_are_set_from_the_settings(worker_mod) -> None:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)  # not what the plan asks for (the test process runs on one: conftest.py)
    try:
        events = _run_in_process(worker_mod, [_case("relu", shape=(256,))], dataclasses.replace(FAST, threads=1))
        assert torch.get_num_threads() == 1
        assert protocol.Noted(Note("bench.cpu_timing", {"threads": 1})) in events
    finally:
        torch.set_num_threads(before)


# --------------------------------------------------------------------------- rotating buffers


def _runtime(backend: str = "cpu", l2: int | None = 60 << 20, cold: bool = True, free: int | None = None,
             timer=None):
    """A Runtime on the CPU; ``backend="cuda"`` makes it act as a GPU for the steps that ask
    (rotation on, free memory from the test) while its tensors stay on the CPU."""
    import torch

    from envcheck.bench.device import Runtime
    from envcheck.bench.timer import Timer

    class GpuLike(Runtime):
        cuda = True  # type: ignore[assignment]

        def free_bytes(self) -> int | None:
            return free

        def after_failure(self) -> None:
            pass

    settings = dataclasses.replace(FAST, cold_l2=cold)
    cls = GpuLike if backend == "cuda" else Runtime
    return cls(torch, "cpu", 0, BenchDevice(backend, "dev", l2_bytes=l2), timer or Timer("cpu", settings), settings)


def test_rotation_sets_follow_l2_and_free_memory_with_a_note(worker_mod) -> None:
    from envcheck.bench.group import open_group

    vec = _case("vector_add", shape=(1 << 20,))  # 12 MiB: 15 sets on an H200
    assert open_group(_runtime("cuda", free=8 << 30), vec, 0).sets == 15
    assert open_group(_runtime("cuda", free=8 << 30), vec, 0).notes == ()
    assert open_group(_runtime("cuda", free=8 << 30), _case("relu", shape=(1 << 10,)), 0).sets == 1  # small
    mm = _case("matmul", shape=(256, 256, 256))
    assert open_group(_runtime("cuda", free=8 << 30), mm, 0).sets == 1  # compute-bound
    assert open_group(_runtime("cuda", free=8 << 30, cold=False), vec, 0).sets == 1  # cold_l2 off
    short = open_group(_runtime("cuda", free=300 << 20), vec, 0)  # 168 MiB of extra sets do not fit
    assert short.sets == 1 and short.notes == (Note("case.l2_not_cold", {"sets": 15, "set_bytes": 12 << 20}),)
    assert open_group(_runtime("cuda", free=10 << 20), vec, 0).skip.key == "skip.out_of_memory"


def test_rotation_checks_the_first_set_then_cycles_through_all(worker_mod, monkeypatch) -> None:
    """The first call and the checked call use the group's first set; warm-up and launch-time
    calls then cycle through every set."""
    import torch

    from envcheck.bench import group as group_mod
    from envcheck.bench import impls

    monkeypatch.setattr(group_mod, "rotation_sets", lambda *a, **kw: 3)
    real = impls.torch_impl
    outs: list[int] = []
    bound: list[tuple[int, int]] = []

    def recording(op, inputs, out):
        fn = real(op, inputs, out)
        bound.append((inputs["x"].data_ptr(), out.data_ptr()))

        def call():
            outs.append(out.data_ptr())
            return fn()
        return call

    monkeypatch.setattr(impls, "torch_impl", recording)
    rt = _runtime()
    g = group_mod.open_group(rt, _case("vector_add", shape=(4096,)), 0)
    assert g.sets == 3
    prepared = group_mod.prepare(rt, _case("vector_add", shape=(4096,)), g)
    assert isinstance(prepared, group_mod.Prepared) and prepared.rotation_sets == 3
    assert prepared.accuracy.nonfinite == 0 and prepared.accuracy.max_rel_elem < 1e-6
    firsts = [g.out.data_ptr()] + [o.data_ptr() for _, o in g.extra_sets]
    assert len(set(firsts)) == 3 and [o for _, o in bound] == firsts  # one impl per set, the checked first
    assert bound[0][0] == g.inputs["x"].data_ptr()
    # Fresh random inputs for the extra sets, not copies of the first.
    assert not torch.equal(g.inputs["x"], g.extra_sets[0][0]["x"])
    assert outs[:3] == [firsts[0]] * 3  # the first (compile) call, the checked call, the exact inputs' call
    rotated = outs[3:]
    assert len(rotated) >= 3 and rotated == [firsts[i % 3] for i in range(len(rotated))]


# --------------------------------------------------------------------------- sampling with a fake GPU


class DriftingDevice(FakeClock):
    """A fake GPU clock whose speed drifts: 1.5x slower at the start, back to 1.0x after 50 ms of work."""
    def kernel(self, cost_us: float, gap_us: float = 0.0):
        def call() -> None:
            self.t_us += gap_us + cost_us * max(1.0, 1.5 - self.t_us / 100_000.0)
        return call


def _prepared(op_case: PlannedCase, fn, graph=None):
    from envcheck.bench.group import Prepared

    p = Prepared(op_case, fn, None, Accuracy(0.0, 0.0, 0.0, 0, 1), rotation_sets=1)
    p.graph = graph
    return p


def test_gpu_and_launch_time_are_sampled_in_one_window_under_drift(worker_mod, monkeypatch) -> None:
    """Sampled in two windows, graphs then eager batches, the eager call (the same kernel plus a
    launch gap) came out faster than its graph replay: H200 matmul fp16 8192, GPU 1.89 ms,
    launch 1.73 ms. In one interleaved window launch >= GPU for every implementation; settled
    first, each implementation reads its steady time whatever order the group runs in."""
    from envcheck.bench.sampling import sample, settle
    from envcheck.bench.timer import Region, Timer

    dev = DriftingDevice()
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    settings = Settings(warmup_ms=1, rep_ms=20, min_samples=10, max_samples=200)
    mm = (8192, 8192, 8192)

    def prepared(impl: str, cost: float):
        return _prepared(_case("matmul", impl, "fp16", shape=mm), dev.kernel(cost, gap_us=0.01 * cost),
                         Region(dev.kernel(cost), "cuda_graph", 1))

    # The bug, reproduced: GPU time in one window, launch time in the next.
    timer = Timer("cuda", settings)
    a = prepared("torch", 1000.0)
    gpu = timer.measure(a.graph)
    launch = timer.measure(Region(a.fn, "cuda_events", 1))
    assert launch.median_us < gpu.median_us

    for order in (("torch", "triton"), ("triton", "torch")):
        dev.t_us = 0.0  # the drift starts again with the first implementation sampled
        rt = _runtime(backend="cuda", timer=Timer("cuda", settings))
        ready = {impl: prepared(impl, {"torch": 1000.0, "triton": 1200.0}[impl]) for impl in order}
        for r in ready.values():
            settle(rt, r)
            sample(rt, r)
        for r in ready.values():
            assert r.failure is None and r.graph is None  # graphs freed after sampling
            assert r.gpu is not None and r.gpu.method == "cuda_graph"
            assert r.launch is not None and r.launch.method == "cuda_events"
            assert r.launch.median_us >= r.gpu.median_us
            assert r.launch.median_us / r.gpu.median_us == pytest.approx(1.01, abs=0.01)
        assert ready["triton"].gpu.median_us / ready["torch"].gpu.median_us == pytest.approx(1.2, rel=0.01)


class LimitedDevice(FakeClock):
    """A fake GPU at its power cap, shaped like an H100 under cuDNN's conv2d
    (evidence/device-logs/2026-11-26_0558Z_h100_power_ramp.txt.gz): each call at the top clock for the
    first 200 ms of work, then 30% slower, with a dip 6% slower still for 200 ms of every second (the
    limiter's one-second power average reaching the cap), and 1% a second slower as the GPU warms."""
    def kernel(self, cost_us: float, gap_us: float = 0.0):
        def call() -> None:
            t = self.t_us / 1e6
            dip = 1.06 if (t - 0.2) % 1.0 >= 0.8 else 1.0
            factor = 1.0 if t < 0.2 else 1.3 * dip * (1 + 0.01 * t)
            self.t_us += gap_us + cost_us * factor
        return call


def test_a_compute_bound_implementation_is_timed_in_the_state_it_sustains(worker_mod, monkeypatch) -> None:
    """Settled for 50 ms and sampled for 100 ms, a power-capped implementation reads the top clock of
    its first 200 ms (the H100's conv2d: 533 us against 567 us sustained). Sustained (settled at least
    SUSTAIN_SETTLE_MS, sampled over SUSTAIN_WINDOW_MS in at most max_samples samples), it reads the
    time it holds, whatever phase of the limiter's swing its window starts in."""
    from envcheck.bench.sampling import sample, settle
    from envcheck.bench.timer import SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS, Region, Timer

    dev = LimitedDevice()
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    settings = Settings(warmup_ms=1, rep_ms=100, min_samples=10, max_samples=150)
    cost = 560.0

    conv2d = _case("conv2d", "torch", "fp16", shape=(64, 64, 128, 128, 64, 7, 2))
    # The same kernel under a memory-bound op's name: sampled the way a memory-bound op is.
    as_memory_bound = _case("layer_norm", "torch", "fp16", shape=(32768, 8192))

    def run(case: PlannedCase, start_s: float) -> tuple[Any, float, float]:
        dev.t_us = start_s * 1e6
        rt = _runtime(backend="cuda", timer=Timer("cuda", settings))
        p = _prepared(case, dev.kernel(cost, gap_us=5.0), Region(dev.kernel(cost), "cuda_graph", 1))
        settle(rt, p)
        opened = dev.t_us
        sample(rt, p)
        return p, opened, dev.t_us

    burst, _, _ = run(as_memory_bound, 0.0)
    assert burst.gpu is not None and burst.gpu.median_us < 1.05 * cost and burst.sampled_until == "count"
    held = []
    for start in (0.0, 0.25, 0.5, 0.75):  # the load began that long before: any phase of the swing
        p, opened, closed = run(conv2d, start)
        assert p.gpu is not None and p.launch is not None
        assert opened - start * 1e6 >= SUSTAIN_SETTLE_MS * 1e3
        assert closed - opened >= SUSTAIN_WINDOW_MS * 1e3
        assert p.gpu.n <= settings.max_samples and p.gpu.calls_per_sample > 1 and p.sampled_until == "window"
        held.append(p.gpu.median_us)
        # the held time: 1.3x, warming by 1% a second; the dips, a fifth of the window, leave the median
        middle = (opened + closed) / 2e6
        assert p.gpu.median_us == pytest.approx(cost * 1.3 * (1 + 0.01 * middle), rel=0.01)
        assert p.launch.median_us >= 0.98 * p.gpu.median_us
    assert max(held) / min(held) < 1.01


def test_without_settling_the_first_implementation_reads_the_drift(worker_mod, monkeypatch) -> None:
    """The control for the test above: sampled straight away, the implementation that meets the
    drifting GPU first reads slower than it is."""
    from envcheck.bench.sampling import sample
    from envcheck.bench.timer import Region, Timer

    dev = DriftingDevice()
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    settings = Settings(warmup_ms=1, rep_ms=20, min_samples=10, max_samples=200)
    rt = _runtime(backend="cuda", timer=Timer("cuda", settings))
    first, second = (_prepared(_case("relu", impl, "fp16", shape=(1 << 20,)), dev.kernel(1000.0),
                               Region(dev.kernel(1000.0), "cuda_graph", 1)) for impl in ("torch", "triton"))
    sample(rt, first)
    sample(rt, second)
    assert first.gpu.median_us > 1.05 * second.gpu.median_us


def test_one_window_keeps_failures_per_implementation(worker_mod, monkeypatch) -> None:
    """A graph replay failing in its window costs that implementation its GPU time only (a note
    says why); the other implementation is measured all the same."""
    from envcheck.bench.sampling import sample, to_case
    from envcheck.bench.timer import Region, Timer

    dev = DriftingDevice()
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    calls = {"n": 0}
    ok = dev.kernel(100.0)

    def replay_breaks():
        calls["n"] += 1
        ok()
        if calls["n"] > 8:
            raise RuntimeError("replay failed\ndetail")

    rt = _runtime(timer=Timer("cuda", Settings(warmup_ms=1, rep_ms=2, min_samples=5, max_samples=50)))
    a = _prepared(_case("relu", shape=(1 << 20,)), ok, Region(ok, "cuda_graph", 1))
    b = _prepared(_case("relu", "triton", shape=(1 << 20,)), ok, Region(replay_breaks, "cuda_graph", 1))
    sample(rt, a)
    sample(rt, b)
    assert a.gpu is not None and a.launch is not None and a.failure is None
    assert b.gpu is None and b.launch is not None and b.failure is None
    case = to_case(b, window=2)
    assert case.window == 2 and case.gpu is None and case.launch is not None
    assert case.notes == (Note("case.no_gpu_time", {"stage": "replay", "detail": "RuntimeError: replay failed"}),)


# --------------------------------------------------------------------------- the device


def _fake_torch(uuid: str = "8d0ff531-a2cd-2527-7669-e66277d6bc28", **pci):
    import types

    props = types.SimpleNamespace(name="NVIDIA H200", uuid=uuid, multi_processor_count=132, L2_cache_size=62914560,
                                  total_memory=150754820096, major=9, minor=0, **pci)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(get_device_properties=lambda i: props))


def test_the_gpu_is_named_by_nvmls_uuid_and_pci_bus_id() -> None:
    from fake_nvml import FakeNvml

    from envcheck.bench.device import cuda_device

    nvml = FakeNvml.fixture("h200")
    nvml.init()
    d = cuda_device(_fake_torch(), 0, nvml)
    assert d == BenchDevice("cuda", "NVIDIA H200", 0, uuid="GPU-8d0ff531-a2cd-2527-7669-e66277d6bc28", sm_count=132,
                            l2_bytes=62914560, memory_total_bytes=150754820096, compute_capability="9.0",
                            pci_bus_id="00000000:00:06.0")
    # Without NVML torch's PCI numbers stand in, in NVML's form; without those, none.
    assert cuda_device(_fake_torch(pci_domain_id=0, pci_bus_id=0x19, pci_device_id=0), 0).pci_bus_id == \
        "00000000:19:00.0"
    assert cuda_device(_fake_torch(), 0).pci_bus_id is None
    assert cuda_device(_fake_torch(uuid="GPU-abc"), 0).uuid == "GPU-abc"


def test_cpu_name_from_proc_cpuinfo() -> None:
    from envcheck.bench.device import cpu_name

    assert cpu_name(lambda path: "processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n") == \
        "AMD EPYC 9654 96-Core Processor"
    assert cpu_name(lambda path: "") != ""


def test_ceiling_windows_report_runs_and_say_what_could_not_be_measured(worker_mod, monkeypatch) -> None:
    from envcheck.bench import worker as ceilings

    run = CeilingRun("copy", "fp32", (1 << 28,), Timing.from_samples("cuda_graph", [500.0, 501.0], 2))
    broken = ceilings.Kernel("matmul", "fp32", (8192, 8192, 16384), lambda: None, "tf32")

    def measure(timer, kernels):
        if not kernels:
            return
        yield run
        yield broken, RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED\nmore")

    monkeypatch.setattr(ceilings, "measure", measure)
    events: list = []
    w = worker_mod.Worker(_plan([_case("matmul", "torch", "fp32", "tf32", (64, 64, 64))], "cuda"), events.append)
    rt = _runtime("cuda", free=80 << 30)
    w._ceiling_window(rt, lambda free: [broken], "matmul")
    w._ceiling_window(rt, lambda free: [], "bandwidth")

    def boom(free):
        raise RuntimeError("CUDA error: out of memory")

    w._ceiling_window(rt, boom, "bandwidth")
    assert events == [
        protocol.CeilingMeasured(run),
        protocol.Noted(Note("ceiling.failed", {"kernel": "matmul", "dtype": "fp32", "shape": (8192, 8192, 16384),
                                               "detail": "RuntimeError: CUBLAS_STATUS_NOT_SUPPORTED",
                                               "precision": "tf32"})),
        protocol.Noted(Note("ceiling.no_memory", {"ceiling": "bandwidth", "free_bytes": 80 << 30})),
        protocol.Noted(Note("ceiling.window_failed", {"ceiling": "bandwidth",
                                                      "detail": "RuntimeError: CUDA error: out of memory"})),
    ]
