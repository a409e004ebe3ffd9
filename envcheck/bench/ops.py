"""What each benchmarked op is: bytes and FLOPs it must move and compute, its inputs, its three
implementations (PyTorch, envcheck's Triton kernel, ``torch.compile``) and its float64 reference.

The traffic model is the *minimum* a correct implementation must move (every input read once,
every output written once), so ``bytes / time`` is an achieved bandwidth that can be held
against the DRAM ceiling. FLOPs count the arithmetic a straightforward implementation does;
for the memory-bound ops they are informational (the ops are judged on bandwidth).

Shapes: ``(n,)`` for vector_add and relu, ``(rows, cols)`` for softmax and row_sum (reducing
over ``cols``), ``(M, N, K)`` for matmul (``a`` is M x K, ``b`` is K x N).

Torch is imported inside the functions that need it: the byte and FLOP model is plain Python
so the parent process (and the CPU tests) use it without importing torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

OPS = ("vector_add", "relu", "matmul", "softmax", "row_sum")
ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2}
MEMORY_BOUND = frozenset({"vector_add", "relu", "softmax", "row_sum"})

# FLOPs per element of softmax: max (1 compare), subtract the max (1), exp (1), sum (1 add),
# divide by the sum (1). Exp is counted as one operation, as roofline models usually do.
SOFTMAX_FLOPS_PER_ELEMENT = 5

# The float64 reference is compared in chunks of at most this many elements: a 2^28-element
# vector would need 2 GiB per float64 copy, more than a smaller GPU can spare beside the case.
REFERENCE_CHUNK_ELEMENTS = 1 << 24

Inputs = dict[str, Any]  # name -> torch.Tensor
Impl = Callable[[], Any]  # one call of the op; returns the output tensor


@dataclass(frozen=True)
class Traffic:
    """Minimum bytes moved to and from memory, and arithmetic done, by one call."""

    bytes: int
    flops: int


def _check_shape(op: str, shape: tuple[int, ...]) -> None:
    want = {"vector_add": 1, "relu": 1, "softmax": 2, "row_sum": 2, "matmul": 3}
    if op not in want:
        raise ValueError(f"unknown op {op!r} (known: {', '.join(OPS)})")
    if len(shape) != want[op] or any(int(d) <= 0 for d in shape):
        raise ValueError(f"{op} needs a shape of {want[op]} positive dimension(s), got {tuple(shape)}")


def traffic(op: str, shape: tuple[int, ...], dtype: str) -> Traffic:
    """Bytes and FLOPs of one call of ``op`` at ``shape`` in ``dtype``."""
    _check_shape(op, shape)
    size = ITEMSIZE[dtype]
    if op == "vector_add":
        (n,) = shape
        return Traffic(bytes=3 * n * size, flops=n)  # read x and y, write out; one add each
    if op == "relu":
        (n,) = shape
        return Traffic(bytes=2 * n * size, flops=n)  # read x, write out; one max each
    if op == "softmax":
        rows, cols = shape
        return Traffic(bytes=2 * rows * cols * size, flops=SOFTMAX_FLOPS_PER_ELEMENT * rows * cols)
    if op == "row_sum":
        rows, cols = shape
        return Traffic(bytes=(rows * cols + rows) * size, flops=rows * cols)
    m, n, k = shape
    return Traffic(bytes=(m * k + k * n + m * n) * size, flops=2 * m * n * k)


def working_set_bytes(op: str, shape: tuple[int, ...], dtype: str) -> int:
    """Bytes of the tensors one call touches (inputs + output): what could sit in L2.

    For these ops every byte is touched exactly once per call, so it equals the traffic.
    """
    return traffic(op, shape, dtype).bytes


def output_bytes(op: str, shape: tuple[int, ...], dtype: str) -> int:
    _check_shape(op, shape)
    size = ITEMSIZE[dtype]
    if op in ("vector_add", "relu"):
        return shape[0] * size
    if op == "softmax":
        return shape[0] * shape[1] * size
    if op == "row_sum":
        return shape[0] * size
    return shape[0] * shape[1] * size


def memory_needed_bytes(op: str, shape: tuple[int, ...], dtype: str) -> int:
    """Device memory one group of cases (same op, dtype, shape) needs at its peak.

    Inputs and the preallocated output, a second output for implementations that allocate
    their own (softmax in torch, torch.compile), and the float64 reference chunk with the
    float64 copies of the inputs it is computed from (bounded by ``REFERENCE_CHUNK_ELEMENTS``;
    matmul also holds ``b`` in float64 whole).
    """
    ws = working_set_bytes(op, shape, dtype)
    out = output_bytes(op, shape, dtype)
    chunk = min(REFERENCE_CHUNK_ELEMENTS, max(1, out // ITEMSIZE[dtype]))
    ref = 8 * 3 * chunk
    if op == "matmul":
        _, n, k = shape
        ref += 8 * k * n
    return ws + out + ref


def describe_size(shape: tuple[int, ...]) -> str:
    """``2^28 elements`` for vectors, ``4096x4096`` otherwise: how skip reasons name a size."""
    if len(shape) == 1:
        n = shape[0]
        if n & (n - 1) == 0:
            return f"2^{n.bit_length() - 1} elements"
        return f"{n} elements"
    return "x".join(str(d) for d in shape)


# --------------------------------------------------------------------------- tensors (torch inside)


def torch_dtype(dtype: str) -> Any:
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]


def make_inputs(op: str, shape: tuple[int, ...], dtype: str, device: str, generator: Any) -> Inputs:
    """Fresh random inputs (never zeros: a kernel that ignores its input must not pass).

    Standard normal values, drawn in float32 and rounded once to ``dtype``; the float64
    reference is computed from these rounded values, so input rounding never counts as error.
    Softmax gets ``randn * 4`` so rows have a real spread (a max-subtraction bug shows).
    Matmul inputs are scaled by 1/sqrt(K) so outputs stay O(1) and fp16 never overflows.
    """
    import torch

    _check_shape(op, shape)
    tdt = torch_dtype(dtype)

    def randn(*dims: int, scale: float = 1.0) -> Any:
        x = torch.randn(*dims, generator=generator, device=device, dtype=torch.float32)
        if scale != 1.0:
            x.mul_(scale)
        return x.to(tdt)

    if op == "vector_add":
        return {"x": randn(shape[0]), "y": randn(shape[0])}
    if op == "relu":
        return {"x": randn(shape[0])}
    if op == "softmax":
        return {"x": randn(*shape, scale=4.0)}
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

    _check_shape(op, shape)
    tdt = torch_dtype(dtype)
    if op in ("vector_add", "relu"):
        return torch.empty(shape[0], dtype=tdt, device=device)
    if op == "softmax":
        return torch.empty(*shape, dtype=tdt, device=device)
    if op == "row_sum":
        return torch.empty(shape[0], dtype=tdt, device=device)
    m, n, _ = shape
    return torch.empty(m, n, dtype=tdt, device=device)


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


def triton_impl(op: str, inputs: Inputs, out: Any, precision: str) -> Impl:
    """envcheck's Triton kernel for ``op`` (imports Triton: call inside the worker only)."""
    from envcheck.bench import kernels

    fn = getattr(kernels, op)
    if op == "vector_add":
        x, y = inputs["x"], inputs["y"]
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


def _eager(op: str) -> Callable[..., Any]:
    """The out-of-place PyTorch function torch.compile traces (out= forms do not compile well)."""
    import torch

    return {
        "vector_add": lambda x, y: x + y,
        "relu": torch.relu,
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "row_sum": lambda x: x.sum(dim=-1),
        "matmul": torch.matmul,
    }[op]


def compile_impl(op: str, inputs: Inputs) -> Impl:
    """``torch.compile`` of the eager op with static shapes; compiling happens on the first call.

    Dynamo's caches are reset first: every case compiles a function with the same code object,
    and after ``cache_size_limit`` shapes Dynamo would silently fall back to eager (or turn on
    dynamic shapes), measuring something other than a compiled kernel for this shape.
    """
    import torch

    try:
        torch._dynamo.reset()
    except Exception:  # noqa: BLE001 - a private API; resetting is an optimisation of correctness, not required
        pass
    compiled = torch.compile(_eager(op), dynamic=False)
    args = [inputs[k] for k in (("a", "b") if op == "matmul" else ("x", "y") if op == "vector_add" else ("x",))]
    return lambda: compiled(*args)


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


# --------------------------------------------------------------------------- the float64 reference


def reference_chunks(op: str, inputs: Inputs, chunk_elements: int = REFERENCE_CHUNK_ELEMENTS) -> Iterator[tuple[slice, Any]]:
    """``(slice, float64 reference)`` pieces covering the output along its first dimension.

    Computed on the inputs' device in float64 chunk by chunk, so a 2^28-element vector or a
    16384^2 matmul never needs its whole float64 output at once. Softmax and row_sum chunk
    whole rows (a row is never split); matmul chunks rows of ``a`` against all of ``b``.
    """
    import torch

    if op in ("vector_add", "relu"):
        x = inputs["x"]
        n = x.shape[0]
        step = max(1, chunk_elements)
        for lo in range(0, n, step):
            sl = slice(lo, min(n, lo + step))
            xd = x[sl].double()
            if op == "vector_add":
                yield sl, xd + inputs["y"][sl].double()
            else:
                yield sl, torch.clamp_min(xd, 0.0)
        return
    if op in ("softmax", "row_sum"):
        x = inputs["x"]
        rows, cols = x.shape
        step = max(1, chunk_elements // cols)
        for lo in range(0, rows, step):
            sl = slice(lo, min(rows, lo + step))
            xd = x[sl].double()
            yield sl, (torch.softmax(xd, dim=-1) if op == "softmax" else xd.sum(dim=-1))
        return
    a, b = inputs["a"], inputs["b"]
    m, k = a.shape
    n = b.shape[1]
    bd = b.double()
    step = max(1, chunk_elements // max(n, k))
    for lo in range(0, m, step):
        sl = slice(lo, min(m, lo + step))
        yield sl, a[sl].double() @ bd


def accumulation_length(op: str, shape: tuple[int, ...]) -> int:
    """How many terms each output element sums (K for matmul, cols for reductions, else 1)."""
    _check_shape(op, shape)
    if op == "matmul":
        return shape[2]
    if op in ("softmax", "row_sum"):
        return shape[1]
    return 1
