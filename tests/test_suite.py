"""Planning the benchmark suite from options and probe facts (no torch, no GPU needed)."""

from __future__ import annotations

import dataclasses

import factories
import pytest

from envcheck.bench import suite
from envcheck.commands.options import RunOptions
from envcheck.errors import UsageError
from envcheck.model import Environment, Gpu, Note, known, missing
from envcheck.ops import OP_NAMES


def opts(**kw) -> RunOptions:
    # JAX's planning is tested in test_ops_new_plan.py; here it is off, so the cases stay the three.
    return RunOptions(**{"no_jax": True, **kw})


def with_facts(env: Environment, section: str, **facts) -> Environment:
    sections = {k: dict(v) for k, v in env.sections.items()}
    sections.setdefault(section, {}).update(facts)
    return dataclasses.replace(env, sections=sections)


def gpu_env(**gpu_facts) -> Environment:
    env = factories.environment()
    if gpu_facts:
        g = env.gpus[0]
        env = dataclasses.replace(env, gpus=(Gpu(g.index, {**g.facts, **gpu_facts}),))
    return env


def cpu_env() -> Environment:
    """What the probes report on a machine without NVIDIA driver, with a CPU-only torch build."""
    env = dataclasses.replace(factories.environment(), gpus=())
    env = with_facts(env, "driver", nvml_error=known("NVML Shared Library Not Found"),
                     gpu_count=missing("NVML unavailable: NVML Shared Library Not Found"))
    env = with_facts(env, "torch", installed=known(True), version=known("2.13.0+cpu"), build=known("cpu"),
                     cuda_version=missing("CPU-only build"))
    env = with_facts(env, "torch_runtime", import_ok=known(True), cuda_available=known(False), device_count=known(0),
                     devices=known([]), smoke_ok=missing("no CUDA device"), error=missing("no error"))
    return with_facts(env, "system", ram_available_bytes=known(24 * 2**30))


def keys(plan: suite.Plan) -> set[tuple]:
    return {c.key for c in plan.cases}


def test_full_gpu_plan_covers_every_op_with_torch_first_then_triton_then_compile():
    p = suite.plan(opts(), gpu_env())
    assert p.backend == "cuda" and p.index == 0 and p.runnable
    assert [op for op in OP_NAMES if any(c.op == op for c in p.cases)] == list(suite.DEFAULT_OPS)
    # Within one (op, dtype, precision, shape), torch comes first: speedups are against it.
    groups: dict[tuple, list[str]] = {}
    for c in p.cases:
        groups.setdefault((c.op, c.dtype, c.precision, c.shape), []).append(c.impl)
    for impls in groups.values():
        assert impls == [i for i in ("torch", "triton", "compile") if i in impls] and impls[0] == "torch"
    # Each group's cases are consecutive: the worker samples them together.
    seen: list[tuple] = []
    for c in p.cases:
        if not seen or seen[-1] != c.group:
            assert c.group not in seen
            seen.append(c.group)
    assert p.settings.cold_l2 and not p.settings.quick and p.settings.threads is None
    assert p.settings.impls == ("torch", "triton", "compile") and p.settings.ops == suite.DEFAULT_OPS
    assert p.settings.max_samples <= 150  # every raw sample kept, the report under 1 MB


def test_every_suite_has_ragged_shapes():
    """Sizes no block size divides, so tail masking is measured and checked."""
    for quick in (False, True):
        shapes = {c.shape for c in suite.plan(opts(quick=quick), gpu_env()).cases}
        assert {(1_000_003,), (1000, 4097), (1000, 1001, 999)} <= shapes
        cpu = {c.shape for c in suite.plan(opts(quick=quick), cpu_env()).cases}
        assert {(100_003,), (257, 1025), (255, 257, 253)} <= cpu
    full = suite.plan(opts(), gpu_env())
    assert {(c.dtype, c.impl) for c in full.cases if c.shape == (1000, 1001, 999)} >= {
        ("fp16", "triton"), ("bf16", "triton"), ("fp32", "triton"), ("fp16", "compile")}


def test_full_plan_always_has_the_seed_sizes():
    p = suite.plan(opts(), gpu_env())
    for op in ("vector_add", "relu"):
        for n in (1024, 10240, 102400):
            assert (op, "torch", "fp32", "fp32", (n,)) in keys(p)
            assert (op, "triton", "fp32", "fp32", (n,)) in keys(p)
    for n in (512, 1024, 2048):
        for dtype, prec in (("fp16", "fp16"), ("bf16", "bf16"), ("fp32", "tf32"), ("fp32", "fp32")):
            assert ("matmul", "triton", dtype, prec, (n, n, n)) in keys(p)


def test_ieee_fp32_matmul_is_bounded_but_tf32_is_not():
    p = suite.plan(opts(ops=["matmul"]), gpu_env())
    ieee = [c.shape for c in p.cases if c.precision == "fp32"]
    tf32 = [c.shape for c in p.cases if c.precision == "tf32"]
    assert ieee and max(max(s) for s in ieee) <= suite.IEEE_MATMUL_MAX_DIM
    assert (8192, 8192, 8192) in tf32 and (4096, 11008, 4096) in tf32


def test_compile_runs_on_a_reduced_recorded_set_of_sizes():
    p = suite.plan(opts(), gpu_env())
    compiled = {c.shape for c in p.cases if c.impl == "compile" and c.op == "vector_add"}
    triton = {c.shape for c in p.cases if c.impl == "triton" and c.op == "vector_add"}
    assert compiled and compiled < triton
    assert Note("bench.compile_sizes", {"op": "vector_add", "shapes": ("1024", "1000003", "1048576", "16777216",
                                                                      "268435456")}) in p.notes


def test_no_compile_drops_the_third_implementation():
    p = suite.plan(opts(no_compile=True), gpu_env())
    assert p.cases and not any(c.impl == "compile" for c in p.cases)
    assert Note("bench.compile_off") in p.notes and p.settings.impls == ("torch", "triton")


def test_quick_is_much_smaller_and_compiles_vector_ops_only():
    full = suite.plan(opts(), gpu_env())
    quick = suite.plan(opts(quick=True), gpu_env())
    assert len(quick.cases) < len(full.cases) / 2  # every precision and path, at fewer sizes (issue 37)
    assert {c.op for c in quick.cases if c.impl == "compile"} == {"vector_add", "relu"}
    mm = {(c.dtype, c.precision, c.shape[0]) for c in quick.cases if c.op == "matmul"}
    assert mm == {(d, d, n) for d in ("fp16", "bf16") for n in (512, 1000, 2048, 4096)} | {
        ("fp32", "tf32", 1024), ("fp32", "fp32", 1024),
        ("fp32", "tf32", 1000), ("fp32", "fp32", 1000)}  # the ragged 1000x1001x999 reaches every tile's tail
    assert quick.settings.rep_ms < full.settings.rep_ms and quick.settings.quick


def test_quick_with_sizes_runs_those_sizes_at_quick_settings():
    p = suite.plan(opts(quick=True, sizes=["1M"]), gpu_env())
    assert {c.shape for c in p.cases} == {(1 << 20,)}
    assert p.settings.quick and p.settings.rep_ms == suite.GPU_QUICK_SETTINGS.rep_ms


def test_cases_that_do_not_fit_in_free_memory_become_skips_with_the_numbers():
    # An 8 GiB card with 6 GiB in use: 2^28 fp32 vectors (3 GiB + reference) no longer fit.
    p = suite.plan(opts(ops=["vector_add"]), gpu_env(memory_total_bytes=known(8 * 2**30),
                                                      memory_used_bytes=known(6 * 2**30)))
    big = [s for s in p.skips if s.shape == (1 << 28,) and s.dtype == "fp32"]
    assert {s.impl for s in big} == {"torch", "triton", "compile"}
    need = (3 + 1) * 2**30 + 8 * 4 * 2**24  # inputs and output, a second output, float64 chunks
    assert all(s.reason == Note("skip.memory", {"need_bytes": need, "free_bytes": 2 * 2**30, "memory": "gpu",
                                                "gpu_index": 0}) for s in big)
    assert all(s.precision == "fp32" for s in big)
    assert (1 << 28,) not in {c.shape for c in p.cases}
    assert (1 << 20,) in {c.shape for c in p.cases}


def test_large_gpu_skips_nothing_for_memory():
    p = suite.plan(opts(), gpu_env())
    assert not p.skips


def test_the_probed_device_names_the_gpu_until_the_worker_does():
    d = suite.plan(opts(quick=True), gpu_env(pci_bus_id=known("00000000:19:00.0"))).device
    assert (d.backend, d.name, d.index, d.sm_count, d.compute_capability) == ("cuda", "NVIDIA H200", 0, 132, "9.0")
    assert d.uuid == "GPU-8d0ff531-a2cd-2527-7669-e66277d6bc28" and d.pci_bus_id == "00000000:19:00.0"
    assert suite.plan(opts(), cpu_env()).device.backend == "cpu"


def test_filters_restrict_ops_and_dtypes():
    p = suite.plan(opts(ops=["relu", "matmul"], dtypes=["bf16"]), gpu_env())
    assert {c.op for c in p.cases} == {"relu", "matmul"}
    assert {c.dtype for c in p.cases} == {"bf16"}
    # An explicit dtype covers the op's whole default size range.
    assert (1024,) in {c.shape for c in p.cases if c.op == "relu"}


def test_tf32_dtype_selects_only_tf32_matmuls():
    p = suite.plan(opts(ops=["matmul", "relu"], dtypes=["tf32"]), gpu_env())
    assert p.cases and {(c.op, c.dtype, c.precision) for c in p.cases} == {("matmul", "fp32", "tf32")}


def test_sizes_choose_the_ops_they_fit_when_ops_not_given():
    p = suite.plan(opts(sizes=["1M", "4096x4096"]), gpu_env())
    by_op = {}
    for c in p.cases:
        by_op.setdefault(c.op, set()).add(c.shape)
    assert by_op == {"vector_add": {(1 << 20,)}, "relu": {(1 << 20,)}, "softmax": {(4096, 4096)},
                     "row_sum": {(4096, 4096)}}


def test_one_number_means_a_square_matmul_when_matmul_is_named():
    p = suite.plan(opts(ops=["matmul"], sizes=["2048", "4096x11008x4096"], dtypes=["fp16"]), gpu_env())
    assert {c.shape for c in p.cases} == {(2048, 2048, 2048), (4096, 11008, 4096)}
    # User-chosen sizes are compiled too (they asked for exactly these).
    assert {c.impl for c in p.cases} == {"torch", "triton", "compile"}


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"ops": ["gemm"]}, "--ops: unknown op 'gemm' (valid: vector_add, relu, matmul, softmax, row_sum, conv2d"),
        ({"dtypes": ["fp8"]}, "--dtypes: unknown dtype 'fp8' (valid: fp32, fp16, bf16, tf32)"),
        ({"sizes": ["abc"]}, "--sizes: 'abc' is not a size"),
        ({"ops": ["relu"], "sizes": ["64x64"]}, "--sizes: 64x64 fits none of the selected ops"),
        ({"device": 3}, "--device 3: this machine has 1 CUDA GPU (0)"),
        ({"device": -1}, "--device -1: this machine has 1 CUDA GPU (0)"),
    ],
)
def test_bad_options_are_one_line_usage_errors(kw, message):
    with pytest.raises(UsageError) as e:
        suite.plan(opts(**kw), gpu_env())
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.mark.parametrize("env", ["cpu", "no_torch", "cuda_broken"])
def test_a_device_the_machine_lacks_is_an_error_whatever_runs(env):
    """Once silently ignored: on the CPU fallback and without torch the plan ran on device 0."""
    machine = {"cpu": cpu_env(), "no_torch": with_facts(cpu_env(), "torch", installed=known(False)),
               "cuda_broken": with_facts(gpu_env(), "torch_runtime", cuda_available=known(False),
                                         device_count=known(0))}[env]
    with pytest.raises(UsageError, match=r"^--device 7: this machine has"):
        suite.plan(opts(device=7), machine)
    suite.plan(opts(device=0), machine)  # the default is always fine


def test_torch_sees_fewer_gpus_than_nvml_and_device_follows_torch():
    """CUDA_VISIBLE_DEVICES: NVML lists every GPU, torch (and the worker) only the visible ones."""
    env = with_facts(gpu_env(), "torch_runtime", device_count=known(1))
    env = dataclasses.replace(env, gpus=env.gpus + (Gpu(1, dict(env.gpus[0].facts)),))
    with pytest.raises(UsageError, match="has 1 CUDA GPU"):
        suite.plan(opts(device=1), env)


def test_cpu_machine_plans_torch_only_small_sizes_and_says_why():
    p = suite.plan(opts(), cpu_env())
    assert p.backend == "cpu" and p.runnable
    assert {c.impl for c in p.cases} == {"torch"}
    assert {c.op for c in p.cases} == set(suite.DEFAULT_OPS)
    assert max(c.shape[0] for c in p.cases if c.op in ("vector_add", "relu")) <= 1 << 22
    assert max(max(c.shape) for c in p.cases if c.op == "matmul") <= 512
    assert {c.precision for c in p.cases if c.op == "matmul"} == {"fp32"}  # no TF32 on a CPU
    assert p.notes[:3] == (Note("bench.cpu_baseline"),
                           Note("bench.no_cuda.nvml_error", {"detail": "NVML Shared Library Not Found"}),
                           Note("bench.no_cuda.cpu_build", {"torch_version": "2.13.0+cpu"}))
    assert not p.settings.cold_l2 and p.settings.threads is not None and p.settings.threads >= 1


def test_cpu_threads_are_the_physical_cores_less_one_on_small_machines():
    from envcheck.bench.suite import cpu_threads

    assert cpu_threads(lambda: 2, lambda: 4) == 1  # a 2-core VM: one for torch, one for the harness
    assert cpu_threads(lambda: 4, lambda: 8) == 3
    assert cpu_threads(lambda: 32, lambda: 64) == 32  # hyper-threads not counted
    assert cpu_threads(lambda: None, lambda: 2) == 1  # psutil cannot tell the physical cores
    assert cpu_threads(lambda: None, lambda: None) == 1


def test_cpu_quick_is_smaller_than_cpu_full():
    assert len(suite.plan(opts(quick=True), cpu_env()).cases) < len(suite.plan(opts(), cpu_env()).cases)


def test_cuda_torch_on_a_gpu_machine_without_working_cuda_explains_the_runtime_error():
    env = with_facts(gpu_env(), "torch_runtime", cuda_available=known(False),
                     error=known("RuntimeError: CUDA driver initialization failed\nmore"))
    p = suite.plan(opts(quick=True), env)
    assert p.backend == "cpu"
    assert Note("bench.no_cuda.runtime_error", {"detail": "RuntimeError: CUDA driver initialization failed"}) in p.notes


def test_missing_torch_plans_no_bench_and_says_so():
    env = with_facts(cpu_env(), "torch", installed=known(False))
    p = suite.plan(opts(), env)
    assert p.backend is None and not p.cases and not p.runnable
    assert p.notes == (Note("bench.no_torch"),)


def test_broken_triton_turns_triton_and_compile_cases_into_skips():
    env = with_facts(gpu_env(), "triton_runtime", smoke_ok=known(False),
                     error=known("RuntimeError: Failed to find C compiler. Please specify via CC"))
    p = suite.plan(opts(quick=True), env)
    assert {c.impl for c in p.cases} == {"torch"}
    assert {s.impl for s in p.skips} == {"triton", "compile"}
    reason = Note("bench.triton_unusable.smoke_failed",
                  {"detail": "RuntimeError: Failed to find C compiler. Please specify via CC"})
    assert all(s.reason == reason for s in p.skips) and reason in p.notes
    assert {s.precision for s in p.skips if s.op == "matmul"} == {"tf32", "fp32", "fp16", "bf16"}


def test_a_full_suite_report_keeps_every_raw_sample_under_a_megabyte():
    """~260 cases x 2 timings x at most 150 float32 samples (~5.3 bytes each in base64), the
    NVML windows of every group (30 samples of 50 ms, throttled throughout) and the ceiling
    runs, every timing at its cap: the JSON stays under 1 MB."""
    import random

    from envcheck import model
    from envcheck.model import Accuracy, Bench, Case, CeilingRun, MonitorWindow, Report, Timing

    p = suite.plan(opts(), gpu_env())
    assert 200 <= len(p.cases) <= 260
    rng = random.Random(0)
    cap = p.settings.max_samples

    def timing(method: str) -> Timing:
        return Timing.from_samples(method, [rng.uniform(1, 2000) for _ in range(cap)], 7)

    groups = list(dict.fromkeys(c.group for c in p.cases))
    windows = tuple(MonitorWindow(0.05, [0.05 * i for i in range(30)], *([[rng.uniform(300, 2000) for _ in range(30)]]
                                                                        * 4), reasons=(("sw_power_cap",),) * 30)
                    for _ in groups)
    cases = tuple(Case(c.op, c.impl, c.dtype, c.precision, c.shape, gpu=timing("cuda_graph"),
                       launch=timing("cuda_events"), compile_s=1.25, window=groups.index(c.group), rotation_sets=15,
                       accuracy=Accuracy(rng.random() * 1e-3, rng.random(), rng.random() * 1e-3, 0, 1 << 20),
                       kernel="tma_persistent 128x256x64 s4 w8" if c.impl == "triton" else None)
                  for c in p.cases)
    runs = tuple(CeilingRun("matmul", "bf16", (8192, 8192, 8192), timing("cuda_graph"), "bf16") for _ in range(16))
    bench = Bench(p.device, p.settings, cases, p.skips, runs, windows, p.notes)
    text = model.dumps(Report("0.2.0", "2026-11-22T22:00:00Z", "h", "run", factories.environment(), benches=(bench,)))
    assert len(text.encode()) < 1_000_000
