"""The three implementations of each op (PyTorch, envcheck's Triton kernel, ``torch.compile``)
and the tensors they run on. What an op costs and what shapes it takes is envcheck/ops.py;
its float64 reference is accuracy.py.

Torch is imported inside the functions: the worker alone calls them.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from envcheck.ops import spec

Inputs = dict[str, Any]  # name -> torch.Tensor, in the eager function's argument order
Impl = Callable[[], Any]  # one call of the op; returns the output tensor

# Softmax inputs sit this far above zero: softmax is shift-invariant, so a correct kernel
# (which subtracts the row max before exp) gives the same result, while one that forgets to
# overflows: exp(100) is past fp32's range (exp overflows above 88.7; fp16's above 11.1) and
# its rows turn to inf / NaN. At randn * 4 without an offset such a kernel passed.
SOFTMAX_OFFSET = 100.0
SOFTMAX_SPREAD = 4.0


def torch_dtype(dtype: str) -> Any:
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]


def make_inputs(op: str, shape: tuple[int, ...], dtype: str, device: str, generator: Any) -> Inputs:
    """Fresh random inputs (never zeros: a kernel that ignores its input must not pass).

    Standard normal values, drawn in float32 and rounded once to ``dtype``; the float64
    reference is computed from these rounded values, so input rounding never counts as error.
    Softmax gets ``randn * 4 + 100``: rows with a real spread, far from zero (SOFTMAX_OFFSET).
    Matmul inputs are scaled by 1/sqrt(K) so outputs stay O(1) and fp16 never overflows.
    """
    import torch

    spec(op).check_shape(shape)
    tdt = torch_dtype(dtype)

    def randn(*dims: int, scale: float = 1.0, offset: float = 0.0) -> Any:
        x = torch.randn(*dims, generator=generator, device=device, dtype=torch.float32)
        if scale != 1.0:
            x.mul_(scale)
        if offset:
            x.add_(offset)
        return x.to(tdt)

    if op == "vector_add":
        return {"x": randn(shape[0]), "y": randn(shape[0])}
    if op == "relu":
        return {"x": randn(shape[0])}
    if op == "softmax":
        return {"x": randn(*shape, scale=SOFTMAX_SPREAD, offset=SOFTMAX_OFFSET)}
    if op == "row_sum":
        return {"x": randn(*shape)}
    m, n, k = shape
    s = 1.0 / float(k) ** 0.5
    if dtype == "fp32":
        # B as nn.Linear stores it: W of shape (N, K), used as W.T (K-major). Hopper's TF32
        # tensor-core instruction reads B only K-major; with a row-major B Triton's TF32 matmul
        # ran at ~0.25x of cuBLAS on an H200, against ~0.86x in this layout. Both
        # implementations get the same tensors, so the comparison stays fair.
        return {"a": randn(m, k, scale=s), "b": randn(n, k, scale=s).t()}
    return {"a": randn(m, k, scale=s), "b": randn(k, n, scale=s)}


def make_output(op: str, shape: tuple[int, ...], dtype: str, device: str) -> Any:
    import torch

    s = spec(op)
    s.check_shape(shape)
    tdt = torch_dtype(dtype)
    if op == "softmax":
        return torch.empty(*shape, dtype=tdt, device=device)
    if op == "matmul":
        return torch.empty(shape[0], shape[1], dtype=tdt, device=device)
    return torch.empty(s.output_elements(shape), dtype=tdt, device=device)


def torch_impl(op: str, inputs: Inputs, out: Any) -> Impl:
    """The PyTorch call a user would write, writing into ``out`` where ATen has an out= form.

    relu is ATen's ``clamp_min(x, 0)`` (what ``torch.relu`` dispatches to) and softmax is
    ``_softmax.out`` (what ``torch.softmax`` dispatches to), so no extra allocation sits in
    the timed region. Matmul's TF32 switch is set by the caller (see ``tf32_matmul``).
    """
    import torch

    if op == "vector_add":
        x, y = inputs["x"], inputs["y"]
        return lambda: torch.add(x, y, out=out)
    if op == "relu":
        x = inputs["x"]
        return lambda: torch.clamp_min(x, 0.0, out=out)
    if op == "softmax":
        x = inputs["x"]
        return lambda: torch.ops.aten._softmax.out(x, -1, False, out=out)
    if op == "row_sum":
        x = inputs["x"]
        return lambda: torch.sum(x, dim=-1, out=out)
    a, b = inputs["a"], inputs["b"]
    return lambda: torch.matmul(a, b, out=out)


def triton_impl(op: str, inputs: Inputs, out: Any, precision: str, control: str | None = None) -> Impl:
    """envcheck's Triton kernel for ``op`` (imports Triton: call inside the worker only).
    ``control``: the run's positive-control switch (model.CONTROLS), None in ordinary runs."""
    from envcheck.bench import kernels

    fn = getattr(kernels, op)
    if op == "vector_add":
        x, y = inputs["x"], inputs["y"]
        if control == "vector_add_extra_bytes":
            from envcheck.bench.kernels.vector_add import extra_buffer

            extra = extra_buffer(x)  # one per set of inputs: it rotates with them, L2 stays cold
            return lambda: fn(x, y, out, extra)
        return lambda: fn(x, y, out)
    if op in ("relu", "softmax", "row_sum"):
        x = inputs["x"]
        return lambda: fn(x, out)
    a, b = inputs["a"], inputs["b"]
    return lambda: fn(a, b, out, precision)


def triton_kernel(op: str, shape: tuple[int, ...], dtype: str, precision: str) -> str | None:
    """Which kernel and tile envcheck's Triton ``op`` ran at this shape, once it ran: matmul
    races several (see kernels/tuning.py); the other ops have one kernel (None)."""
    if op != "matmul":
        return None
    import importlib

    matmul = importlib.import_module("envcheck.bench.kernels.matmul")  # the module, not the function
    m, n, k = shape
    tile = matmul.tuned_tile(m, n, k, torch_dtype(dtype), precision)
    return tile.label if tile is not None else None


def eager(op: str) -> Callable[..., Any]:
    """The out-of-place PyTorch function torch.compile traces (out= forms do not compile well)."""
    import torch

    return {
        "vector_add": lambda x, y: x + y,
        "relu": torch.relu,
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "row_sum": lambda x: x.sum(dim=-1),
        "matmul": torch.matmul,
    }[op]


def compiled_on_sets(op: str, sets: list[Inputs]) -> list[Impl]:
    """``torch.compile`` of the eager op with static shapes, ONCE, bound to each set's inputs;
    compiling happens on the first call.

    Dynamo's caches are reset first: every group compiles a function with the same code
    object, and after ``cache_size_limit`` shapes Dynamo would silently fall back to eager (or
    turn on dynamic shapes), measuring something other than a compiled kernel for this shape.
    One compiled function for all sets: the extra sets pass its guards (same shapes, dtypes,
    strides) and reuse its code; a compile per set would make every set a new compile.
    """
    import torch

    with contextlib.suppress(Exception):  # a private API; resetting protects the measurement, it is not required
        torch._dynamo.reset()
    compiled = torch.compile(eager(op), dynamic=False)
    return [functools.partial(compiled, *inputs.values()) for inputs in sets]


class tf32_matmul:  # noqa: N801 - used like the torch context managers it mirrors
    """Context manager: ``torch.backends.cuda.matmul.allow_tf32`` set for ``precision``, restored after.

    ``fp32`` -> IEEE (False), ``tf32`` -> True; fp16/bf16 matmuls ignore the switch (left as is).
    Both the PyTorch and the compiled implementation read it, so both sides of a TF32 row use TF32.
    """

    def __init__(self, precision: str) -> None:
        self.precision = precision
        self._saved: bool | None = None

    def __enter__(self) -> tf32_matmul:
        import torch

        self._saved = torch.backends.cuda.matmul.allow_tf32
        if self.precision in ("fp32", "tf32"):
            torch.backends.cuda.matmul.allow_tf32 = self.precision == "tf32"
        return self

    def __exit__(self, *exc: object) -> None:
        import torch

        if self._saved is not None:
            torch.backends.cuda.matmul.allow_tf32 = self._saved
