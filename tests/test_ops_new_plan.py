"""The first users' workloads (issue 22) as built-in ops: what the registry counts for them, the
tolerance rules they are judged by, how the suite plans them (every kernel path shipped reached,
JAX where installed and a recorded reason where not), and the sizes a user gives them.

The numeric checks of the kernels themselves are test_kernels_new.py's; JAX's, test_ops_new_jax.py's.
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import pytest

from envcheck.analysis.tolerance import UNIT_ROUNDOFF, scales, tolerance
from envcheck.bench import jax_impl, suite
from envcheck.bench import suite as sz
from envcheck.commands.options import RunOptions
from envcheck.errors import UsageError
from envcheck.model import Note
from envcheck.ops import OPS, spec
from tests.test_suite import cpu_env, gpu_env

ROOT = Path(__file__).resolve().parents[1]
NEW_OPS = suite.OP_GROUPS["workloads"]


def opts(**kw) -> RunOptions:
    return RunOptions(**{"ops": ["workloads"], **kw})


# --------------------------------------------------------------------------- the registry's counts


def test_conv2d_counts_its_output_pixels_reduction_and_bytes():
    # 2 images of 3 x 9 x 10, 4 filters of 3 x 5 x 5 at stride 2, padding 2: output 5 x 5.
    s = spec("conv2d")
    shape = (2, 3, 9, 10, 4, 5, 2)
    assert s.conv_output(shape) == (5, 5)
    assert s.output_elements(shape) == 2 * 4 * 5 * 5
    assert s.accumulation(shape) == 3 * 5 * 5
    t = s.traffic(shape, "fp16")
    assert t.flops == 2 * (2 * 4 * 5 * 5) * (3 * 5 * 5)
    assert t.bytes == 2 * (2 * 3 * 9 * 10 + 4 * 3 * 5 * 5 + 2 * 4 * 5 * 5)


def test_linear_fwbw_counts_three_matmuls_and_every_tensor_once():
    s = spec("linear_fwbw")
    m, n, k = 8, 6, 4
    t = s.traffic((m, n, k), "fp32")
    assert t.flops == 3 * 2 * m * n * k
    # read x, W, dy; write y (the forward output autograd keeps), dx and dW
    assert t.bytes == 4 * (m * k + n * k + m * n + m * n + m * k + n * k)
    assert s.output_elements((m, n, k)) == (m + n) * k
    assert s.accumulation((m, n, k)) == max(m, n) and s.compute_bound


def test_softmax_fwbw_and_layer_norm_counts():
    rows, cols = 3, 5
    fwbw = spec("softmax_fwbw").traffic((rows, cols), "bf16")
    assert fwbw.bytes == 2 * 4 * rows * cols  # x, dy read; y, dx written
    ln = spec("layer_norm").traffic((rows, cols), "fp32")
    assert ln.bytes == 4 * (2 * rows * cols + 2 * cols)  # x, weight, bias read; y written


@pytest.mark.parametrize(("op", "outputs", "summed"), [
    ("sum_all", 1, 4 * 512 * 896), ("sum_inner", 4 * 512, 896), ("sum_lead", 896, 4 * 512),
    ("max_all", 1, 1), ("max_inner", 4 * 512, 1), ("max_lead", 896, 1),
])
def test_reductions_of_the_second_users_tensor(op: str, outputs: int, summed: int):
    s = spec(op)
    shape = (4, 512, 896)
    assert s.output_elements(shape) == outputs
    assert s.accumulation(shape) == summed  # a max rounds nothing: its error must be zero
    assert s.traffic(shape, "fp32").bytes == 4 * (4 * 512 * 896 + outputs)


def test_a_conv_shape_with_a_stride_past_its_kernel_is_refused():
    with pytest.raises(ValueError, match="stride"):
        spec("conv2d").check_shape((1, 1, 8, 8, 1, 3, 5))


# --------------------------------------------------------------------------- tolerance rules


def test_softmax_fwbw_bound_counts_the_stored_forward_output():
    # The backward reads y, which the forward stored in fp16: its element scale counts those stored roundings
    # (4 intermediates and the output: 5 u16) beside 12 fp32 roundings and the 1000-long sum.
    plain = scales("softmax", "fp16", "fp16", (8, 1000))
    fwbw = scales("softmax_fwbw", "fp16", "fp16", (8, 1000))
    u16, u32 = UNIT_ROUNDOFF["fp16"], UNIT_ROUNDOFF["fp32"]
    assert fwbw.element == pytest.approx(12 * u32 + 1000 * u32 + 5 * u16)
    assert fwbw.element > plain.element
    assert tolerance("softmax_fwbw", "fp16", "fp16", (8, 1000)).element > tolerance(
        "softmax", "fp16", "fp16", (8, 1000)).element


def test_conv_and_linear_fwbw_are_judged_at_the_precision_asked():
    ieee = tolerance("conv2d", "fp32", "fp32", (1, 64, 8, 8, 8, 3, 1))
    assert ieee.precision == "fp32"
    tf32 = tolerance("linear_fwbw", "fp32", "tf32", (64, 64, 64))
    assert tf32.precision == "tf32" and tf32.element > tolerance("linear_fwbw", "fp32", "fp32", (64, 64, 64)).element


# --------------------------------------------------------------------------- the suite


def _path(op: str, shape: tuple[int, ...]) -> tuple[str, str] | None:
    """(kernel module, path) the Triton implementation of ``op`` takes at ``shape``, for the
    modules that pick a kernel by shape (the others have one kernel, or matmul's race)."""
    if op == "softmax":
        return "softmax", importlib.import_module("envcheck.bench.kernels.softmax").path(shape[1])
    if spec(op).family == "reduce":
        return "reduce", importlib.import_module("envcheck.bench.kernels.reduce").path(spec(op).reduce_over)
    if op in ("layer_norm", "softmax_fwbw"):
        return op, importlib.import_module(f"envcheck.bench.kernels.{op}").path(shape[1])
    if op in ("conv2d", "linear_fwbw"):
        return op, importlib.import_module(f"envcheck.bench.kernels.{op}").path()
    return None


def test_every_kernel_path_shipped_is_reached_by_a_suite_case():
    """The online softmax kernel was never run by the suite (rows up to 32768): every path of
    every kernel module that picks one by shape is now reached by a full-suite Triton case."""
    pytest.importorskip("triton")
    for quick in (False, True):  # issue 37: --quick reaches every path too
        plans = [suite.plan(opts(ops=None, quick=quick), gpu_env()), suite.plan(opts(quick=quick), gpu_env())]
        reached = {_path(c.op, c.shape) for p in plans for c in p.cases if c.impl == "triton"}
        _every_shipped_path_in(reached)


def _every_shipped_path_in(reached: set) -> None:
    from envcheck.bench import kernels

    modules = {kernels.MODULES.get(op, op) for op in kernels.OPS}
    shipped = set()
    for name in modules:
        module = importlib.import_module(f"envcheck.bench.kernels.{name}")
        shipped |= {(name, p) for p in getattr(module, "PATHS", ())}
    assert {"softmax", "reduce", "layer_norm", "softmax_fwbw", "conv2d", "linear_fwbw"} <= {m for m, _ in shipped}
    assert ("softmax", "online") in shipped
    assert shipped <= reached, f"never reached by the suite: {sorted(shipped - reached)}"


def test_the_workloads_plan_every_new_op_with_four_implementations():
    p = suite.plan(opts(), gpu_env())
    assert {c.op for c in p.cases} == set(NEW_OPS)
    for op in NEW_OPS:
        impls = {c.impl for c in p.cases if c.op == op}
        assert impls == {"torch", "triton", "compile", "jax"}, op
        compiled = {c.shape for c in p.cases if c.op == op and c.impl == "compile"}
        assert {c.shape for c in p.cases if c.op == op and c.impl == "jax"} == compiled
        dtypes = {c.dtype for c in p.cases if c.op == op}
        assert dtypes == {"fp32", "fp16", "bf16"}, op
    assert not any(n.key.startswith("bench.jax") for n in p.notes)


def test_the_first_users_shapes_are_in_the_suite():
    p = suite.plan(opts(), gpu_env())
    conv = [c.shape for c in p.cases if c.op == "conv2d"]
    assert {s[5] for s in conv} == {3, 4, 5, 7} and {s[6] for s in conv} == {1, 2}  # 4: the ragged even kernel
    assert min(s[2] for s in conv) == 32 and max(s[2] for s in conv) == 128
    for op in ("sum_lead", "max_lead", "sum_all", "sum_inner"):
        assert any(c.shape == (4, 512, 896) for c in p.cases if c.op == op)
    assert {c.precision for c in p.cases if c.op == "linear_fwbw" and c.dtype == "fp32"} == {"tf32", "fp32"}
    assert {c.precision for c in p.cases if c.op == "conv2d" and c.dtype == "fp32"} == {"fp32"}


def test_row_ops_stay_within_their_single_tile_kernels():
    layer_norm = importlib.import_module("envcheck.bench.kernels.layer_norm")  # the modules, not the functions
    softmax_fwbw = importlib.import_module("envcheck.bench.kernels.softmax_fwbw")
    for quick in (False, True):
        p = suite.plan(opts(quick=quick), gpu_env())
        assert max(c.shape[1] for c in p.cases if c.op == "layer_norm") <= layer_norm.MAX_COLS
        assert max(c.shape[1] for c in p.cases if c.op == "softmax_fwbw") <= softmax_fwbw.MAX_COLS


def test_quick_workloads_are_small_and_cpu_runs_torch_only():
    quick = suite.plan(opts(quick=True), gpu_env())
    assert {c.op for c in quick.cases} == set(NEW_OPS)
    assert {c.impl for c in quick.cases} == {"torch", "triton"}  # no compile sizes in the quick suite
    # two implementations, at most three shapes, every precision (issue 37)
    assert len(quick.cases) <= 2 * 3 * 4 * len(NEW_OPS)
    cpu = suite.plan(opts(), cpu_env())
    assert {c.impl for c in cpu.cases} == {"torch"} and {c.op for c in cpu.cases} == set(NEW_OPS)


def test_jax_not_installed_is_a_recorded_reason_and_no_case(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(jax_impl, "installed", lambda: False)
    p = suite.plan(opts(), gpu_env())
    assert Note("bench.jax_missing") in p.notes
    assert not any(c.impl == "jax" for c in p.cases)
    off = suite.plan(opts(no_jax=True), gpu_env())
    assert Note("bench.jax_off") in off.notes and not any(c.impl == "jax" for c in off.cases)


def test_jax_stays_off_over_several_gpus_with_its_reason():
    """--gpus and fleet (a worker per GPU, each planned for its ``gpu``): no JAX cases."""
    many = suite.plan(opts(), gpu_env(), gpu=0)
    assert Note("bench.jax_multi_gpu") in many.notes and not any(c.impl == "jax" for c in many.cases)
    p = suite.plan(opts(quick=True, ops=["layer_norm"]), gpu_env(), gpu=0)
    assert Note("bench.jax_multi_gpu") in p.notes and {c.impl for c in p.cases} == {"torch", "triton"}


def test_jax_is_planned_beside_torch_without_triton(monkeypatch: pytest.MonkeyPatch):
    """A broken Triton skips Triton and torch.compile (whose GPU code is Triton), not JAX."""
    from envcheck.model import known
    from tests.test_suite import with_facts

    env = with_facts(gpu_env(), "triton", installed=known(False))
    p = suite.plan(opts(ops=["layer_norm"]), env)
    assert {c.impl for c in p.cases} == {"torch", "jax"}
    assert {s.impl for s in p.skips} == {"triton", "compile"}


def test_the_default_suite_is_unchanged_by_the_new_ops():
    p = suite.plan(opts(ops=None), gpu_env())
    assert {c.op for c in p.cases} == set(suite.DEFAULT_OPS)
    assert {c.impl for c in p.cases} == {"torch", "triton", "compile"}  # JAX for named ops only
    assert Note("bench.jax_named_ops") in p.notes
    named = suite.plan(opts(ops=["matmul"]), gpu_env())
    assert "jax" in {c.impl for c in named.cases}
    assert sum(1 for c in p.cases if c.op == "softmax" and c.shape == (256, 65536)) == 6  # the online path


# --------------------------------------------------------------------------- sizes from the command line


def test_conv_sizes_parse_as_seven_numbers_and_bad_ones_are_usage_errors():
    assert sz.parse_size("32x64x32x32x64x3x1") == (32, 64, 32, 32, 64, 3, 1)
    p = suite.plan(opts(ops=["conv2d"], sizes=["2x8x33x31x8x5x2"]), gpu_env())
    assert {c.shape for c in p.cases} == {(2, 8, 33, 31, 8, 5, 2)}
    with pytest.raises(UsageError, match="fits none of the selected ops"):
        suite.plan(opts(ops=["conv2d"], sizes=["1x1x8x8x1x3x5"]), gpu_env())  # stride past the kernel
    with pytest.raises(UsageError, match="is not a size"):
        sz.parse_size("1x2x3x4x5")


def test_a_three_number_size_feeds_reductions_when_named():
    p = suite.plan(opts(ops=["sum_lead", "max_inner"], sizes=["4x512x896"]), gpu_env())
    assert {(c.op, c.shape) for c in p.cases} == {("sum_lead", (4, 512, 896)), ("max_inner", (4, 512, 896))}
    default = suite.plan(opts(ops=None, sizes=["4x512x896"]), gpu_env())
    assert {c.op for c in default.cases} == {"matmul"}  # without --ops: the default suite's ops only


def test_unknown_op_names_the_new_ops_and_the_group():
    with pytest.raises(UsageError, match="linear_fwbw, default, workloads"):
        suite.plan(opts(ops=["conv3d"]), gpu_env())


# --------------------------------------------------------------------------- the catalogues


def test_new_message_keys_have_english_and_chinese_text():
    from envcheck.render.i18n import catalog

    en, zh = catalog("en"), catalog("zh-CN")
    for key in ("bench.jax_missing", "bench.jax_off", "bench.jax_multi_gpu", "bench.jax_named_ops", "case.jax_host_timed",
                "skip.jax_no_gpu"):
        assert en[key] and zh[key] and en[key] != zh[key]
        assert any("\u4e00" <= ch <= "\u9fff" for ch in zh[key])


def test_every_op_in_the_registry_can_size_its_memory():
    for s in OPS.values():
        shape = {"vector": (1000,), "rows": (7, 300), "matmul": (9, 7, 11), "reduce": (3, 5, 7),
                 "conv": (2, 3, 9, 10, 4, 3, 2)}[s.family]
        need = s.memory_needed_bytes(shape, "fp32")
        assert need >= s.working_set_bytes(shape, "fp32") > 0 and math.isfinite(need)


def test_verify_ops_picks_each_new_ops_largest_measured_case():
    """tools/evidence/verify_ops.py's headline: per new op, the measured torch case moving the most."""
    import importlib.util

    from envcheck.model import Case, Failure, Timing

    loaded = importlib.util.spec_from_file_location("verify_ops", ROOT / "tools" / "evidence" / "verify_ops.py")
    verify_ops = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(verify_ops)
    t = Timing.from_samples("cuda_graph", [10.0, 11.0])

    def case(op, shape, impl="torch", **kw):
        return Case(op, impl, "fp16", "fp16", shape, **({"gpu": t} | kw))

    cases = [case("sum_lead", (4, 512, 896)), case("sum_lead", (64, 4096, 4096)),
             case("sum_lead", (128, 4096, 4096), gpu=None, failure=Failure("run", "x")),  # failed: not a headline
             case("linear_fwbw", (4, 512, 896)), case("linear_fwbw", (4096, 4096, 4096)),
             case("linear_fwbw", (8192, 8192, 8192), impl="triton"),  # torch picks the headline
             case("matmul", (8192, 8192, 8192))]  # not a new op
    heads = verify_ops.headline(cases)
    assert set(heads) == {"sum_lead", "linear_fwbw"}
    assert heads["sum_lead"].shape == (64, 4096, 4096) and heads["linear_fwbw"].shape == (4096, 4096, 4096)


def test_the_precision_switch_covers_cudnn_convolutions_too():
    """cuDNN runs fp32 convolutions in TF32 by default: an IEEE fp32 conv2d case turns it off
    (and a TF32 one on) for every side, and the switch is restored after."""
    torch = pytest.importorskip("torch")
    from envcheck.bench.impls import tf32_matmul

    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True
        with tf32_matmul("fp32"):
            assert torch.backends.cudnn.allow_tf32 is False and torch.backends.cuda.matmul.allow_tf32 is False
        assert torch.backends.cudnn.allow_tf32 is True
        torch.backends.cudnn.allow_tf32 = False
        with tf32_matmul("tf32"):
            assert torch.backends.cudnn.allow_tf32 is True
        with tf32_matmul("fp16"):
            assert torch.backends.cudnn.allow_tf32 is False  # half precisions leave it as it is
        assert torch.backends.cudnn.allow_tf32 is False
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


# --------------------------------------------------------------------------- issue 37: paths, precisions, ragged shapes


def test_quick_reaches_every_precision_of_every_op():
    for ops in (None, ["workloads"]):
        p = suite.plan(opts(ops=ops, quick=True), gpu_env())
        for op in {c.op for c in p.cases}:
            want = {"fp32", "tf32", "fp16", "bf16"} if spec(op).family == "matmul" else {"fp32", "fp16", "bf16"}
            assert {c.precision for c in p.cases if c.op == op and c.impl == "triton"} == want, op


def test_ragged_shapes_reach_the_tails_in_the_default_and_quick_suites():
    for quick in (False, True):
        p = suite.plan(opts(quick=quick), gpu_env())
        conv = {c.shape for c in p.cases if c.op == "conv2d"}
        assert any(s[5] % 2 == 0 and s[6] == 2 and s[3] % 2 and (s[1] * s[5] ** 2) % 32 for s in conv), conv
        red = {c.shape for c in p.cases if c.op == "sum_lead"}
        assert any((s[0] * s[1]) % 32 and (s[0] * s[1] * s[2]) % 4096 for s in red), red


def test_interpret_plans_triton_beside_torch_at_small_shapes_on_a_cpu():
    p = suite.plan(opts(ops=["workloads", "softmax", "matmul"], interpret=True), cpu_env())
    assert p.backend == "cpu" and p.settings.interpret
    assert {c.impl for c in p.cases} == {"torch", "triton"}
    assert {c.dtype for c in p.cases} == {"fp32", "fp16", "bf16"} and {c.precision for c in p.cases} == {
        "fp32", "fp16", "bf16"}
    assert max(spec(c.op).input_elements(c.shape) for c in p.cases) <= 80_000
    assert ("softmax", "online") in {_path(c.op, c.shape) for c in p.cases}
    with pytest.raises(UsageError, match="--interpret"):
        suite.plan(opts(interpret=True), gpu_env())
