"""JAX's CPU build run as an implementation, the way tests/test_ops_new_jax.py judges it:
``python tests/jax_child.py``. Prints one JSON object.

Run as a child process: once JAX has started its backend it runs threads, and every later fork of
the process that imported it (a subprocess with ``preexec_fn``, the chart pool) warns "os.fork()
was called ... JAX is multithreaded ... likely deadlock". The test process never imports JAX.

Imports torch only where it runs: the test module takes its constants without importing it.

Fields, each computed with the worker's own code (bench/impls.py inputs, bench/jax_impl.py calls,
bench/accuracy.py reference and statistics, analysis/tolerance.py judge):
* ``judged``: per op and dtype, the output's shape and dtype against ``impls.make_output`` and
  the judge's verdict;
* ``doubled_passes``: the verdict on a softmax_fwbw gradient off by a factor of two;
* ``forward``: per forward + backward op, whether the jitted function's forward output matches
  float64 torch and its gradient has the output's shape;
* ``traces``, ``sets_differ``: how often three rotating sets traced the function, whether their
  results differ;
* ``cuda_backend``: the backend named by ``NoDevice`` for inputs on CUDA (None: not raised).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from envcheck.analysis.tolerance import judge, tolerance
from envcheck.bench import accuracy, impls, jax_impl
from envcheck.ops import OPS

SMALL = {"vector": (1000,), "rows": (7, 300), "matmul": (33, 20, 50), "reduce": (3, 5, 7),
         "conv": (2, 3, 9, 10, 4, 5, 2)}
DTYPES = ("fp32", "fp16", "bf16")
FORWARD_BACKWARD = ("softmax_fwbw", "linear_fwbw")


def shape_of(op: str) -> tuple[int, ...]:
    return SMALL[OPS[op].family]


def _judged(op: str, dtype: str) -> dict[str, Any]:
    import torch

    shape = shape_of(op)
    inputs = impls.make_inputs(op, shape, dtype, "cpu", torch.Generator().manual_seed(7))
    out = impls.make_output(op, shape, dtype, "cpu")
    (call,) = jax_impl.on_sets(op, [(inputs, out)], dtype, shape)
    result, _ = accuracy.checked_call(call, out)
    acc = accuracy.compare(result, accuracy.reference_chunks(op, inputs, shape=shape), dtype)
    verdict = judge(acc, tolerance(op, dtype, dtype, shape))
    return {"op": op, "dtype": dtype, "shape_ok": tuple(result.shape) == tuple(out.shape),
            "dtype_ok": result.dtype == out.dtype, "passed": verdict.passed,
            "why": repr((verdict.broken, verdict.ratio))}


def _doubled_passes() -> bool:
    import torch

    shape = (7, 300)
    inputs = impls.make_inputs("softmax_fwbw", shape, "fp32", "cpu", torch.Generator().manual_seed(3))
    out = impls.make_output("softmax_fwbw", shape, "fp32", "cpu")
    (call,) = jax_impl.on_sets("softmax_fwbw", [(inputs, out)], "fp32", shape)
    result, _ = accuracy.checked_call(call, out)
    result[shape[0]:] *= 2  # dx, below y
    acc = accuracy.compare(result, accuracy.reference_chunks("softmax_fwbw", inputs), "fp32")
    return judge(acc, tolerance("softmax_fwbw", "fp32", "fp32", shape)).passed


def _forward(op: str) -> dict[str, bool]:
    """XLA drops what nothing uses: the function must return y beside the gradient, as autograd
    keeps it (first, as ``impls.make_output`` lays the judged outputs)."""
    import jax
    import torch

    shape = shape_of(op)
    inputs = impls.make_inputs(op, shape, "fp32", "cpu", torch.Generator().manual_seed(1))
    result = jax.jit(jax_impl.function(op, shape, "fp32"))(*[t.numpy() for t in inputs.values()])
    joined = torch.cat([torch.from_dlpack(r) for r in result]) if isinstance(result, tuple) else torch.from_dlpack(result)
    m, n = shape[:2]  # softmax: rows and columns; linear: y is M x N
    if op == "softmax_fwbw":
        expect = torch.softmax(inputs["x"].double(), dim=-1)
    else:
        expect = inputs["x"].double() @ inputs["w"].double().t()
    y = joined.reshape(-1)[:m * n].reshape(m, n)
    return {"forward_close": torch.allclose(y.double(), expect, rtol=1e-5, atol=1e-6),
            "grad_shape_ok": tuple(joined.shape) == tuple(impls.make_output(op, shape, "fp32", "cpu").shape)}


def _traces() -> dict[str, Any]:
    """Rotating sets share one compiled function: tracing happens once, not once per set."""
    import torch

    traced = []
    real = jax_impl.function

    def counting(op: str, shape: tuple[int, ...], precision: str) -> Any:
        fn = real(op, shape, precision)

        def wrapped(*args: Any) -> Any:
            traced.append(op)
            return fn(*args)

        return wrapped

    jax_impl.function = counting
    try:
        gen = torch.Generator().manual_seed(0)
        sets = [(impls.make_inputs("layer_norm", (7, 300), "fp32", "cpu", gen),
                 impls.make_output("layer_norm", (7, 300), "fp32", "cpu")) for _ in range(3)]
        results = [c() for c in jax_impl.on_sets("layer_norm", sets, "fp32", (7, 300))]
    finally:
        jax_impl.function = real
    return {"traces": len(traced), "sets_differ": not torch.equal(results[0], results[1])}


def _cuda_backend() -> str | None:
    """jax's CPU build cannot take CUDA tensors: NoDevice names the backend it has."""

    class CudaTensor:
        is_cuda = True

    try:
        jax_impl.on_sets("relu", [({"x": CudaTensor()}, None)], "fp32", (4,))
    except jax_impl.NoDevice as e:
        return e.backend
    return None


def main() -> int:
    json.dump({"judged": [_judged(op, dtype) for op in OPS for dtype in DTYPES],
               "doubled_passes": _doubled_passes(),
               "forward": {op: _forward(op) for op in FORWARD_BACKWARD},
               **_traces(),
               "cuda_backend": _cuda_backend()}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
