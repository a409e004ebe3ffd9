"""Softmax forward and backward in one kernel: y = softmax(x) and dx = y * (dy - sum(y * dy)) over the last dim.

Fused, each row read once (x, dy) and written once (y, dx), the minimum traffic (autograd's two kernels read y
again); the row sits in one register tile, so rows are limited to ``MAX_COLS``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from envcheck.bench.kernels.checks import one_dtype
from envcheck.bench.kernels.softmax import row_tile

MAX_COLS = 32768
_INT32_LIMIT = 2**31
PATHS: tuple[str, ...] = ("tile",)


@triton.jit
def _softmax_fwbw_kernel(x_ptr, dy_ptr, y_ptr, dx_ptr, rows, cols, stride_r,
                         BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, INT64: tl.constexpr):
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    c = tl.arange(0, BLOCK_COLS)
    if INT64:
        r = r.to(tl.int64)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    offs = r[:, None] * stride_r + c[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = e * (1.0 / tl.sum(e, axis=1))[:, None]
    dot = tl.sum(y * dy, axis=1)
    dx = y * (dy - dot[:, None])
    tl.store(y_ptr + offs, y, mask=mask)
    tl.store(dx_ptr + offs, dx, mask=mask)


def path(cols: int) -> str:
    """The kernel path a row of ``cols`` takes (one: a register tile)."""
    if not 0 < cols <= MAX_COLS:
        raise ValueError(f"softmax_fwbw takes rows of 1 to {MAX_COLS} columns, got {cols}")
    return "tile"


def softmax_fwbw(x: torch.Tensor, dy: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``y = softmax(x, -1)`` and ``out = dx`` in fp32, for contiguous 2-D fp32/fp16/bf16 tensors of one shape."""
    if x.dim() != 2 or not (x.shape == dy.shape == y.shape == out.shape):
        raise ValueError(f"softmax_fwbw needs x, dy, y and out of one 2-D shape, got {tuple(x.shape)}, "
                         f"{tuple(dy.shape)}, {tuple(y.shape)}, {tuple(out.shape)}")
    one_dtype("softmax_fwbw", "tensors", x, dy, y, out, contiguous=True)
    rows, cols = x.shape
    if rows == 0:
        return out
    path(cols)
    block_rows, block_cols, warps = row_tile(rows, cols, values=2048)
    _softmax_fwbw_kernel[(triton.cdiv(rows, block_rows),)](
        x, dy, y, out, rows, cols, cols, BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols,
        INT64=x.numel() >= _INT32_LIMIT, num_warps=warps)
    return out
