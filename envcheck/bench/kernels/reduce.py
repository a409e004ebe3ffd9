"""Sum and max of a 3-D tensor (a, b, c) over every axis, the inner axis or the two leading ones, in fp32.
``inner`` walks a block of rows (row_sum's blocks); ``lead`` reads (a * b, c) in column blocks with the rows in
chunks too (a few hundred columns alone leave SMs idle), ``all`` a flat vector in chunks: both write fp32 partials
to a ``workspace`` (made untimed) that a second stage reduces. No atomics: a result never depends on timing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from envcheck.bench.kernels.checks import one_dtype
from envcheck.bench.kernels.row_sum import _config as row_blocks

_INT32_LIMIT = 2**31
PATHS: tuple[str, ...] = ("inner", "lead", "all")
_HOWS = ("sum", "max")
_TARGET_PROGRAMS = 528  # programs stage one aims for: ~4 waves of a 132-SM GPU
_FLAT_BLOCK = 4096
_LEAD_BLOCK_B = 32
_LEAD_BLOCK_C = 128


@triton.jit
def _combine(acc, x, IS_MAX: tl.constexpr):
    if IS_MAX:
        return tl.maximum(acc, x)
    return acc + x


@triton.jit
def _finish(acc, axis: tl.constexpr, IS_MAX: tl.constexpr):
    if IS_MAX:
        return tl.max(acc, axis=axis)
    return tl.sum(acc, axis=axis)


@triton.jit
def _inner_kernel(x_ptr, out_ptr, rows, cols, stride_xr, IS_MAX: tl.constexpr,
                  BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, INT64: tl.constexpr):
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    if INT64:
        r = r.to(tl.int64)
    row_mask = r < rows
    x_rows = x_ptr + r[:, None] * stride_xr
    other = -float("inf") if IS_MAX else 0.0
    acc = tl.full([BLOCK_ROWS, BLOCK_COLS], other, tl.float32)
    for start in range(0, cols, BLOCK_COLS):
        c = start + tl.arange(0, BLOCK_COLS)
        mask = row_mask[:, None] & (c[None, :] < cols)
        acc = _combine(acc, tl.load(x_rows + c[None, :], mask=mask, other=other).to(tl.float32), IS_MAX)
    tl.store(out_ptr + r, _finish(acc, 1, IS_MAX), mask=row_mask)


@triton.jit
def _lead_kernel(x_ptr, out_ptr, B, C, chunk, IS_MAX: tl.constexpr,
                 BLOCK_B: tl.constexpr, BLOCK_C: tl.constexpr, INT64: tl.constexpr):
    """Rows [s * chunk, (s + 1) * chunk) of column block j of a (B, C) tensor into out[s, columns]."""
    j = tl.program_id(0)
    s = tl.program_id(1)
    c = j * BLOCK_C + tl.arange(0, BLOCK_C)
    col_mask = c < C
    lo = s * chunk
    other = -float("inf") if IS_MAX else 0.0
    acc = tl.full([BLOCK_B, BLOCK_C], other, tl.float32)
    for start in range(0, chunk, BLOCK_B):
        b = lo + start + tl.arange(0, BLOCK_B)
        if INT64:
            b = b.to(tl.int64)
        mask = ((b < B) & (b < lo + chunk))[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + b[:, None] * C + c[None, :], mask=mask, other=other).to(tl.float32)
        acc = _combine(acc, x, IS_MAX)
    tl.store(out_ptr + s * C + c, _finish(acc, 0, IS_MAX), mask=col_mask)


@triton.jit
def _flat_kernel(x_ptr, out_ptr, n, chunk, IS_MAX: tl.constexpr, BLOCK: tl.constexpr, INT64: tl.constexpr):
    """Elements [s * chunk, (s + 1) * chunk) of a flat tensor into out[s]."""
    lo = tl.program_id(0) * chunk
    if INT64:
        lo = lo.to(tl.int64)
    other = -float("inf") if IS_MAX else 0.0
    acc = tl.full([BLOCK], other, tl.float32)
    for start in range(0, chunk, BLOCK):
        i = lo + start + tl.arange(0, BLOCK)
        mask = (i < n) & (i < lo + chunk)
        acc = _combine(acc, tl.load(x_ptr + i, mask=mask, other=other).to(tl.float32), IS_MAX)
    tl.store(out_ptr + tl.program_id(0), _finish(acc, 0, IS_MAX))


def path(over: str) -> str:
    """The kernel path a reduction over ``over`` ("all", "inner", "lead") takes: one per kind."""
    if over not in PATHS:
        raise ValueError(f"reduce over {over!r}: use one of {', '.join(PATHS)}")
    return over


@functools.lru_cache(maxsize=256)
def _splits(length: int, column_blocks: int, block: int) -> tuple[int, int]:
    """(splits, chunk): ``length`` cut in chunks of whole blocks, splits x column blocks about _TARGET_PROGRAMS."""
    wanted = max(1, min(triton.cdiv(_TARGET_PROGRAMS, column_blocks), triton.cdiv(length, block)))
    chunk = triton.cdiv(triton.cdiv(length, wanted), block) * block
    return triton.cdiv(length, chunk), chunk


def _plan(shape: tuple[int, ...], over: str) -> tuple[int, int, int]:
    """(splits, chunk, columns) of stage one of the two-stage paths."""
    a, b, c = shape
    if over == "lead":
        return (*_splits(a * b, triton.cdiv(c, _LEAD_BLOCK_C), _LEAD_BLOCK_B), c)
    return (*_splits(a * b * c, 1, _FLAT_BLOCK), 1)


def workspace(x: torch.Tensor, over: str) -> torch.Tensor | None:
    """The fp32 partials a reduction of ``x`` over ``over`` needs (None for ``inner``)."""
    kind = path(over)
    if kind == "inner" or x.dim() != 3:
        return None
    splits, _, columns = _plan(tuple(x.shape), kind)
    return torch.empty(splits * columns, dtype=torch.float32, device=x.device)


def reduce(x: torch.Tensor, out: torch.Tensor, how: str, over: str,
           work: torch.Tensor | None = None) -> torch.Tensor:
    """``out`` = the ``how`` ("sum" or "max") of a contiguous 3-D fp32/fp16/bf16 ``x`` over ``over`` (out of 1,
    a * b or c elements, contiguous, of x's dtype). Returns ``out``."""
    if how not in _HOWS:
        raise ValueError(f"reduce how {how!r}: use sum or max")
    kind = path(over)
    if x.dim() != 3 or not x.is_contiguous():
        raise ValueError(f"reduce needs a contiguous 3-D x, got shape {tuple(x.shape)}, strides {x.stride()}")
    a, b, c = x.shape
    want = {"all": 1, "inner": a * b, "lead": c}[over]
    if out.numel() != want or not out.is_contiguous():
        raise ValueError(f"{how} over {over} axes of {tuple(x.shape)} needs a contiguous out of {want} "
                         f"element(s), got {tuple(out.shape)}")
    one_dtype("reduce", "x and out", x, out)
    if x.numel() == 0:
        raise ValueError(f"reduce needs a non-empty x, got shape {tuple(x.shape)}")
    is_max = how == "max"
    int64 = x.numel() >= _INT32_LIMIT
    if kind == "inner":
        rows, cols = a * b, c
        block_rows, block_cols, _ = row_blocks(rows, cols, x.element_size())
        _inner_kernel[(triton.cdiv(rows, block_rows),)](
            x, out, rows, cols, cols, IS_MAX=is_max, BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols, INT64=int64,
            num_warps=4)
        return out
    splits, chunk, columns = _plan((a, b, c), kind)
    if work is None:
        work = workspace(x, kind)
    if work is None or work.dtype != torch.float32 or work.numel() < splits * columns:
        raise ValueError(f"reduce over {over} of {tuple(x.shape)} needs an fp32 workspace of {splits * columns} "
                         "elements (reduce.workspace makes one)")
    if kind == "lead":
        blocks = triton.cdiv(c, _LEAD_BLOCK_C)
        _lead_kernel[(blocks, splits)](x, work, a * b, c, chunk, IS_MAX=is_max, BLOCK_B=_LEAD_BLOCK_B,
                                       BLOCK_C=_LEAD_BLOCK_C, INT64=int64, num_warps=4)
        _lead_kernel[(blocks, 1)](work, out, splits, c, splits, IS_MAX=is_max, BLOCK_B=_LEAD_BLOCK_B,
                                  BLOCK_C=_LEAD_BLOCK_C, INT64=False, num_warps=4)
        return out
    _flat_kernel[(splits,)](x, work, x.numel(), chunk, IS_MAX=is_max, BLOCK=_FLAT_BLOCK, INT64=int64, num_warps=8)
    _flat_kernel[(1,)](work, out, splits, splits, IS_MAX=is_max, BLOCK=1024, INT64=False, num_warps=4)
    return out


def _op(how: str, over: str) -> Callable[..., torch.Tensor]:
    def fn(x: torch.Tensor, out: torch.Tensor, work: torch.Tensor | None = None) -> torch.Tensor:
        return reduce(x, out, how, over, work)

    fn.__name__ = fn.__qualname__ = f"{how}_{over}"
    fn.__doc__ = f"``reduce(x, out, {how!r}, {over!r}, work)``."
    return fn


sum_all = _op("sum", "all")
sum_inner = _op("sum", "inner")
sum_lead = _op("sum", "lead")
max_all = _op("max", "all")
max_inner = _op("max", "inner")
max_lead = _op("max", "lead")
