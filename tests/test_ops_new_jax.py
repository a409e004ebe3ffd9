"""JAX as another implementation, on jax's CPU build: every op judged the way the others are,
the forward + backward ops keeping their forward pass, and the real worker measuring the new
ops with PyTorch and JAX side by side (compile time recorded, accuracy judged)."""

from __future__ import annotations

import pytest

from envcheck.analysis.tolerance import judge, tolerance
from envcheck.bench import protocol
from envcheck.bench.suite import PlannedCase
from envcheck.model import Note
from envcheck.ops import OPS
from tests.test_worker import FAST, _plan, _run_worker

pytest.importorskip("jax")
torch = pytest.importorskip("torch")

SMALL = {"vector": (1000,), "rows": (7, 300), "matmul": (33, 20, 50), "reduce": (3, 5, 7),
         "conv": (2, 3, 9, 10, 4, 5, 2)}


def _shape(op: str) -> tuple[int, ...]:
    return SMALL[OPS[op].family]


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("op", list(OPS))
def test_jax_output_is_judged_like_the_others_and_passes(op: str, dtype: str) -> None:
    from envcheck.bench import accuracy, impls, jax_impl

    shape = _shape(op)
    gen = torch.Generator().manual_seed(7)
    inputs = impls.make_inputs(op, shape, dtype, "cpu", gen)
    out = impls.make_output(op, shape, dtype, "cpu")
    (call,) = jax_impl.on_sets(op, [(inputs, out)], dtype, shape)
    result, _ = accuracy.checked_call(call, out)
    assert tuple(result.shape) == tuple(out.shape) and result.dtype == out.dtype
    acc = accuracy.compare(result, accuracy.reference_chunks(op, inputs, shape=shape), dtype)
    verdict = judge(acc, tolerance(op, dtype, dtype, shape))
    assert verdict.passed, (verdict.broken, verdict.ratio)


def test_a_wrong_jax_output_fails_the_same_judge() -> None:
    """The judge is the same for JAX: a gradient off by a factor of two fails."""
    from envcheck.bench import accuracy, impls, jax_impl

    shape = (7, 300)
    inputs = impls.make_inputs("softmax_fwbw", shape, "fp32", "cpu", torch.Generator().manual_seed(3))
    out = impls.make_output("softmax_fwbw", shape, "fp32", "cpu")
    (call,) = jax_impl.on_sets("softmax_fwbw", [(inputs, out)], "fp32", shape)
    doubled = call() * 2
    acc = accuracy.compare(doubled, accuracy.reference_chunks("softmax_fwbw", inputs), "fp32")
    assert not judge(acc, tolerance("softmax_fwbw", "fp32", "fp32", shape)).passed


@pytest.mark.parametrize("op", ["softmax_fwbw", "linear_fwbw"])
def test_forward_backward_keeps_the_forward_output(op: str) -> None:
    """XLA drops what nothing uses: the function returns y beside the gradient, as autograd keeps it."""
    import jax

    from envcheck.bench import impls, jax_impl

    shape = _shape(op)
    inputs = impls.make_inputs(op, shape, "fp32", "cpu", torch.Generator().manual_seed(1))
    y, grad = jax.jit(jax_impl.function(op, shape, "fp32"))(*[t.numpy() for t in inputs.values()])
    if op == "softmax_fwbw":
        expect = torch.softmax(inputs["x"].double(), dim=-1)
    else:
        expect = inputs["x"].double() @ inputs["w"].double().t()
    assert torch.allclose(torch.from_dlpack(y).double(), expect, rtol=1e-5, atol=1e-6)
    assert tuple(grad.shape) == tuple(impls.make_output(op, shape, "fp32", "cpu").shape)


def test_one_jit_serves_every_set_of_a_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rotating sets share one compiled function: tracing happens once, not once per set."""
    from envcheck.bench import impls, jax_impl

    traced = []
    real = jax_impl.function

    def counting(op, shape, precision):
        fn = real(op, shape, precision)

        def wrapped(*args):
            traced.append(op)
            return fn(*args)

        return wrapped

    monkeypatch.setattr(jax_impl, "function", counting)
    gen = torch.Generator().manual_seed(0)
    sets = [(impls.make_inputs("layer_norm", (7, 300), "fp32", "cpu", gen),
             impls.make_output("layer_norm", (7, 300), "fp32", "cpu")) for _ in range(3)]
    calls = jax_impl.on_sets("layer_norm", sets, "fp32", (7, 300))
    results = [c() for c in calls]
    assert len(traced) == 1
    assert not torch.equal(results[0], results[1])  # each call reads its own set


def test_the_worker_measures_the_new_ops_with_torch_and_jax_on_the_cpu() -> None:
    cases = [PlannedCase(op, impl, "fp32", "fp32", _shape(op))
             for op in ("conv2d", "layer_norm", "sum_lead", "max_all", "softmax_fwbw", "linear_fwbw")
             for impl in ("torch", "jax")]
    proc = _run_worker(protocol.encode_plan(_plan(cases, settings=FAST)), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [protocol.decode(line) for line in proc.stdout.splitlines()]
    got = [e.case for e in events if isinstance(e, protocol.Measured)]
    assert [c.key for c in got] == [c.key for c in cases]
    for c in got:
        assert c.failure is None, (c.key, c.failure)
        assert c.launch is not None and c.launch.method == "host_clock"
        assert judge(c.accuracy, tolerance(c.op, c.dtype, c.precision, c.shape)).passed, c.key
        if c.impl == "jax":
            assert c.compile_s is not None and c.compile_s > 0  # trace + XLA compile + first run
            assert Note("case.jax_host_timed") not in c.notes  # a CPU baseline has no GPU time to miss


def test_a_cpu_only_jaxlib_on_cuda_inputs_is_a_recorded_skip_reason() -> None:
    """jax's CPU build cannot take CUDA tensors: NoDevice (prepare makes it a skip, skip.jax_no_gpu)."""
    from envcheck.bench import jax_impl

    class CudaTensor:
        is_cuda = True

    with pytest.raises(jax_impl.NoDevice) as info:
        jax_impl.on_sets("relu", [({"x": CudaTensor()}, None)], "fp32", (4,))
    assert info.value.backend == "cpu"
