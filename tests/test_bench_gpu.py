"""The measurement engine on a real GPU: the worker end to end, its accuracy statistics on every
op and dtype (ragged shapes included), the measured ceilings against the cases, the graph
timer against ``triton.testing.do_bench_cudagraph``.

Skipped without a CUDA GPU, torch and Triton (see conftest.py). The bounds on the statistics
are the documented ones of test_accuracy.py until the analysis layer's tolerance exists.
"""

from __future__ import annotations

import statistics

import pytest

from envcheck.bench import protocol
from envcheck.bench.suite import PlannedCase
from envcheck.harness.failures import Outcome
from envcheck.model import Case, Settings, to_dict
from envcheck.ops import spec
from tests.test_worker import _run_worker

pytestmark = pytest.mark.gpu

SETTINGS = Settings(warmup_ms=10, rep_ms=40, min_samples=10, max_samples=100, cold_l2=True)
# Correct kernels keep max_rel_elem under these (test_accuracy.py says why); TF32 rounds both
# inputs to 10 mantissa bits, ~1e-3 of |a||b| per element.
CORRECT_BOUND = {"fp32": 1e-4, "tf32": 1e-2, "fp16": 1e-2, "bf16": 1e-2}
CEILING_SLACK = 1.03  # timing noise a case may show above the best ceiling run


def _group(op: str, dtype: str, precision: str, shape: tuple[int, ...], compile_too: bool = False) -> list[PlannedCase]:
    impls = ("torch", "triton", "compile") if compile_too else ("torch", "triton")
    return [PlannedCase(op, impl, dtype, precision, shape) for impl in impls]


def planned() -> list[PlannedCase]:
    cases: list[PlannedCase] = []
    for n in (1 << 10, 1 << 20, 1_000_003, 1 << 26):
        cases += _group("vector_add", "fp32", "fp32", (n,), compile_too=n == 1_000_003)
    for dtype in ("fp16", "bf16"):
        cases += _group("vector_add", dtype, dtype, (1_000_003,)) + _group("relu", dtype, dtype, (1_000_003,))
    cases += _group("relu", "fp32", "fp32", (1 << 22,))
    for dtype in ("fp32", "fp16", "bf16"):
        cases += _group("softmax", dtype, dtype, (1000, 4097), compile_too=dtype == "fp32")
        cases += _group("row_sum", dtype, dtype, (1000, 4097))
    cases += _group("softmax", "fp16", "fp16", (4096, 1024))
    for dtype, precision in (("fp16", "fp16"), ("bf16", "bf16"), ("fp32", "tf32"), ("fp32", "fp32")):
        cases += _group("matmul", dtype, precision, (1000, 1001, 999), compile_too=dtype == "fp16")
    for dtype, precision in (("bf16", "bf16"), ("fp32", "tf32")):
        cases += _group("matmul", dtype, precision, (2048, 2048, 2048))
    cases += _group("matmul", "fp32", "fp32", (512, 512, 512))
    return cases


@pytest.fixture(scope="module")
def worker_run() -> tuple[Outcome, list[protocol.Event]]:
    plan = protocol.WorkerPlan("cuda", 0, tuple(planned()), SETTINGS)
    out, events = _run_worker(to_dict(plan), timeout=900)
    assert out.done and out.failure is None, out.stderr_tail[-3000:]
    return out, events


@pytest.fixture(scope="module")
def run_events(worker_run: tuple[Outcome, list[protocol.Event]]) -> list[protocol.Event]:
    return worker_run[1]


def _cases(events: list[protocol.Event]) -> dict[tuple, Case]:
    return {e.case.key: e.case for e in events if isinstance(e, protocol.Measured)}


def test_every_case_is_measured_with_graph_and_launch_times(worker_run, run_events) -> None:
    assert isinstance(run_events[0], protocol.Started)
    device = run_events[0].device
    assert device.uuid and device.uuid.startswith("GPU-") and device.pci_bus_id and device.l2_bytes
    skips = [e.skip for e in run_events if isinstance(e, protocol.Skipped)]
    assert not skips, skips
    cases = _cases(run_events)
    windows = [e for e in run_events if isinstance(e, protocol.WindowSampled)]
    assert len(cases) == len(planned())
    for c in cases.values():
        assert c.failure is None, (c.key, c.failure)
        assert c.gpu is not None and c.gpu.method == "cuda_graph", (c.key, c.notes)
        assert c.launch is not None and c.launch.method == "cuda_events"
        assert c.gpu.n <= SETTINGS.max_samples and c.launch.n <= SETTINGS.max_samples
        assert c.window is not None and c.window < len(windows)
        if c.impl != "torch":
            assert c.compile_s is not None and c.compile_s > 0
        assert "case.output_not_poisoned" not in {n.key for n in c.notes}, c.key
        # Where its time went (issue 39): every phase of a GPU case, and when it ran.
        assert set(c.phases) == {"first_call", "check", "warmup", "graph", "settle", "sampling"}, c.key
        assert c.span_s is not None and c.span_s[0] < c.span_s[1]
    assert windows and all(len(w.window.t_s) >= 2 and w.window.sm_mhz is not None for w in windows)
    # The phases of no one case come back as the worker's result, through the harness (bench/runner.py reads them).
    assert isinstance(worker_run[0].result, dict) and "inputs" in worker_run[0].result, worker_run[0].result


def test_every_correct_kernel_passes_on_every_op_dtype_and_ragged_shape(run_events) -> None:
    """torch, envcheck's Triton kernels and torch.compile, on ragged shapes (tail masking) and
    softmax inputs at +100 (a missing max subtraction would overflow)."""
    for c in _cases(run_events).values():
        acc = c.accuracy
        assert acc is not None and acc.nonfinite == 0, (c.key, acc)
        assert acc.elements == spec(c.op).output_elements(c.shape)
        assert acc.max_rel_elem < CORRECT_BOUND[c.precision], (c.key, acc)
        assert acc.rel_l2 < CORRECT_BOUND[c.precision], (c.key, acc)


def test_tf32_really_ran_where_asked_and_ieee_where_not(run_events) -> None:
    cases = _cases(run_events)
    shape = (1000, 1001, 999)
    for impl in ("torch", "triton"):
        ieee = cases[("matmul", impl, "fp32", "fp32", shape)].accuracy
        tf32 = cases[("matmul", impl, "fp32", "tf32", shape)].accuracy
        assert ieee.max_rel_elem < 1e-5 < tf32.max_rel_elem, (impl, ieee, tf32)


def test_small_vector_add_is_launch_bound_and_mid_sizes_rotate(run_events) -> None:
    cases = _cases(run_events)
    small = cases[("vector_add", "triton", "fp32", "fp32", (1024,))]
    assert small.launch.median_us > 1.5 * small.gpu.median_us  # launch-bound, not a slow kernel
    assert small.gpu.calls_per_sample >= 200  # ~1 ms replays: the replay's own cost amortised
    assert small.rotation_sets == 1  # 12 KiB: left in L2 on purpose
    l2 = run_events[0].device.l2_bytes
    from envcheck.bench.l2 import rotation_sets

    sets = rotation_sets(12 << 20, l2, memory_bound=True)
    for impl in ("torch", "triton"):
        medium = cases[("vector_add", impl, "fp32", "fp32", (1 << 20,))]
        assert medium.rotation_sets == sets >= 2
        assert medium.gpu.calls_per_sample % sets == 0


def _gbps(nbytes: int, timing) -> float:
    return nbytes / (timing.median_us * 1e-6) / 1e9


CEILING_BYTES = {"copy": 2, "read": 1, "fill": 1, "triad": 3}  # buffers moved per element


def test_measured_ceilings_are_ceilings(run_events) -> None:
    """No memory-bound case that streams from DRAM beats the best bandwidth run, no matmul
    case beats the best cuBLAS run of its precision."""
    runs = [e.run for e in run_events if isinstance(e, protocol.CeilingMeasured)]
    kernels = {r.kernel for r in runs}
    assert {"copy", "read", "fill", "triad", "matmul"} <= kernels
    bandwidth = max(_gbps(CEILING_BYTES[r.kernel] * 4 * r.shape[0], r.timing) for r in runs if r.kernel != "matmul")
    assert 100 < bandwidth < 20000
    l2 = run_events[0].device.l2_bytes
    for c in _cases(run_events).values():
        s = spec(c.op)
        if s.compute_bound:
            peak = max(2 * r.shape[0] * r.shape[1] * r.shape[2] / (r.timing.median_us * 1e-6)
                       for r in runs if r.kernel == "matmul" and r.precision == c.precision)
            rate = 2 * c.shape[0] * c.shape[1] * c.shape[2] / (c.gpu.median_us * 1e-6)
            assert rate <= CEILING_SLACK * peak, (c.key, rate / peak)
        elif c.rotation_sets > 1 or s.working_set_bytes(c.shape, c.dtype) > 3 * l2:
            got = _gbps(s.traffic(c.shape, c.dtype).bytes, c.gpu)
            assert got <= CEILING_SLACK * bandwidth, (c.key, got / bandwidth)
    by_precision = {r.precision: r for r in runs if r.kernel == "matmul" and r.shape == (4096, 4096, 4096)}
    assert {"fp16", "bf16", "tf32", "fp32"} <= set(by_precision)


def test_graph_timer_agrees_with_do_bench_cudagraph_within_one_percent() -> None:
    import torch
    import triton.testing

    from envcheck.bench import impls
    from envcheck.bench.graphs import graph_region
    from envcheck.bench.timer import Timer

    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = impls.make_inputs("vector_add", (1 << 24,), "fp32", "cuda", gen)
    out = impls.make_output("vector_add", (1 << 24,), "fp32", "cuda")
    fn = impls.torch_impl("vector_add", inputs, out)
    timer = Timer("cuda", Settings(warmup_ms=50, rep_ms=200, min_samples=30, max_samples=200))
    timer.warmup(fn)
    ours, theirs = [], []
    for _ in range(3):  # alternated, medians of medians: drift falls on both alike
        ours.append(timer.measure(graph_region(timer, fn)).median_us)
        theirs.append(float(triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")) * 1e3)
    assert statistics.median(ours) / statistics.median(theirs) == pytest.approx(1.0, abs=0.01)


def test_tf32_switch_is_restored_after_a_run() -> None:
    import torch

    from envcheck.bench import worker

    before = torch.backends.cuda.matmul.allow_tf32
    events: list = []
    plan = protocol.WorkerPlan("cuda", 0, (PlannedCase("matmul", "torch", "fp32", "tf32", (256, 256, 256)),),
                               SETTINGS)
    phases = worker.Worker(plan, events.append).run()
    assert torch.backends.cuda.matmul.allow_tf32 == before
    assert isinstance(phases, dict)
