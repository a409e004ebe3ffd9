"""The implementations of each op (PyTorch, envcheck's Triton kernel, ``torch.compile``, and
JAX where it is installed: jax_impl.py) and the tensors they run on. What an op costs and
what shapes it takes is envcheck/ops.py; its float64 reference is accuracy.py (reference_ops.py
for the first users' workloads).

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
    Matmul inputs are scaled by 1/sqrt(K) so outputs stay O(1) and fp16 never overflows. Layer
    norm's special rows: far from zero, of a variance near eps, constant (``LAYER_NORM_*``). The
    semantics random values never reach (all-negative rows, constant softmax rows) are the exact
    inputs' (exact.py).
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
    if op == "row_sum" or spec(op).family == "reduce":
        return {"x": randn(*shape)}
    if op == "layer_norm":
        x = randn(*shape).float()
        x[1::8] += LAYER_NORM_FAR
        x[3::8] *= LAYER_NORM_TINY
        x[5::8] = LAYER_NORM_CONSTANT
        return {"x": x.to(tdt), "weight": randn(shape[1]), "bias": randn(shape[1])}
    if op == "softmax_fwbw":
        return {"x": randn(*shape, scale=SOFTMAX_SPREAD, offset=SOFTMAX_OFFSET), "dy": randn(*shape)}
    if op == "conv2d":
        nb, c, h, w, k, r, _ = shape
        return {"x": randn(nb, c, h, w), "weight": randn(k, c, r, r, scale=1.0 / float(c * r * r) ** 0.5)}
    m, n, k = shape
    if op == "linear_fwbw":
        # y = x W^T and the gradients stay O(1): W scaled by 1/sqrt(K), dy by 1/sqrt(max(M, N)).
        return {"x": randn(m, k), "w": randn(n, k, scale=1.0 / float(k) ** 0.5),
                "dy": randn(m, n, scale=1.0 / float(max(m, n)) ** 0.5)}
    s = 1.0 / float(k) ** 0.5
    if dtype == "fp32":
        # B as nn.Linear stores it: W of shape (N, K), used as W.T (K-major). Hopper's TF32
        # tensor-core instruction reads B only K-major; with a row-major B Triton's TF32 matmul
        # ran at ~0.25x of cuBLAS on an H200, against ~0.86x in this layout. Both
        # implementations get the same tensors, so the comparison stays fair.
        return {"a": randn(m, k, scale=s), "b": randn(n, k, scale=s).t()}
    return {"a": randn(m, k, scale=s), "b": randn(k, n, scale=s)}


# Layer norm's special rows: far from zero (a one-pass variance E[x^2] - E[x]^2 cancels there),
# of a variance near eps = 1e-5 (eps outside the square root, or a sample variance, shows
# there), constant (variance 0: the output is the bias). The constant is a power of two, so every
# summation order computes its mean exactly: a mean off by one rounding would be amplified by
# rstd = 1/sqrt(eps) = 316 in a correct kernel too (an ill-conditioned row, not a bug).
LAYER_NORM_CONSTANT = 0.5
LAYER_NORM_FAR = 100.0
LAYER_NORM_TINY = 3e-3


def make_output(op: str, shape: tuple[int, ...], dtype: str, device: str) -> Any:
    import torch

    s = spec(op)
    s.check_shape(shape)
    tdt = torch_dtype(dtype)
    if op in ("softmax", "layer_norm"):
        return torch.empty(*shape, dtype=tdt, device=device)
    if op == "softmax_fwbw":  # y over dx
        return torch.empty(2 * shape[0], shape[1], dtype=tdt, device=device)
    if op == "conv2d":
        p, q = s.conv_output(shape)
        return torch.empty(shape[0], shape[4], p, q, dtype=tdt, device=device)
    if op == "linear_fwbw":  # y, dx and dW, flattened one after the other
        m, n, k = shape
        return torch.empty(m * n + (m + n) * k, dtype=tdt, device=device)
    if op == "matmul":
        return torch.empty(shape[0], shape[1], dtype=tdt, device=device)
    return torch.empty(s.output_elements(shape), dtype=tdt, device=device)


def torch_impl(op: str, inputs: Inputs, out: Any, shape: tuple[int, ...] = ()) -> Impl:
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
    if op == "conv2d":
        return _conv2d(inputs, out, stride=shape[6])
    if op in _NEW_TORCH:
        return _NEW_TORCH[op](inputs, out)
    a, b = inputs["a"], inputs["b"]
    return lambda: torch.matmul(a, b, out=out)


def _reduction(how: str, over: str) -> Callable[[Inputs, Any], Impl]:
    """torch.sum / torch.amax over the op's axes, into ``out`` viewed as the result's shape."""
    def bind(inputs: Inputs, out: Any) -> Impl:
        import torch

        x = inputs["x"]
        a, b, c = x.shape
        dims, view = {"all": ((0, 1, 2), ()), "inner": ((2,), (a, b)), "lead": ((0, 1), (c,))}[over]
        fn = torch.sum if how == "sum" else torch.amax
        shaped = out.view(view)

        def call() -> Any:
            fn(x, dim=dims, out=shaped)
            return out  # flat, as the reference and the other implementations give it

        return call

    return bind


def _layer_norm(inputs: Inputs, out: Any) -> Impl:
    """``F.layer_norm`` as users call it: it allocates its output (ATen's out= form also wants
    the mean and rstd buffers, in a dtype that differs between CPU and CUDA)."""
    import torch

    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    return lambda: torch.nn.functional.layer_norm(x, (x.shape[1],), w, b, 1e-5)


def _conv2d(inputs: Inputs, out: Any, stride: int) -> Impl:
    """``F.conv2d`` (cuDNN on a GPU; it allocates its output), padding R // 2."""
    import torch

    x, w = inputs["x"], inputs["weight"]
    pad = w.shape[2] // 2
    return lambda: torch.nn.functional.conv2d(x, w, stride=stride, padding=pad)


def _softmax_fwbw(inputs: Inputs, out: Any, forward: Callable[..., Any] | None = None) -> Impl:
    """Autograd: forward, then the backward pass for the upstream gradient dy; returns y and dx
    as autograd allocated them (accuracy.checked_call's allocating path joins them as
    ``make_output`` lays them, outside the timed call: a copy into ``out`` would add 80% to
    the traffic of this memory-bound op)."""
    import torch

    x = inputs["x"].detach().requires_grad_()
    dy = inputs["dy"]
    fwd = forward or (lambda v: torch.softmax(v, dim=-1))

    def call() -> Any:
        y = fwd(x)
        return y.detach(), torch.autograd.grad(y, x, dy)[0]

    return call


def _linear_fwbw(inputs: Inputs, out: Any, forward: Callable[..., Any] | None = None) -> Impl:
    """Autograd: y = x W^T, then dx and dW for dy, written into ``out`` (y, dx and dW flattened,
    each judged). The copy into ``out`` moves M N + (M + N) K elements, small beside the three
    matmuls' 6 MNK FLOPs."""
    import torch

    x = inputs["x"].detach().requires_grad_()
    w = inputs["w"].detach().requires_grad_()
    dy = inputs["dy"]
    fwd = forward or torch.nn.functional.linear

    def call() -> Any:
        y = fwd(x, w)
        dx, dw = torch.autograd.grad(y, (x, w), dy)
        return torch.cat((y.detach().reshape(-1), dx.reshape(-1), dw.reshape(-1)), out=out)

    return call


_NEW_TORCH: dict[str, Callable[[Inputs, Any], Impl]] = {
    "layer_norm": _layer_norm,
    "softmax_fwbw": _softmax_fwbw,
    "linear_fwbw": _linear_fwbw,
    **{f"{how}_{over}": _reduction(how, over) for how in ("sum", "max") for over in ("all", "inner", "lead")},
}


def triton_impl(op: str, inputs: Inputs, out: Any, precision: str, shape: tuple[int, ...] = (),
                control: str | None = None) -> Impl:
    """envcheck's Triton kernel for ``op`` (imports Triton: call inside the worker only).
    ``control``: the run's positive-control switch (model.CONTROLS), None in ordinary runs.

    Workspaces a kernel needs (the reductions' partials) are made here, once, outside every
    timed region; the forward + backward ops write y into ``out`` beside their gradients."""
    from envcheck.bench import kernels

    fn = getattr(kernels, op)
    if spec(op).family == "reduce":
        x = inputs["x"]
        import importlib

        reduce = importlib.import_module("envcheck.bench.kernels.reduce")  # the module of the six reductions
        work = reduce.workspace(x, spec(op).reduce_over)
        return lambda: fn(x, out, work)
    if op == "layer_norm":
        x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
        return lambda: fn(x, w, b, out)
    if op == "conv2d":
        x, w = inputs["x"], inputs["weight"]
        return lambda: fn(x, w, out, shape[6], precision)
    if op == "softmax_fwbw":
        x, dy = inputs["x"], inputs["dy"]
        y, dx = out[:x.shape[0]], out[x.shape[0]:]  # y over dx, each judged

        def softmax() -> Any:
            fn(x, dy, y, dx)
            return out

        return softmax
    if op == "linear_fwbw":
        x, w, dy = inputs["x"], inputs["w"], inputs["dy"]
        m, n, k = x.shape[0], w.shape[0], x.shape[1]
        y, grads = out[:m * n].view(m, n), out[m * n:].view(m + n, k)  # y, then dx over dW

        def linear() -> Any:
            fn(x, w, dy, y, grads, precision)
            return out

        return linear
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


def eager(op: str, shape: tuple[int, ...] = ()) -> Callable[..., Any]:
    """The out-of-place PyTorch function torch.compile traces (out= forms do not compile well).
    For the forward + backward ops: the forward only (the backward is autograd's, compiled by
    AOTAutograd with it). Reductions return their result flat, as ``out`` holds it."""
    import torch

    if spec(op).family == "reduce":
        dims = {"all": (0, 1, 2), "inner": (2,), "lead": (0, 1)}[spec(op).reduce_over]
        fn = torch.sum if op.startswith("sum") else torch.amax
        return lambda x: fn(x, dim=dims).reshape(-1)
    if op == "conv2d":
        stride, pad = shape[6], shape[5] // 2
        return lambda x, w: torch.nn.functional.conv2d(x, w, stride=stride, padding=pad)
    return {
        "vector_add": lambda x, y: x + y,
        "relu": torch.relu,
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "row_sum": lambda x: x.sum(dim=-1),
        "matmul": torch.matmul,
        "layer_norm": lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5),
        "softmax_fwbw": lambda x: torch.softmax(x, dim=-1),
        "linear_fwbw": torch.nn.functional.linear,
    }[op]


def compiled_on_sets(op: str, sets: list[Inputs], shape: tuple[int, ...] = (),
                     outs: list[Any] | None = None) -> list[Impl]:
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
    compiled = torch.compile(eager(op, shape), dynamic=False)
    if op == "softmax_fwbw":
        return [_softmax_fwbw(inputs, None, forward=compiled) for inputs in sets]
    if op == "linear_fwbw":
        return [_linear_fwbw(inputs, out, forward=compiled) for inputs, out in zip(sets, outs or [], strict=True)]
    return [functools.partial(compiled, *inputs.values()) for inputs in sets]


class tf32_matmul:  # noqa: N801 - used like the torch context managers it mirrors
    """Context manager: ``torch.backends.cuda.matmul.allow_tf32`` and cuDNN's
    ``torch.backends.cudnn.allow_tf32`` (convolutions: on by default in PyTorch) set for
    ``precision``, restored after.

    ``fp32`` -> IEEE (False), ``tf32`` -> True; fp16/bf16 matmuls ignore the switch (left as is).
    Both the PyTorch and the compiled implementation read it, so both sides of a TF32 row use TF32.
    """

    def __init__(self, precision: str) -> None:
        self.precision = precision
        self._saved: bool | None = None
        self._saved_cudnn: bool | None = None

    def __enter__(self) -> tf32_matmul:
        import torch

        self._saved = torch.backends.cuda.matmul.allow_tf32
        self._saved_cudnn = torch.backends.cudnn.allow_tf32
        if self.precision in ("fp32", "tf32"):
            torch.backends.cuda.matmul.allow_tf32 = self.precision == "tf32"
            torch.backends.cudnn.allow_tf32 = self.precision == "tf32"
        return self

    def __exit__(self, *exc: object) -> None:
        import torch

        if self._saved is not None:
            torch.backends.cuda.matmul.allow_tf32 = self._saved
        if self._saved_cudnn is not None:
            torch.backends.cudnn.allow_tf32 = self._saved_cudnn
