"""Planning the benchmark suite from options and probe facts (no torch, no GPU needed)."""

from __future__ import annotations

import argparse
import dataclasses

import factories
import pytest

from envcheck.bench import suite
from envcheck.errors import UsageError
from envcheck.model import Environment, Gpu, known, missing


def opts(**kw) -> argparse.Namespace:
    base = {"quick": False, "ops": None, "sizes": None, "dtypes": None, "device": 0, "no_compile": False}
    base.update(kw)
    return argparse.Namespace(**base)


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
    assert p.device == "cuda" and p.index == 0 and p.runnable
    assert [op for op in suite.OPS if any(c.op == op for c in p.cases)] == list(suite.OPS)
    # Within one (op, dtype, precision, shape), torch comes first: speedups are against it.
    groups: dict[tuple, list[str]] = {}
    for c in p.cases:
        groups.setdefault((c.op, c.dtype, c.precision, c.shape), []).append(c.impl)
    for impls in groups.values():
        assert impls == [i for i in ("torch", "triton", "compile") if i in impls] and impls[0] == "torch"
    assert p.worker_input()["settings"]["cold_l2"] is True
    assert set(p.worker_input()["settings"]) == {"warmup_ms", "rep_ms", "min_samples", "max_samples", "cold_l2", "seed"}


def test_full_plan_always_has_the_seed_sizes():
    p = suite.plan(opts(), gpu_env())
    for op in ("vector_add", "relu"):
        for n in suite.SEED_VECTOR:
            assert (op, "torch", "fp32", "fp32", (n,)) in keys(p)
            assert (op, "triton", "fp32", "fp32", (n,)) in keys(p)
    for n in suite.SEED_MATMUL:
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
    assert p.recorded["compile_sizes"]["vector_add"] == ["1024", "2^20", "2^24", "2^28"]
    assert any("torch.compile measured at a reduced set" in n for n in p.notes)


def test_no_compile_drops_the_third_implementation():
    p = suite.plan(opts(no_compile=True), gpu_env())
    assert p.cases and not any(c.impl == "compile" for c in p.cases)
    assert "torch.compile not measured (--no-compile)" in p.notes


def test_quick_is_much_smaller_and_compiles_vector_ops_only():
    full = suite.plan(opts(), gpu_env())
    quick = suite.plan(opts(quick=True), gpu_env())
    assert len(quick.cases) < len(full.cases) / 3
    assert {c.op for c in quick.cases if c.impl == "compile"} == {"vector_add", "relu"}
    mm = {(c.dtype, c.precision, c.shape[0]) for c in quick.cases if c.op == "matmul"}
    assert mm == {("fp16", "fp16", 512), ("bf16", "bf16", 512), ("fp16", "fp16", 2048), ("bf16", "bf16", 2048),
                  ("fp16", "fp16", 4096), ("bf16", "bf16", 4096), ("fp32", "tf32", 1024), ("fp32", "fp32", 1024)}
    assert quick.settings["rep_ms"] < full.settings["rep_ms"]


def test_cases_that_do_not_fit_in_free_memory_become_skips_with_the_numbers():
    # An 8 GiB card with 6 GiB in use: 2^28 fp32 vectors (3 GiB + reference) no longer fit.
    p = suite.plan(opts(ops=["vector_add"]), gpu_env(memory_total_bytes=known(8 * 2**30),
                                                      memory_used_bytes=known(6 * 2**30)))
    big = [s for s in p.skips if s.shape == (1 << 28,)]
    assert {s.impl for s in big} == {"torch", "triton", "compile"}
    assert all("GiB free on GPU 0" in s.reason and "needs about" in s.reason for s in big)
    assert (1 << 28,) not in {c.shape for c in p.cases}
    assert (1 << 20,) in {c.shape for c in p.cases}
    assert any("not enough memory" in n for n in p.notes)


def test_large_gpu_skips_nothing_for_memory():
    p = suite.plan(opts(), gpu_env())
    assert not p.skips


def test_gpu_facts_for_the_worker_come_from_nvml():
    g = suite.plan(opts(quick=True), gpu_env()).gpu
    assert g["theoretical_bandwidth_gbps"] == pytest.approx(2 * 3201 * 6016 / 8 / 1000, abs=0.05)
    assert g["bandwidth_source"] == "NVML: 2 x 3201 MHz x 6016 bit / 8"
    assert (g["sm_count"], g["compute_capability"], g["name"]) == (132, "9.0", "NVIDIA H200")


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
        ({"ops": ["gemm"]}, "--ops: unknown op 'gemm' (valid: vector_add, relu, matmul, softmax, row_sum)"),
        ({"dtypes": ["fp8"]}, "--dtypes: unknown dtype 'fp8' (valid: fp32, fp16, bf16, tf32)"),
        ({"sizes": ["abc"]}, "--sizes: 'abc' is not a size"),
        ({"ops": ["relu"], "sizes": ["64x64"]}, "--sizes: 64x64 fits none of the selected ops"),
        ({"device": 3}, "--device 3: this machine has 1 CUDA GPU (0)"),
    ],
)
def test_bad_options_are_one_line_usage_errors(kw, message):
    with pytest.raises(UsageError) as e:
        suite.plan(opts(**kw), gpu_env())
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_cpu_machine_plans_torch_only_small_sizes_and_says_why():
    p = suite.plan(opts(), cpu_env())
    assert p.device == "cpu" and p.runnable
    assert {c.impl for c in p.cases} == {"torch"}
    assert {c.op for c in p.cases} == set(suite.OPS)
    assert max(c.shape[0] for c in p.cases if c.op in ("vector_add", "relu")) <= 1 << 22
    assert max(max(c.shape) for c in p.cases if c.op == "matmul") <= 512
    assert {c.precision for c in p.cases if c.op == "matmul"} == {"fp32"}  # no TF32 on a CPU
    note = next(n for n in p.notes if n.startswith("Triton and torch.compile were not measured"))
    assert "no NVIDIA GPU found (NVML: NVML Shared Library Not Found)" in note
    assert "PyTorch is a CPU-only build (2.13.0+cpu)" in note
    assert p.worker_input()["settings"]["cold_l2"] is False and p.gpu == {}


def test_cpu_quick_is_smaller_than_cpu_full():
    assert len(suite.plan(opts(quick=True), cpu_env()).cases) < len(suite.plan(opts(), cpu_env()).cases)


def test_cuda_torch_on_a_gpu_machine_without_working_cuda_explains_the_runtime_error():
    env = with_facts(gpu_env(), "torch_runtime", cuda_available=known(False),
                     error=known("RuntimeError: CUDA driver initialization failed\nmore"))
    p = suite.plan(opts(quick=True), env)
    assert p.device == "cpu"
    assert any("CUDA is not usable from PyTorch: RuntimeError: CUDA driver initialization failed" in n
               for n in p.notes)


def test_missing_torch_plans_no_bench_and_says_how_to_install():
    env = with_facts(cpu_env(), "torch", installed=known(False))
    p = suite.plan(opts(), env)
    assert p.device is None and not p.cases and not p.runnable
    assert len(p.notes) == 1 and "PyTorch is not installed" in p.notes[0] and "pip install torch" in p.notes[0]


def test_broken_triton_turns_triton_and_compile_cases_into_skips():
    env = with_facts(gpu_env(), "triton_runtime", smoke_ok=known(False),
                     error=known("RuntimeError: Failed to find C compiler. Please specify via CC"))
    p = suite.plan(opts(quick=True), env)
    assert {c.impl for c in p.cases} == {"torch"}
    assert {s.impl for s in p.skips} == {"triton", "compile"}
    assert all("Failed to find C compiler" in s.reason for s in p.skips)
    tf32 = [s for s in p.skips if s.op == "matmul" and s.reason.startswith("TF32 arithmetic: ")]
    assert tf32  # Skip has no precision field: the reason carries it


def test_footprint_counts_the_reference():
    assert suite.footprint_bytes("vector_add", "fp32", (1024,)) == 3 * 1024 * 4 + 3 * 1024 * 8
    assert suite.footprint_bytes("matmul", "fp16", (2, 3, 4)) == (2 * 4 + 4 * 3 + 2 * 3) * 10
