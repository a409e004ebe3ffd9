"""JAX as another implementation of every op: what a JAX user would write, jitted once per group, on the group's
tensors through DLPack (no copy), with the others' arithmetic (fp32 accumulation, IEEE or TF32 as asked). JAX's
own streams escape CUDA graphs: a JAX case has a launch time only.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.bench.impls import LAYER_NORM_EPS, REDUCE_DIMS, Impl, Inputs, Sets
from envcheck.ops import spec

if TYPE_CHECKING:
    from jax import Array

JaxFn = Callable[..., "Array | tuple[Array, Array]"]


class NoDevice(Exception):
    """JAX has no backend for the inputs' device (a CPU-only jaxlib on a GPU machine)."""

    def __init__(self, backend: str) -> None:
        super().__init__(f"JAX's backend is {backend}: it cannot run on CUDA tensors")
        self.backend = backend


def installed() -> bool:
    """Whether ``jax`` can be found (without importing it: planning stays fast)."""
    return importlib.util.find_spec("jax") is not None


def _import() -> ModuleType:
    # XLA would take 75% of GPU memory at import: it allocates what it uses instead, beside torch's allocator.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    return jax


def function(op: str, shape: tuple[int, ...], precision: str) -> JaxFn:
    """The JAX function of ``op`` (not jitted), on the inputs in ``impls.make_inputs``'s order."""
    jax = _import()
    jnp = jax.numpy
    lax = jax.lax
    f32 = jnp.float32
    dot_precision = {"fp32": "float32", "tf32": "tensorfloat32"}.get(precision, "bfloat16")

    def traced(fn: JaxFn) -> JaxFn:
        def run(*args: Array) -> Array | tuple[Array, Array]:
            with jax.default_matmul_precision(dot_precision):
                return fn(*args)

        return run

    s = spec(op)
    if s.family == "reduce":
        axes = REDUCE_DIMS[s.reduce_over]
        if op.startswith("sum"):
            return lambda x: jnp.sum(x, axis=axes, dtype=f32).astype(x.dtype).reshape(-1)
        return lambda x: jnp.max(x, axis=axes).reshape(-1)

    def layer_norm(x: Array, w: Array, b: Array) -> Array:
        xf = x.astype(f32)
        centred = xf - jnp.mean(xf, axis=-1, keepdims=True)
        var = jnp.mean(centred * centred, axis=-1, keepdims=True)
        return (centred * lax.rsqrt(var + LAYER_NORM_EPS) * w.astype(f32) + b.astype(f32)).astype(x.dtype)

    def conv2d(x: Array, w: Array) -> Array:
        stride, pad = shape[6], shape[5] // 2
        y = lax.conv_general_dilated(x, w, (stride, stride), ((pad, pad), (pad, pad)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"), preferred_element_type=f32)
        return y.astype(x.dtype)

    def softmax_fwbw(x: Array, dy: Array) -> tuple[Array, Array]:
        y, vjp = jax.vjp(lambda v: jax.nn.softmax(v.astype(f32), axis=-1).astype(v.dtype), x)
        return y, vjp(dy)[0]  # y over dx, joined outside the timed call (as torch's)

    def linear_fwbw(x: Array, w: Array, dy: Array) -> Array:
        y, vjp = jax.vjp(lambda a, b: jnp.matmul(a, b.T, preferred_element_type=f32).astype(a.dtype), x, w)
        dx, dw = vjp(dy)
        return jnp.concatenate([y.ravel(), dx.ravel(), dw.ravel()])  # as impls.make_output lays it

    functions: dict[str, JaxFn] = {
        "vector_add": lambda x, y: x + y,
        "relu": lambda x: jnp.maximum(x, 0),
        "softmax": lambda x: jax.nn.softmax(x.astype(f32), axis=-1).astype(x.dtype),
        "row_sum": lambda x: jnp.sum(x, axis=-1, dtype=f32).astype(x.dtype),
        "layer_norm": layer_norm, "softmax_fwbw": softmax_fwbw,
        # the matmul-family ops under the asked precision
        "matmul": traced(lambda a, b: jnp.matmul(a, b, preferred_element_type=f32).astype(a.dtype)),
        "conv2d": traced(conv2d), "linear_fwbw": traced(linear_fwbw),
    }
    if op not in functions:
        raise ValueError(f"no JAX implementation of {op!r}")
    return functions[op]


def on_sets(op: str, sets: Sets, precision: str, shape: tuple[int, ...]) -> list[Impl]:
    """The jitted op bound to each set's inputs; each call blocks until its result is ready, a torch tensor."""
    import torch

    jax = _import()
    if any(t.is_cuda for inputs, _ in sets for t in inputs.values()):
        if jax.default_backend() != "gpu":
            raise NoDevice(jax.default_backend())
        torch.cuda.synchronize()  # the inputs were drawn on torch's stream; JAX reads them on its own
    # DLPack hands JAX row-major buffers only: a transposed view (fp32 matmul's K-major b) is shared as the tensor
    # it transposes and transposed back inside the jit, so every input stays the caller's memory.
    flipped = [not t.is_contiguous() and t.dim() == 2 and t.t().is_contiguous() for t in sets[0][0].values()]
    fn = function(op, shape, precision)
    jitted = jax.jit(lambda *xs: fn(*(x.T if f else x for x, f in zip(xs, flipped, strict=True))))

    def bind(inputs: Inputs) -> Impl:
        args = [jax.dlpack.from_dlpack(t.t() if f else t.contiguous()) for t, f in zip(inputs.values(), flipped,
                                                                                     strict=True)]

        def call() -> torch.Tensor | tuple[torch.Tensor, ...]:
            result = jax.block_until_ready(jitted(*args))
            if isinstance(result, tuple):  # several outputs: accuracy.checked_call joins them
                return tuple(torch.from_dlpack(r) for r in result)
            return torch.from_dlpack(result)

        return call

    return [bind(inputs) for inputs, _ in sets]
