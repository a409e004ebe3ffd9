"""The implementations of each built-in op (PyTorch, envcheck's Triton kernel, ``torch.compile``; JAX in
jax_impl.py) and the tensors they run on; what an op costs is envcheck/ops.py, its reference accuracy.py.
Torch is imported inside the functions: the worker alone calls them."""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from envcheck.ops import spec

if TYPE_CHECKING:
    import torch

Inputs = dict[str, "torch.Tensor"]  # in the eager function's argument order
Sets = list[tuple[Inputs, "torch.Tensor | None"]]  # (inputs, output) per set; None: the implementation allocates
Impl = Callable[[], "torch.Tensor | tuple[torch.Tensor, ...]"]  # one call of the op (an op's outputs apart, or joined)
Forward = Callable[..., "torch.Tensor"]  # an out-of-place PyTorch function of the inputs

# Softmax inputs sit this far above zero: a kernel that forgets to subtract the row max overflows (exp(100)).
SOFTMAX_OFFSET = 100.0
SOFTMAX_SPREAD = 4.0
REDUCE_DIMS = {"all": (0, 1, 2), "inner": (2,), "lead": (0, 1)}  # the axes each reduction sums or maxes over


def torch_dtype(dtype: str) -> torch.dtype:
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]


def make_inputs(op: str, shape: tuple[int, ...], dtype: str, device: str,
                generator: torch.Generator | None) -> Inputs:
    """Fresh random inputs (never zeros): standard normal values drawn in float32 and rounded once to ``dtype``,
    softmax's far from zero, matmul's scaled by 1/sqrt(K), layer norm's with special rows (exact inputs: exact.py)."""
    import torch

    spec(op).check_shape(shape)
    tdt = torch_dtype(dtype)

    def randn(*dims: int, scale: float = 1.0, offset: float = 0.0) -> torch.Tensor:
        x = torch.randn(*dims, generator=generator, device=device, dtype=torch.float32)
        if scale != 1.0:
            x.mul_(scale)
        if offset:
            x.add_(offset)
        return x.to(tdt)

    if op == "softmax":
        return {"x": randn(*shape, scale=SOFTMAX_SPREAD, offset=SOFTMAX_OFFSET)}
    if op in ("vector_add", "relu", "row_sum") or spec(op).family == "reduce":
        x = randn(*shape)
        return {"x": x, "y": randn(*shape)} if op == "vector_add" else {"x": x}
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
        # B K-major, as nn.Linear stores W: Hopper's TF32 tensor-core instruction reads B only K-major.
        return {"a": randn(m, k, scale=s), "b": randn(n, k, scale=s).t()}
    return {"a": randn(m, k, scale=s), "b": randn(k, n, scale=s)}


# Layer norm's special rows: far from zero (a one-pass variance cancels), of a variance near eps (eps outside
# the square root shows), constant (a power of two: every summation order gets its mean exactly).
LAYER_NORM_CONSTANT = 0.5
LAYER_NORM_FAR = 100.0
LAYER_NORM_TINY = 3e-3
LAYER_NORM_EPS = 1e-5


# The output's shape where it is not the flat ``output_elements``: softmax_fwbw's y over dx; linear_fwbw's y, dx
# and dW flattened one after the other.
OUTPUT_SHAPES: dict[str, Callable[[tuple[int, ...]], tuple[int, ...]]] = {
    "softmax": lambda s: s, "layer_norm": lambda s: s, "softmax_fwbw": lambda s: (2 * s[0], s[1]),
    "conv2d": lambda s: (s[0], s[4], *spec("conv2d").conv_output(s)),
    "linear_fwbw": lambda s: (s[0] * s[1] + (s[0] + s[1]) * s[2],), "matmul": lambda s: s[:2],
}


def make_output(op: str, shape: tuple[int, ...], dtype: str, device: str) -> torch.Tensor:
    import torch

    s = spec(op)
    s.check_shape(shape)
    dims = OUTPUT_SHAPES[op](shape) if op in OUTPUT_SHAPES else (s.output_elements(shape),)
    return torch.empty(*dims, dtype=torch_dtype(dtype), device=device)


def torch_impl(op: str, inputs: Inputs, out: torch.Tensor, shape: tuple[int, ...] = ()) -> Impl:
    """The PyTorch call a user would write, into ``out`` where ATen has an out= form (relu: ``clamp_min``, softmax:
    ``_softmax.out``, what torch dispatches to): no extra allocation is timed."""
    import torch

    if op == "softmax_fwbw":
        return _softmax_fwbw(inputs, out)
    if op == "linear_fwbw":
        return _linear_fwbw(inputs, out)
    if spec(op).family == "reduce":  # into ``out`` viewed as the result's shape
        x = inputs["x"]
        a, b, c = x.shape
        over = spec(op).reduce_over
        dims, shaped = REDUCE_DIMS[over], out.view({"all": (), "inner": (a, b), "lead": (c,)}[over])
        fn = torch.sum if op.startswith("sum") else torch.amax

        def reduction() -> torch.Tensor:
            fn(x, dim=dims, out=shaped)
            return out  # flat, as the reference and the other implementations give it

        return reduction
    x, y, w, bias, a, b = (inputs.get(name) for name in ("x", "y", "weight", "bias", "a", "b"))
    stride, pad = (shape[6], w.shape[2] // 2) if op == "conv2d" else (1, 0)
    calls: dict[str, Impl] = {
        "vector_add": lambda: torch.add(x, y, out=out),
        "relu": lambda: torch.clamp_min(x, 0.0, out=out),
        "softmax": lambda: torch.ops.aten._softmax.out(x, -1, False, out=out),
        "row_sum": lambda: torch.sum(x, dim=-1, out=out),
        # cuDNN on a GPU; conv2d and layer_norm allocate their output (ATen's layer_norm.out wants mean and rstd)
        "conv2d": lambda: torch.nn.functional.conv2d(x, w, stride=stride, padding=pad),
        "layer_norm": lambda: torch.nn.functional.layer_norm(x, (x.shape[1],), w, bias, LAYER_NORM_EPS),
        "matmul": lambda: torch.matmul(a, b, out=out),
    }
    return calls[op]


def _softmax_fwbw(inputs: Inputs, out: torch.Tensor | None, forward: Forward | None = None) -> Impl:
    """Autograd's forward and backward for dy; y and dx as autograd allocated them (a copy into ``out`` would add
    80% to the traffic: accuracy.checked_call joins them, untimed)."""
    import torch

    x = inputs["x"].detach().requires_grad_()
    dy = inputs["dy"]
    fwd = forward or (lambda v: torch.softmax(v, dim=-1))

    def call() -> tuple[torch.Tensor, torch.Tensor]:
        y = fwd(x)
        return y.detach(), torch.autograd.grad(y, x, dy)[0]

    return call


def _linear_fwbw(inputs: Inputs, out: torch.Tensor, forward: Forward | None = None) -> Impl:
    """Autograd: y = x W^T, then dx and dW for dy, flattened into ``out`` (small beside the matmuls' 6 MNK FLOPs)."""
    import torch

    x = inputs["x"].detach().requires_grad_()
    w = inputs["w"].detach().requires_grad_()
    dy = inputs["dy"]
    fwd = forward or torch.nn.functional.linear

    def call() -> torch.Tensor:
        y = fwd(x, w)
        dx, dw = torch.autograd.grad(y, (x, w), dy)
        return torch.cat((y.detach().reshape(-1), dx.reshape(-1), dw.reshape(-1)), out=out)

    return call


def triton_impl(op: str, inputs: Inputs, out: torch.Tensor, precision: str, shape: tuple[int, ...] = (),
                control: str | None = None) -> Impl:
    """envcheck's Triton kernel for ``op`` on the inputs (in the kernel's argument order), into ``out``; its
    workspace made here, untimed; ``control``: the run's positive control (model.CONTROLS)."""
    from envcheck.bench import kernels

    fn, xs = getattr(kernels, op), tuple(inputs.values())
    outs: tuple[torch.Tensor, ...] = (out,)
    more: tuple[object, ...] = ()  # the kernel's arguments after its outputs
    if op == "softmax_fwbw":
        outs = (out[:xs[0].shape[0]], out[xs[0].shape[0]:])  # y over dx, each judged
    elif op == "linear_fwbw":
        m, n, k = xs[0].shape[0], xs[1].shape[0], xs[0].shape[1]
        outs = (out[:m * n].view(m, n), out[m * n:].view(m + n, k))  # y, then dx over dW
    if spec(op).family == "reduce":
        more = (importlib.import_module("envcheck.bench.kernels.reduce").workspace(xs[0], spec(op).reduce_over),)
    elif op == "conv2d":
        more = (shape[6], precision)
    elif op in ("matmul", "linear_fwbw"):
        more = (precision,)
    elif op == "vector_add" and control == "vector_add_extra_bytes":
        from envcheck.bench.kernels.vector_add import extra_buffer

        more = (extra_buffer(xs[0]),)  # one per set of inputs: it rotates with them, L2 stays cold
    args = (*xs, *outs, *more)

    def call() -> torch.Tensor:
        fn(*args)
        return out

    return call


def triton_kernel(op: str, shape: tuple[int, ...], dtype: str, precision: str) -> str | None:
    """Which tile envcheck's Triton matmul ran at this shape, once it ran (kernels/tuning.py); None for the others."""
    if op != "matmul":
        return None
    matmul = importlib.import_module("envcheck.bench.kernels.matmul")  # the module, not the function
    tile = matmul.tuned_tile(*shape, torch_dtype(dtype), precision)
    return tile.label if tile is not None else None


def eager(op: str, shape: tuple[int, ...] = ()) -> Forward:
    """The out-of-place PyTorch function torch.compile traces (out= forms do not compile well): the forward of a
    forward + backward op (AOTAutograd compiles the backward); reductions flat."""
    import torch

    if spec(op).family == "reduce":
        dims = REDUCE_DIMS[spec(op).reduce_over]
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
        "layer_norm": lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, LAYER_NORM_EPS),
        "softmax_fwbw": lambda x: torch.softmax(x, dim=-1),
        "linear_fwbw": torch.nn.functional.linear,
    }[op]


def compiled_on_sets(op: str, sets: list[Inputs], shape: tuple[int, ...] = (),
                     outs: list[torch.Tensor] | None = None) -> list[Impl]:
    """``torch.compile`` of the eager op with static shapes, once for every set, bound to each set's inputs; Dynamo
    reset first (past ``cache_size_limit`` shapes of one code object it would fall back to eager silently)."""
    import torch

    with contextlib.suppress(Exception):  # a private API; resetting protects the measurement, it is not required
        torch._dynamo.reset()
    compiled = torch.compile(eager(op, shape), dynamic=False)
    if op == "softmax_fwbw":
        return [_softmax_fwbw(inputs, None, forward=compiled) for inputs in sets]
    if op == "linear_fwbw":
        return [_linear_fwbw(inputs, out, forward=compiled) for inputs, out in zip(sets, outs or [], strict=True)]
    return [functools.partial(compiled, *inputs.values()) for inputs in sets]


@contextlib.contextmanager
def tf32_matmul(precision: str) -> Iterator[None]:
    """cuBLAS's and cuDNN's TF32 switches set for ``precision`` (``fp32`` off, ``tf32`` on), restored after."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    if precision in ("fp32", "tf32"):
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
