"""The measurement engine on a real GPU: the worker end to end, the timer against do_bench.

Skipped without a CUDA GPU, torch and Triton (see conftest.py).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from envcheck.bench import protocol

pytestmark = pytest.mark.gpu

SETTINGS = {"warmup_ms": 10, "rep_ms": 30, "min_samples": 10, "max_samples": 100, "cold_l2": True, "seed": 0}


def _case(op: str, impl: str, dtype: str, precision: str, shape: tuple[int, ...]) -> dict:
    return {"op": op, "impl": impl, "dtype": dtype, "precision": precision, "shape": list(shape)}


@pytest.fixture(scope="module")
def run_events() -> list[dict]:
    cases = []
    for n in (1 << 10, 1 << 20, 1 << 26):
        cases += [_case("vector_add", impl, "fp32", "fp32", (n,)) for impl in ("torch", "triton")]
    cases += [_case("matmul", impl, "bf16", "bf16", (2048, 2048, 2048)) for impl in ("torch", "triton")]
    cases += [_case("matmul", impl, "fp32", "tf32", (512, 512, 512)) for impl in ("torch", "triton")]
    cases += [_case("matmul", impl, "fp32", "fp32", (512, 512, 512)) for impl in ("torch", "triton")]
    cases += [_case("softmax", impl, "fp16", "fp16", (4096, 1024)) for impl in ("torch", "triton")]
    cases += [_case("row_sum", impl, "bf16", "bf16", (4096, 1024)) for impl in ("torch", "triton")]
    cases += [_case("relu", impl, "fp32", "fp32", (1 << 22,)) for impl in ("torch", "triton")]
    plan = {"device": "cuda", "index": 0, "cases": cases, "settings": SETTINGS,
            "gpu": {"theoretical_bandwidth_gbps": None, "name": None}}
    proc = subprocess.run(protocol.worker_argv(), input=json.dumps(plan), capture_output=True, text=True,
                          timeout=600, start_new_session=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [protocol.decode(line) for line in proc.stdout.splitlines()]


def _cases(events: list[dict]) -> dict[tuple, object]:
    out = {}
    for e in events:
        if e["event"] == "case":
            c = protocol.case_from_event(e)
            out[(c.op, c.impl, c.precision, c.shape)] = c
    return out


def test_every_case_passes_with_graph_and_launch_times(run_events: list[dict]) -> None:
    assert run_events[0]["event"] == "start" and run_events[-1]["event"] == "done"
    cases = _cases(run_events)
    assert len(cases) == 18
    for c in cases.values():
        assert c.status == "pass", (c.key, c.message)
        assert c.gpu is not None and c.gpu.method == "cuda_graph"
        assert c.launch is not None and c.launch.method == "cuda_events"
        assert c.monitor is not None
        if c.impl == "triton":
            assert c.compile_s is not None and c.speedup is not None


def test_tf32_recorded_for_both_sides_and_judged_as_tf32(run_events: list[dict]) -> None:
    cases = _cases(run_events)
    for impl in ("torch", "triton"):
        tf32 = cases[("matmul", impl, "tf32", (512, 512, 512))]
        ieee = cases[("matmul", impl, "fp32", (512, 512, 512))]
        assert tf32.tf32 and not ieee.tf32
        assert tf32.error.precision == "tf32" and ieee.error.precision == "fp32"
        assert ieee.error.rel_l2 < 1e-5  # IEEE really ran: TF32 error would be ~1e-3
    # torch's TF32 matmul really used TF32 (its error is far above IEEE's).
    assert cases[("matmul", "torch", "tf32", (512, 512, 512))].error.rel_l2 > 1e-5


def test_small_vector_add_is_launch_bound_not_slow(run_events: list[dict]) -> None:
    cases = _cases(run_events)
    small = cases[("vector_add", "triton", "fp32", (1024,))]
    assert "launch_bound" in small.flags
    assert small.gpu.calls_per_sample >= 8  # many calls per graph: replay latency amortised
    assert "l2_resident" in small.flags  # tiny cases are not kept cold: said so
    # 12 MiB: kept cold with rotating buffers, the graph holds whole cycles of the sets.
    from envcheck.bench import flags

    l2 = protocol.device_from_event(run_events[0]).l2_bytes
    sets = flags.rotation_sets(12 << 20, l2, memory_bound=True)
    assert sets >= 2
    for impl in ("torch", "triton"):
        medium = cases[("vector_add", impl, "fp32", (1 << 20,))]
        assert "l2_resident" not in medium.flags
        assert medium.gpu.calls_per_sample % sets == 0


def test_ceilings_are_plausible(run_events: list[dict]) -> None:
    ceilings = [protocol.ceiling_from_event(e) for e in run_events if e["event"] == "ceiling"]
    by = {(c.name, c.kind): c for c in ceilings}
    measured = by[("bandwidth", "measured")]
    assert 100 < measured.value < 20000  # GB/s of any GPU this decade
    assert ("bf16", "measured") in by and ("tf32", "measured") in by
    large = _cases(run_events)[("vector_add", "torch", "fp32", (1 << 26,))]
    # A 768 MB add streams from DRAM at roughly the copy's bandwidth.
    assert 0.7 < large.gbps / measured.value < 1.2
    assert large.pct_measured == pytest.approx(100 * large.gbps / measured.value)


def test_graph_timer_agrees_with_do_bench_at_large_sizes() -> None:
    import torch
    import triton.testing

    from envcheck.bench import ops
    from envcheck.bench.timer import Timer, TimerSettings, graph_time

    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = ops.make_inputs("vector_add", (1 << 26,), "fp32", "cuda", gen)
    out = ops.make_output("vector_add", (1 << 26,), "fp32", "cuda")
    fn = ops.torch_impl("vector_add", inputs, out)
    timer = Timer("cuda", TimerSettings(10, 100, 30, 300))
    timer.warmup(fn)
    ours = graph_time(timer, fn).median_us
    theirs = triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median") * 1e3
    assert ours / theirs == pytest.approx(1.0, abs=0.05)


def test_tf32_switch_is_restored_after_a_run() -> None:
    import torch

    from envcheck.bench import worker

    before = torch.backends.cuda.matmul.allow_tf32
    events: list[dict] = []
    plan = {"device": "cuda", "index": 0, "settings": SETTINGS, "gpu": {},
            "cases": [_case("matmul", "torch", "fp32", "tf32", (256, 256, 256))]}
    worker.Worker(plan, events.append).run()
    assert torch.backends.cuda.matmul.allow_tf32 == before
    assert [e["event"] for e in events][-1] == "done"
