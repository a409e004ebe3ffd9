"""The worker protocol and the worker end to end on the CPU backend."""

from __future__ import annotations

import json
import subprocess

import pytest

from envcheck.bench import protocol
from envcheck.model import Case, Ceiling, MonitorSummary, NumericError, Skip, Timing

FAST = {"warmup_ms": 1, "rep_ms": 2, "min_samples": 3, "max_samples": 5, "cold_l2": False, "seed": 0}


def _plan(cases: list[dict], device: str = "cpu") -> dict:
    return {"device": device, "index": 0, "cases": cases, "settings": FAST, "gpu": {}}


def _case(op: str, impl: str = "torch", dtype: str = "fp32", precision: str | None = None, shape=(1024,)) -> dict:
    return {"op": op, "impl": impl, "dtype": dtype, "precision": precision or dtype, "shape": list(shape)}


# --------------------------------------------------------------------------- protocol


def test_encode_decode_round_trip_of_a_case() -> None:
    case = Case("matmul", "triton", "fp32", "tf32", (512, 512, 512), "medium", 3145728, 268435456, "pass",
                gpu=Timing.from_samples("cuda_graph", [32.0, 33.0, 31.5]), compile_s=1.4,
                error=NumericError(7.7e-4, 0.08, 2.9e-3, "tf32", True), monitor=MonitorSummary(4),
                flags=("l2_resident",), tf32=True, gbps=96.0, tflops=8.2, speedup=0.28)
    line = protocol.encode({"event": "case", "case": case})
    assert line.endswith("\n") and "\n" not in line[:-1]
    back = protocol.case_from_event(protocol.decode(line))
    assert back == case


def test_encode_maps_non_finite_floats_to_null() -> None:
    line = protocol.encode({"event": "ceiling", "ceiling": Ceiling("bandwidth", "measured", float("inf"), "GB/s", "x")})
    assert json.loads(line)["ceiling"]["value"] is None


def test_decode_rejects_stray_output() -> None:
    for bad in ("compiling kernel...", '{"event": "bogus"}', "[1, 2]", '{"event": "case"'):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode(bad)
    with pytest.raises(protocol.ProtocolError):
        protocol.encode({"event": "progress"})


def test_skip_and_label() -> None:
    ev = protocol.decode(protocol.encode({"event": "skip", "skip": Skip("relu", "triton", "fp16", (1 << 28,), "oom")}))
    assert protocol.skip_from_event(ev) == Skip("relu", "triton", "fp16", (1 << 28,), "oom")
    assert protocol.case_label(_case("matmul", "triton", "bf16", shape=(4096, 4096, 4096))) == \
        "matmul bf16 4096x4096x4096 triton"
    assert protocol.case_label(_case("matmul", "torch", "fp32", "tf32", shape=(512, 512, 512))) == \
        "matmul fp32/tf32 512x512x512 torch"


@pytest.mark.parametrize("plan, fragment", [
    ({"device": "tpu", "cases": []}, "device"),
    ({"device": "cpu", "cases": [{"op": "conv", "impl": "torch", "dtype": "fp32", "shape": [4]}]}, "unknown op"),
    ({"device": "cpu", "cases": [{"op": "matmul", "impl": "torch", "dtype": "fp32", "shape": [4, 4]}]}, "3 positive"),
    ({"device": "cpu", "index": -1, "cases": []}, "index"),
])
def test_validate_plan_names_the_problem(plan: dict, fragment: str) -> None:
    with pytest.raises(protocol.ProtocolError, match=fragment):
        protocol.validate_plan(plan)


def test_validate_plan_fills_defaults() -> None:
    plan = protocol.validate_plan({"device": "cpu", "cases": [{"op": "relu", "impl": "torch", "dtype": "fp16",
                                                               "shape": [8]}]})
    assert plan["cases"][0]["precision"] == "fp16"
    assert plan["settings"]["warmup_ms"] == 25 and plan["index"] == 0


# --------------------------------------------------------------------------- the worker, end to end


def _run_worker(stdin: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(protocol.worker_argv(), input=stdin, capture_output=True, text=True, timeout=timeout,
                          start_new_session=True)


def test_worker_subprocess_on_cpu() -> None:
    pytest.importorskip("torch")
    cases = [
        _case("vector_add", shape=(4096,)),
        _case("vector_add", "triton", shape=(4096,)),  # no Triton on CPU tensors: an error case, not a crash
        _case("relu", dtype="bf16", shape=(3000,)),
        _case("softmax", shape=(16, 64)),
        _case("row_sum", dtype="fp16", shape=(16, 64)),
        _case("matmul", shape=(32, 16, 24)),
    ]
    proc = _run_worker(json.dumps(_plan(cases)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [protocol.decode(line) for line in proc.stdout.splitlines()]  # every stdout line is an event
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done"
    assert protocol.device_from_event(events[0]).backend == "cpu"
    assert any(e["event"] == "note" and e["text"].startswith("CPU baseline: PyTorch timed with a host clock") for e in events)
    assert [e["i"] for e in events if e["event"] == "case_start"] == list(range(len(cases)))
    got = [protocol.case_from_event(e) for e in events if e["event"] == "case"]
    assert len(got) == len(cases)
    triton = got[1]
    assert triton.impl == "triton" and triton.status == "error" and triton.message and "\n" not in triton.message
    for c in got[:1] + got[2:]:
        assert c.status == "pass", c
        assert c.gpu is None and c.launch is not None and c.launch.method == "host_clock"
        assert c.launch.n >= 3 and c.launch.median_us > 0
        assert c.error is not None and c.error.passed and c.error.rel_l2 < c.error.tolerance
        assert c.gbps and c.gbps > 0
    assert got[2].dtype == "bf16" and got[2].error.precision == "bf16"


def test_worker_rejects_a_bad_plan_with_exit_2() -> None:
    proc = _run_worker("{not json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "bad plan" in proc.stderr


# --------------------------------------------------------------------------- failures inside one case


@pytest.fixture
def worker_mod():
    pytest.importorskip("torch")
    from envcheck.bench import worker

    return worker


def _run_in_process(worker_mod, cases: list[dict]) -> list[dict]:
    events: list[dict] = []
    worker_mod.Worker(_plan(cases), events.append).run()
    return [json.loads(protocol.encode(e)) for e in events]


def test_a_failing_impl_becomes_an_error_case_and_the_run_goes_on(worker_mod, monkeypatch) -> None:
    from envcheck.bench import ops

    real = ops.torch_impl

    def broken(op, inputs, out):
        if op == "relu":
            def fail():
                raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore detail")
            return fail
        return real(op, inputs, out)

    monkeypatch.setattr(ops, "torch_impl", broken)
    events = _run_in_process(worker_mod, [_case("relu"), _case("vector_add")])
    cases = [protocol.case_from_event(e) for e in events if e["event"] == "case"]
    assert [c.status for c in cases] == ["error", "pass"]
    assert cases[0].message == "first call failed: RuntimeError: CUDA error: an illegal memory access was encountered"
    assert events[-1]["event"] == "done"


def test_wrong_results_are_a_fail_not_a_pass(worker_mod, monkeypatch) -> None:
    from envcheck.bench import ops

    def lazy(op, inputs, out):
        return lambda: out  # writes nothing: the NaN poison stays

    monkeypatch.setattr(ops, "torch_impl", lazy)
    events = _run_in_process(worker_mod, [_case("vector_add", shape=(2048,))])
    (case,) = [protocol.case_from_event(e) for e in events if e["event"] == "case"]
    assert case.status == "fail"
    assert case.error is not None and not case.error.passed and case.error.rel_l2 == pytest.approx(1.0)
    assert "2048 of 2048 outputs are NaN/inf" in case.message


def test_out_of_memory_becomes_a_skip(worker_mod, monkeypatch) -> None:
    import torch

    from envcheck.bench import ops

    def oom(op, inputs, out):
        def fail():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB")
        return fail

    monkeypatch.setattr(ops, "torch_impl", oom)
    events = _run_in_process(worker_mod, [_case("vector_add", shape=(1 << 12,)), _case("relu", shape=(64,))])
    skips = [protocol.skip_from_event(e) for e in events if e["event"] == "skip"]
    assert len(skips) == 2
    assert skips[0].reason.startswith("out of memory at 2^12 elements: needs ")
    assert events[-1]["event"] == "done"


def test_speedup_is_relative_to_torch_in_the_same_group(worker_mod, monkeypatch) -> None:
    from envcheck.bench import ops

    monkeypatch.setattr(ops, "compile_impl", lambda op, inputs: ops.torch_impl(op, inputs, inputs["x"].clone()))
    events = _run_in_process(worker_mod, [_case("relu", shape=(4096,)), _case("relu", "compile", shape=(4096,))])
    torch_case, other = [protocol.case_from_event(e) for e in events if e["event"] == "case"]
    assert torch_case.speedup is None
    assert other.speedup == pytest.approx(torch_case.launch.median_us / other.launch.median_us)
    assert other.compile_s is not None and torch_case.compile_s is None


def test_one_line_keeps_the_first_line_only(worker_mod) -> None:
    assert worker_mod.one_line(ValueError("bad\nworse")) == "ValueError: bad"
    assert worker_mod.one_line(KeyError()) == "KeyError"
    assert len(worker_mod.one_line(RuntimeError("x" * 1000))) == 300


def test_matmul_precision_scales_sizes_to_free_memory(worker_mod) -> None:
    assert list(worker_mod.ceilings_sizes(80 << 30, 2)) == [8192, 4096, 2048]
    assert list(worker_mod.ceilings_sizes(300 << 20, 4)) == [2048]
    assert worker_mod.oom_reason("vector_add", (1 << 28,), 3 << 30, int(1.2 * (1 << 30))) == \
        "out of memory at 2^28 elements: needs 3.0 GiB, 1.2 GiB free"


def test_cuda_plan_without_a_gpu_skips_every_case(worker_mod) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible")
    events: list[dict] = []
    worker_mod.Worker(_plan([_case("relu"), _case("relu", "triton")], device="cuda"), events.append).run()
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done"
    skips = [e["skip"] for e in events if e["event"] == "skip"]
    assert len(skips) == 2 and all("no usable CUDA GPU" in s.reason for s in skips)


def test_a_group_is_prepared_then_measured_together_in_plan_order(worker_mod, monkeypatch) -> None:
    from envcheck.bench import ops

    monkeypatch.setattr(ops, "compile_impl", lambda op, inputs: ops.torch_impl(op, inputs, inputs["x"].clone()))
    cases = [_case("relu", shape=(4096,)), _case("relu", "triton", shape=(4096,)),  # no Triton on CPU: error
             _case("relu", "compile", shape=(4096,)), _case("vector_add", shape=(2048,))]
    events = _run_in_process(worker_mod, cases)
    order = [(e["event"], e.get("i", e.get("case", {}).get("impl"))) for e in events
             if e["event"] in ("case_start", "case")]
    # Every implementation of the relu group is prepared before any is measured; the results
    # come out in plan order, torch first.
    assert order == [("case_start", 0), ("case_start", 1), ("case_start", 2),
                     ("case", "torch"), ("case", "triton"), ("case", "compile"),
                     ("case_start", 3), ("case", "torch")]
    torch_case, triton_case, compiled, _ = [protocol.case_from_event(e) for e in events if e["event"] == "case"]
    assert triton_case.status == "error" and triton_case.message.startswith("first call failed")
    assert torch_case.status == compiled.status == "pass"
    assert compiled.speedup == pytest.approx(torch_case.launch.median_us / compiled.launch.median_us)


def test_an_impl_failing_while_sampled_loses_only_its_own_case(worker_mod, monkeypatch) -> None:
    from envcheck.bench import ops

    armed = {"on": False}

    def flaky(op, inputs):
        x = inputs["x"]

        def fn():
            if armed["on"]:
                raise RuntimeError("device lost\nmore")
            return x.clamp_min(0.0)
        return fn

    monkeypatch.setattr(ops, "compile_impl", flaky)
    real = worker_mod.Worker._sample

    def arm_before_sampling(self, ready):  # the failure comes in the interleaved sampling
        armed["on"] = True
        real(self, ready)

    monkeypatch.setattr(worker_mod.Worker, "_sample", arm_before_sampling)
    events = _run_in_process(worker_mod, [_case("relu", shape=(4096,)), _case("relu", "compile", shape=(4096,))])
    torch_case, compiled = [protocol.case_from_event(e) for e in events if e["event"] == "case"]
    assert torch_case.status == "pass" and torch_case.launch is not None
    assert compiled.status == "error" and compiled.message == "RuntimeError: device lost"
    assert events[-1]["event"] == "done"


# --------------------------------------------------------------------------- rotating buffers


def test_rotation_checks_the_first_set_then_cycles_through_all(worker_mod, monkeypatch) -> None:
    """Rotating buffers (forced on the CPU backend here): the first call and the checked call
    use the group's first set; warm-up and launch-time calls then cycle through every set."""
    import torch

    from envcheck.bench import ops

    monkeypatch.setattr(worker_mod.Worker, "_rotation_sets", lambda self, op, shape, dtype, spare: 3)
    real = ops.torch_impl
    outs: list[int] = []
    bound: list[tuple[int, int]] = []

    def recording(op, inputs, out):
        fn = real(op, inputs, out)
        bound.append((inputs["x"].data_ptr(), out.data_ptr()))

        def call():
            outs.append(out.data_ptr())
            return fn()
        return call

    monkeypatch.setattr(ops, "torch_impl", recording)
    seen_groups = []
    real_group_for = worker_mod.Worker._group_for

    def group_for(self, spec):
        g = real_group_for(self, spec)
        seen_groups.append(g)
        return g

    monkeypatch.setattr(worker_mod.Worker, "_group_for", group_for)
    events = _run_in_process(worker_mod, [_case("vector_add", shape=(4096,))])
    (case,) = [protocol.case_from_event(e) for e in events if e["event"] == "case"]
    assert case.status == "pass" and case.error.passed
    group = seen_groups[0]
    assert len(group.extra_sets) == 2
    firsts = [group.out.data_ptr()] + [o.data_ptr() for _, o in group.extra_sets]
    assert len(set(firsts)) == 3 and [o for _, o in bound] == firsts  # one impl per set, the checked first
    assert bound[0][0] == group.inputs["x"].data_ptr()
    # Fresh random inputs for the extra sets, not copies of the first.
    assert not torch.equal(group.inputs["x"], group.extra_sets[0][0]["x"])
    assert outs[:2] == [firsts[0], firsts[0]]  # the first (compile) call and the checked call
    rotated = outs[2:]
    assert len(rotated) > 6 and rotated == [firsts[i % 3] for i in range(len(rotated))]


def _cuda_worker(worker_mod, l2: int | None, cold_l2: bool = True):
    from envcheck.model import BenchDevice

    events: list[dict] = []
    w = worker_mod.Worker({**_plan([], device="cuda"), "settings": {**FAST, "cold_l2": cold_l2}}, events.append)
    w.device = BenchDevice("cuda", "NVIDIA H200", 0, l2_bytes=l2)
    return w, events


def test_cold_l2_note_describes_rotation(worker_mod) -> None:
    w, events = _cuda_worker(worker_mod, 60 << 20)
    w._setup_cold_l2()
    assert w.cold_l2
    (note,) = [e["text"] for e in events]
    assert note.startswith("L2 kept cold for memory-bound cases from 1 MiB to 3x L2 (60 MiB L2) by rotating buffers")
    assert "R = ceil(3x L2 / working set) >= 2 sets of inputs and outputs (R = 15 for 12 MiB)" in note
    assert "replay time / calls" in note and "the first set is the one checked" in note
    assert "cases of 1 MiB and less are L2-resident (flagged)" in note and "flush" not in note
    off, events = _cuda_worker(worker_mod, 60 << 20, cold_l2=False)
    off._setup_cold_l2()
    assert not off.cold_l2 and events[0]["text"].startswith("L2 not kept cold (cold_l2 off)")
    assert off._rotation_sets("vector_add", (1 << 20,), "fp32", None) == 1


def test_rotation_sets_honour_free_memory_with_a_note(worker_mod) -> None:
    w, events = _cuda_worker(worker_mod, 60 << 20)
    w.cold_l2 = True
    assert w._rotation_sets("vector_add", (1 << 20,), "fp32", 1 << 30) == 15
    assert w._rotation_sets("matmul", (1024, 1024, 1024), "fp32", 1 << 30) == 1  # compute-bound: unchanged
    assert w._rotation_sets("relu", (1 << 10,), "fp32", 1 << 30) == 1  # small
    assert events == []
    assert w._rotation_sets("vector_add", (1 << 20,), "fp32", 100 << 20) == 1  # 168 MiB of extra sets
    (note,) = [e["text"] for e in events]
    assert note == ("vector_add fp32 2^20 elements: 15 rotating buffer sets of 12.0 MiB do not fit in free "
                    "memory; timed on one set (may be served partly from L2)")


def test_flags_say_l2_resident_only_when_not_kept_cold() -> None:
    from envcheck.bench import flags

    gpu = Timing.from_samples("cuda_graph", [5.0] * 5)
    launch = Timing.from_samples("cuda_events", [6.0] * 5)
    kw = {"gpu": gpu, "launch": launch, "monitor": None, "l2_bytes": 60 << 20}
    assert flags.case_flags(working_set_bytes=12 << 20, cold=True, **kw) == ()
    assert flags.case_flags(working_set_bytes=12 << 20, cold=False, **kw) == ("l2_resident",)
    assert flags.case_flags(working_set_bytes=800 << 10, cold=False, **kw) == ("l2_resident",)


def test_gpu_and_launch_time_are_sampled_in_one_window_under_drift(worker_mod, monkeypatch) -> None:
    """A power-capped GPU whose speed drifts (here: recovering from a slow start). Sampled in two
    windows, graphs then eager batches, the eager call (the same kernel plus a launch gap) came
    out faster than its graph replay: H200 matmul fp16 8192, GPU 1.89 ms, launch 1.73 ms. In one
    interleaved window launch >= GPU for every implementation."""
    from envcheck.bench.timer import Region, Timer, TimerSettings
    from envcheck.model import BenchDevice

    class Device:
        def __init__(self) -> None:
            self.t_us = 0.0

        def mark(self) -> float:
            return self.t_us

        def elapsed_us(self, start: float, end: float) -> float:
            return end - start

        def synchronize(self) -> None:
            pass

        def host_s(self) -> float:
            return self.t_us / 1e6

        def kernel(self, cost_us: float, gap_us: float = 0.0):
            def call() -> None:  # 1.5x slower at the start, back to 1.0x after 50 ms of work
                self.t_us += gap_us + cost_us * max(1.0, 1.5 - self.t_us / 100_000.0)
            return call

    dev = Device()
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    settings = TimerSettings(warmup_ms=1, rep_ms=20, min_samples=10, max_samples=500)

    def prepared(impl: str, cost: float):
        spec = {"op": "matmul", "impl": impl, "dtype": "fp16", "precision": "fp16", "shape": [8192, 8192, 8192]}
        p = worker_mod._Prepared(spec, dev.kernel(cost, gap_us=0.01 * cost), None, None)
        p.graph = Region(dev.kernel(cost), "cuda_graph", 1)
        return p

    # The bug, reproduced: GPU time in one window, launch time in the next.
    timer = Timer("cuda", settings)
    a = prepared("torch", 1000.0)
    gpu = timer.measure(a.graph.run, method="cuda_graph")
    launch = timer.measure(a.fn, method="cuda_events")
    assert launch.median_us < gpu.median_us

    dev.t_us = 0.0
    w = worker_mod.Worker({**_plan([], device="cuda")}, lambda ev: None)
    w.timer = Timer("cuda", settings)
    w.device = BenchDevice("cuda", "NVIDIA H200", 0)
    ready = [prepared("torch", 1000.0), prepared("triton", 1200.0)]
    w._sample(ready)
    for r in ready:
        assert r.failure is None and r.graph is None  # graphs freed after sampling
        assert r.gpu is not None and r.gpu.method == "cuda_graph"
        assert r.launch is not None and r.launch.method == "cuda_events"
        assert r.launch.median_us >= r.gpu.median_us
        assert r.launch.median_us / r.gpu.median_us == pytest.approx(1.01, abs=0.01)
    assert ready[1].gpu.median_us / ready[0].gpu.median_us == pytest.approx(1.2, rel=0.01)


def test_one_window_keeps_failures_per_implementation(worker_mod, monkeypatch) -> None:
    """A graph replay failing in the shared window costs that implementation its GPU time only;
    an eager failure makes its case an error; the other implementation is measured all the same."""
    from envcheck.bench.timer import Region, Timer, TimerSettings
    from envcheck.model import BenchDevice

    class Device:
        t_us = 0.0

        def mark(self):
            return self.t_us

        def elapsed_us(self, s, e):
            return e - s

        def synchronize(self):
            pass

        def host_s(self):
            return self.t_us / 1e6

    dev = Device()
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    calls = {"n": 0}

    def ok():
        dev.t_us += 100.0

    def replay_breaks():
        calls["n"] += 1
        dev.t_us += 100.0
        if calls["n"] > 8:
            raise RuntimeError("replay failed\ndetail")

    def spec(impl):
        return {"op": "relu", "impl": impl, "dtype": "fp32", "precision": "fp32", "shape": [1 << 20]}

    w = worker_mod.Worker({**_plan([], device="cuda")}, lambda ev: None)
    w.backend = "cpu"  # _after_failure touches no CUDA
    w.timer = Timer("cuda", TimerSettings(warmup_ms=1, rep_ms=2, min_samples=5, max_samples=50))
    w.device = BenchDevice("cuda", "NVIDIA H200", 0)
    a = worker_mod._Prepared(spec("torch"), ok, None, None)
    a.graph = Region(ok, "cuda_graph", 1)
    b = worker_mod._Prepared(spec("triton"), ok, None, None)
    b.graph = Region(replay_breaks, "cuda_graph", 1)
    w._sample([a, b])
    assert a.gpu is not None and a.launch is not None and a.failure is None
    assert b.gpu is None and b.launch is not None and b.failure is None
    assert b.message == "no GPU time: CUDA graph replay failed (RuntimeError: replay failed)"
