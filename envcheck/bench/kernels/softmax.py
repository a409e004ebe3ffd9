"""Row softmax over the last dim of a 2-D tensor, numerically stable, in fp32. Rows up to
``_MAX_SINGLE_BLOCK_COLS`` sit in one register tile (read once, short rows packed several to a program); longer
ones take an online softmax (running max and rescaled sum, Milakov & Gimelshein 2018), reading the row twice.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from envcheck.bench.kernels.checks import one_dtype

# Longest row held in one tile: 32768 fp32 values over 16 warps, 64 per thread, spill no registers on sm_80/90.
_MAX_SINGLE_BLOCK_COLS = 32768
_ONLINE_BLOCK_COLS = 4096  # columns per loop step of the online kernel
_INT32_LIMIT = 2**31  # int64 offsets from this size on; module-level so a test can force them
PATHS: tuple[str, ...] = ("tile", "online")


def path(cols: int) -> str:
    """The kernel a row of ``cols`` takes: ``tile`` up to _MAX_SINGLE_BLOCK_COLS, else ``online``."""
    return "tile" if cols <= _MAX_SINGLE_BLOCK_COLS else "online"


@triton.jit
def _softmax_tile_kernel(x_ptr, out_ptr, rows, cols, stride_xr, stride_xc, stride_or, stride_oc,
                         BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, INT64: tl.constexpr):
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    c = tl.arange(0, BLOCK_COLS)
    if INT64:
        r = r.to(tl.int64)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    # -inf padding drops out of both the max and the sum (exp(-inf) = 0).
    x = tl.load(x_ptr + r[:, None] * stride_xr + c[None, :] * stride_xc, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = e * (1.0 / tl.sum(e, axis=1))[:, None]
    tl.store(out_ptr + r[:, None] * stride_or + c[None, :] * stride_oc, y, mask=mask)


@triton.jit
def _softmax_online_kernel(x_ptr, out_ptr, cols, stride_xr, stride_xc, stride_or, stride_oc,
                           BLOCK_COLS: tl.constexpr, INT64: tl.constexpr):
    row = tl.program_id(0)
    if INT64:
        row = row.to(tl.int64)
    x_row = x_ptr + row * stride_xr
    out_row = out_ptr + row * stride_or
    # Per-lane running max and sum, merged across lanes once at the end.
    m = tl.full([BLOCK_COLS], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_COLS], tl.float32)
    for start in range(0, cols, BLOCK_COLS):
        c = start + tl.arange(0, BLOCK_COLS)
        x = tl.load(x_row + c * stride_xc, mask=c < cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # A lane that has seen only -inf keeps m_new = -inf, and exp(-inf - -inf) is NaN: count 0.
        seen = m_new > -float("inf")
        s = s * tl.where(seen, tl.exp(m - m_new), 0.0) + tl.where(seen, tl.exp(x - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(tl.where(m > -float("inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    inv = 1.0 / row_sum
    for start in range(0, cols, BLOCK_COLS):
        c = start + tl.arange(0, BLOCK_COLS)
        mask = c < cols
        x = tl.load(x_row + c * stride_xc, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_row + c * stride_oc, tl.exp(x - row_max) * inv, mask=mask)


def row_tile(rows: int, cols: int, values: int) -> tuple[int, int, int]:
    """(BLOCK_ROWS, BLOCK_COLS, num_warps) of a kernel holding a row in one register tile: short rows packed
    to about ``values`` per program, never past the rows there are (layer_norm's and softmax_fwbw's too)."""
    block_cols = triton.next_power_of_2(cols)
    block_rows = max(1, min(values // block_cols, triton.next_power_of_2(rows)))
    tile = block_rows * block_cols
    warps = 4 if tile <= 2048 else 8 if tile <= 8192 else 16
    return block_rows, block_cols, warps


tile_config = functools.lru_cache(maxsize=256)(functools.partial(row_tile, values=4096))


def softmax(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out = softmax(x, dim=-1)`` for a 2-D fp32/fp16/bf16 tensor of any strides, in fp32; returns ``out``."""
    if x.dim() != 2 or out.shape != x.shape:
        raise ValueError(f"softmax needs x and out of one 2-D shape, got {tuple(x.shape)}, {tuple(out.shape)}")
    one_dtype("softmax", "x and out", x, out)
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        return out
    sxr, sxc = x.stride()
    sor, soc = out.stride()
    int64 = x.numel() >= _INT32_LIMIT or max(sxr, sor) * rows >= _INT32_LIMIT
    if path(cols) == "tile":
        block_rows, block_cols, warps = tile_config(rows, cols)
        _softmax_tile_kernel[(triton.cdiv(rows, block_rows),)](
            x, out, rows, cols, sxr, sxc, sor, soc,
            BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols, INT64=int64, num_warps=warps)
    else:
        _softmax_online_kernel[(rows,)](
            x, out, cols, sxr, sxc, sor, soc, BLOCK_COLS=_ONLINE_BLOCK_COLS, INT64=int64, num_warps=8)
    return out
