"""A fused softmax + weighted sum in Triton, measured with ``envcheck bench``.

The kernel a neural-architecture-search framework writes for its mixed operations: per row,
the softmax of the architecture logits ``x`` weighs the candidates' values ``v``, and one
number comes out, ``out[i] = sum_j softmax(x[i])_j * v[i, j]``. The Triton kernel reads each
row once and never writes the softmax; the PyTorch fallback is what the framework runs where
Triton is missing. Measure both, on a GPU::

    envcheck bench examples/softmax_wsum.py

or on a CPU, with Triton's interpreter (small shapes: the interpreter runs the kernel in NumPy)::

    TRITON_INTERPRET=1 envcheck bench examples/softmax_wsum.py --quick

envcheck times both (GPU time by CUDA-graph replay, and launch time), keeps L2 cold, checks
each against the float64 reference at the precision used and against the fallback's own error,
holds GB/s against the memory ceilings, and writes a dated report that ``envcheck render``,
``diff`` and ``history`` read like any other.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from envcheck.userbench import Op


@triton.jit
def _softmax_wsum_kernel(x_ptr, v_ptr, out_ptr, rows, cols, stride_x, stride_v,
                         BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    c = tl.arange(0, BLOCK_COLS)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    x = tl.load(x_ptr + r[:, None] * stride_x + c[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    v = tl.load(v_ptr + r[:, None] * stride_v + c[None, :], mask=mask, other=0.0).to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.where(mask, tl.exp(x - m[:, None]), 0.0)  # rows past the end are all -inf: kept out
    out = tl.sum(e * v, axis=1) / tl.sum(e, axis=1)
    tl.store(out_ptr + r, out.to(out_ptr.dtype.element_ty), mask=r < rows)


def softmax_wsum_triton(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """One row per ~16 KiB of fp32 work: the whole row in registers (rows up to 16384 columns)."""
    rows, cols = x.shape
    out = torch.empty(rows, device=x.device, dtype=x.dtype)
    block_cols = triton.next_power_of_2(cols)
    block_rows = max(1, min(16, 4096 // block_cols))
    warps = 4 if block_rows * block_cols <= 4096 else 8
    _softmax_wsum_kernel[(triton.cdiv(rows, block_rows),)](x, v, out, rows, cols, x.stride(0), v.stride(0),
                                                          BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols,
                                                          num_warps=warps)
    return out


def softmax_wsum_torch(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The PyTorch fallback, as the framework writes it: softmax and product in fp32."""
    return (torch.softmax(x.float(), dim=-1) * v.float()).sum(dim=-1).to(x.dtype)


def reference(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (torch.softmax(x, dim=-1) * v).sum(dim=-1)  # envcheck passes float64 copies


def magnitude(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (torch.softmax(x, dim=-1) * v.abs()).sum(dim=-1)  # the scale of each row's rounding error


def inputs(shape: tuple[int, ...], dtype: torch.dtype, device: str, generator: torch.Generator):
    rows, cols = shape
    x = torch.randn(rows, cols, generator=generator, device=device) * 2.0
    v = torch.randn(rows, cols, generator=generator, device=device)
    return x.to(dtype), v.to(dtype)


def _bytes(shape: tuple[int, ...], dtype: str) -> int:
    rows, cols = shape
    size = 4 if dtype == "fp32" else 2
    return (2 * rows * cols + rows) * size  # x and v read once, out written once


def _flops(shape: tuple[int, ...], dtype: str) -> int:
    rows, cols = shape
    return 6 * rows * cols  # max, subtract, exp, sum, multiply, add per element


if torch.cuda.is_available():
    SHAPES = [(4096, 1024), (1000, 4097), (16384, 2048), (65536, 1024)]
    DTYPES = ["fp32", "fp16", "bf16"]
else:  # the interpreter: seconds, not hours
    SHAPES = [(64, 1000), (256, 512)]
    DTYPES = ["fp32", "fp16"]

SOFTMAX_WSUM = Op(
    name="softmax_wsum",
    impls={"torch": softmax_wsum_torch, "triton": softmax_wsum_triton},  # the first is the baseline
    reference=reference,
    magnitude=magnitude,
    inputs=inputs,
    shapes=SHAPES,
    dtypes=DTYPES,
    bytes=_bytes,
    flops=_flops,
    accumulation=lambda shape: shape[1],  # each output sums one row
    roundings=9,  # softmax's 8 (subtract, exp, divide, as envcheck counts them) and the product
)
