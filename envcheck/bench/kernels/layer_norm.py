"""Layer norm over the last dim of a 2-D tensor (forward, with weight and bias), fp32 arithmetic.

Each row sits in one register tile (read once, written once); the variance is of the centred values, not
E[x^2] - E[x]^2, which cancels catastrophically when the mean is large. Rows past ``MAX_COLS`` are refused.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from envcheck.bench.kernels.checks import one_dtype
from envcheck.bench.kernels.softmax import tile_config

MAX_COLS = 32768
EPS = 1e-5  # torch.nn.functional.layer_norm's default
_INT32_LIMIT = 2**31
PATHS: tuple[str, ...] = ("tile",)


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, rows, cols, stride_xr, stride_or, eps,
                       BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, INT64: tl.constexpr):
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    c = tl.arange(0, BLOCK_COLS)
    if INT64:
        r = r.to(tl.int64)
    col_mask = c < cols
    mask = (r[:, None] < rows) & col_mask[None, :]
    x = tl.load(x_ptr + r[:, None] * stride_xr + c[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / cols
    centred = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(centred * centred, axis=1) / cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + c, mask=col_mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + c, mask=col_mask, other=0.0).to(tl.float32)
    y = centred * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(out_ptr + r[:, None] * stride_or + c[None, :], y, mask=mask)


def path(cols: int) -> str:
    """The kernel path a row of ``cols`` takes (one: a register tile)."""
    if not 0 < cols <= MAX_COLS:
        raise ValueError(f"layer_norm takes rows of 1 to {MAX_COLS} columns, got {cols}")
    return "tile"


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor,
               eps: float = EPS) -> torch.Tensor:
    """``out = layer_norm(x, (cols,), weight, bias, eps)`` for a 2-D fp32/fp16/bf16 ``x`` whose
    rows are contiguous; weight and bias of shape (cols,), all of one dtype. Returns ``out``."""
    if x.dim() != 2 or out.shape != x.shape or weight.shape != (x.shape[1],) or bias.shape != (x.shape[1],):
        raise ValueError(f"layer_norm needs x and out of one 2-D shape and weight, bias of (cols,), got "
                         f"{tuple(x.shape)}, {tuple(out.shape)}, {tuple(weight.shape)}, {tuple(bias.shape)}")
    one_dtype("layer_norm", "x, weight, bias and out", x, weight, bias, out)
    if x.stride(1) != 1 or out.stride(1) != 1 or not weight.is_contiguous() or not bias.is_contiguous():
        raise ValueError("layer_norm needs rows of unit column stride")
    rows, cols = x.shape
    if rows == 0:
        return out
    path(cols)
    block_rows, block_cols, warps = tile_config(rows, cols)
    int64 = max(x.stride(0), out.stride(0)) * rows >= _INT32_LIMIT
    _layer_norm_kernel[(triton.cdiv(rows, block_rows),)](
        x, weight, bias, out, rows, cols, x.stride(0), out.stride(0), eps,
        BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols, INT64=int64, num_warps=warps)
    return out
