"""Row sum over the last dim of a 2-D tensor, accumulated in fp32 (like torch.sum(x, dim=-1)).

A program walks the columns of a block of rows into a 2-D fp32 accumulator reduced once at the end. Rows are
not split across programs (atomics would make results order-dependent, a scratch buffer is an allocation).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from envcheck.bench.kernels.checks import one_dtype

_INT32_LIMIT = 2**31  # int64 offsets from this size on; module-level so a test can force them


@triton.jit
def _row_sum_kernel(x_ptr, out_ptr, rows, cols, stride_xr, stride_xc, stride_o,
                    BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, INT64: tl.constexpr):
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    if INT64:
        r = r.to(tl.int64)
    row_mask = r < rows
    x_rows = x_ptr + r[:, None] * stride_xr
    acc = tl.zeros([BLOCK_ROWS, BLOCK_COLS], tl.float32)
    for start in range(0, cols, BLOCK_COLS):
        c = start + tl.arange(0, BLOCK_COLS)
        mask = row_mask[:, None] & (c[None, :] < cols)
        acc += tl.load(x_rows + c[None, :] * stride_xc, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + r * stride_o, tl.sum(acc, axis=1), mask=row_mask)


@functools.lru_cache(maxsize=256)
def _config(rows: int, cols: int, element_size: int) -> tuple[int, int, int]:
    """(BLOCK_ROWS, BLOCK_COLS, num_warps): ~8 KiB per loop step, enough programs to fill the GPU."""
    block_cols = min(triton.next_power_of_2(max(cols, 1)), 8192 // element_size)
    block_rows = max(1, min(8192 // element_size // block_cols, triton.next_power_of_2(rows)))
    # Prefer more programs over fatter ones while the grid would not cover ~4 waves of 132 SMs.
    while block_rows > 1 and triton.cdiv(rows, block_rows) < 528:
        block_rows //= 2
    warps = 4 if block_rows * block_cols * element_size <= 4096 else 8
    return block_rows, block_cols, warps


def row_sum(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out = x.sum(dim=-1)`` of x's dtype for a 2-D fp32/fp16/bf16 x of any strides, summed in fp32."""
    if x.dim() != 2 or out.dim() != 1 or out.shape[0] != x.shape[0]:
        raise ValueError(f"row_sum needs x of shape (rows, cols) and out of shape (rows,), got "
                         f"{tuple(x.shape)}, {tuple(out.shape)}")
    one_dtype("row_sum", "x and out", x, out)
    rows, cols = x.shape
    if rows == 0:
        return out
    sxr, sxc = x.stride()
    block_rows, block_cols, warps = _config(rows, cols, x.element_size())
    int64 = x.numel() >= _INT32_LIMIT or sxr * rows >= _INT32_LIMIT or out.stride(0) * rows >= _INT32_LIMIT
    _row_sum_kernel[(triton.cdiv(rows, block_rows),)](
        x, out, rows, cols, sxr, sxc, out.stride(0),
        BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols, INT64=int64, num_warps=warps)
    return out
