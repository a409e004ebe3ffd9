"""Realistic kernel bugs, planted one at a time in place of envcheck's Triton kernels, for the
judge to catch through the worker's own path (tests/interpret_child.py, tests/test_judge.py on the
CPU, tests/test_judge_gpu.py on a GPU, tools/evidence/judge_fit.py for docs/judge.md's table).
Each is what a kernel author writes by mistake (a Triton kernel of its own, or the shipped one
called wrongly); each must fail its case at the ``--interpret`` and ``--quick`` suites' shapes
where it applies (``Plant.applies``). ``install(name)`` replaces ``envcheck.bench.kernels.<op>``,
where ``impls.triton_impl`` looks it up; ``restore(name)`` puts the shipped kernel back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from envcheck.bench import kernels

_real: dict[str, Callable[..., Any]] = {}


def real(op: str) -> Callable[..., Any]:
    if op not in _real:
        _real[op] = getattr(kernels, op)
    return _real[op]


@triton.jit
def _matmul_acc16(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float16)  # the bug: the running sum is fp16
    for k in range(0, K, BK):
        kk = k + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc, out_dtype=tl.float16)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_acc16(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str) -> torch.Tensor:
    """An fp16 matmul accumulating in fp16 (16-deep K tiles); other dtypes as shipped."""
    if a.dtype != torch.float16:
        return real("matmul")(a, b, out, precision)
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, 32), triton.cdiv(n, 32))
    _matmul_acc16[grid](a, b, out, m, n, k, *a.stride(), *b.stride(), *out.stride(), BM=32, BN=32, BK=16)
    return out


def linear_wrong_forward(x, w, dy, y, out, precision):
    """The forward reads one column of K short (an off-by-one); the gradients are right."""
    real("linear_fwbw")(x, w, dy, y, out, precision)
    real("matmul")(x[:, :-1], w[:, :-1].t(), y, precision)
    return out


def linear_dx_acc16(x, w, dy, y, out, precision):
    """dx = dy W accumulated in fp16; y and dW right."""
    real("linear_fwbw")(x, w, dy, y, out, precision)
    matmul_acc16(dy, w, out[: x.shape[0]], precision)
    return out


def softmax_wrong_forward(x, dy, y, out):
    """The forward's normaliser sums the row without its last column (an off-by-one in the sum
    y is divided by); dx, from the right y, is right. In torch: the bug needs no interpreter,
    so tests/test_judge.py also drives it through the worker in-process."""
    xf, dyf = x.float(), dy.float()
    e = torch.exp(xf - xf.amax(dim=-1, keepdim=True))
    right = e / e.sum(dim=-1, keepdim=True)
    out.copy_(right * (dyf - (right * dyf).sum(dim=-1, keepdim=True)))
    y.copy_(e / e[:, :-1].sum(dim=-1, keepdim=True))
    return out


@triton.jit
def _layer_norm(x_ptr, w_ptr, b_ptr, out_ptr, cols, eps, BLOCK: tl.constexpr, SAMPLE_VAR: tl.constexpr,
                EPS_OUTSIDE: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / cols
    centred = tl.where(mask, x - mean, 0.0)
    if SAMPLE_VAR:
        var = tl.sum(centred * centred, axis=0) / (cols - 1)  # the bug: Bessel's correction
    else:
        var = tl.sum(centred * centred, axis=0) / cols
    if EPS_OUTSIDE:
        rstd = 1.0 / (tl.sqrt(var) + eps)  # the bug: eps outside the square root
    else:
        rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * cols + c, centred * rstd * w + b, mask=mask)


def _layer_norm_bug(sample_var: bool, eps_outside: bool) -> Callable[..., Any]:
    def layer_norm(x, w, b, out):
        rows, cols = x.shape
        _layer_norm[(rows,)](x, w, b, out, cols, 1e-5, BLOCK=triton.next_power_of_2(cols), SAMPLE_VAR=sample_var,
                             EPS_OUTSIDE=eps_outside)
        return out

    return layer_norm


@triton.jit
def _softmax_online(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.zeros([BLOCK], tl.float32)  # the bug: the running max starts at 0, not -inf
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, axis=0)
    inv = 1.0 / tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * cols + c, tl.exp(x - row_max) * inv, mask=c < cols)


def softmax_max_from_zero(x, out):
    _softmax_online[(x.shape[0],)](x, out, x.shape[1], BLOCK=4096)
    return out


def max_from_zero(over: str) -> Callable[..., Any]:
    """A max reduction whose running max starts at 0 (what a sum's init gives, copied)."""
    def reduce_max(x, out, work):
        real(f"max_{over}")(x, out, work)
        return out.clamp_(min=0)  # as a 0-initialised accumulator ends: never below 0

    return reduce_max


def sum_all_dropped_block(x, out, work):
    """The flat reduction's loop stops before the partial last block of 4096."""
    flat = x.reshape(-1)
    full = flat.numel() // 4096 * 4096
    out.copy_(flat[:full].float().sum().to(out.dtype).reshape(out.shape))
    return out


@triton.jit
def _sum_acc16(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float16)  # the bug: partial sums kept in fp16
    for start in range(0, n, BLOCK):
        c = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + c, mask=c < n, other=0.0).to(tl.float16)
    tl.store(out_ptr, tl.sum(acc.to(tl.float32), axis=0))


def sum_all_acc16(x, out, work):
    if x.dtype != torch.float16:
        return real("sum_all")(x, out, work)
    _sum_acc16[(1,)](x, out, x.numel(), BLOCK=256)
    return out


def conv_last_column(x, weight, out, stride, precision):
    """At stride 2 the last output column is never computed (its width taken as W // 2): zero."""
    real("conv2d")(x, weight, out, stride, precision)
    if stride == 2:
        out[..., -1] = 0
    return out


def row_sum_drop_last(x, out):
    """The row loop stops one column short (an off-by-one in its bound)."""
    return real("row_sum")(x[:, :-1], out)


def row_sum_pairs_bf16(x, out):
    """bf16 rows summed two at a time in bf16, then in fp32: a reduction that loses precision."""
    if x.dtype != torch.bfloat16:
        return real("row_sum")(x, out)
    xf = torch.nn.functional.pad(x.float(), (0, x.shape[1] % 2))
    return out.copy_((xf[:, 0::2] + xf[:, 1::2]).to(torch.bfloat16).float().sum(dim=-1))


def vector_add_clamped_tail(x, y, out):
    """The last element's index is clamped one short: it gets its neighbour's sum."""
    real("vector_add")(x, y, out)
    out[-1] = x[-2] + y[-2]
    return out


def relu_tail(x, out):
    """A scalar epilogue for the tail copies its last element unclamped."""
    real("relu")(x, out)
    out[-1] = x[-1]
    return out


def matmul_dropped_k_tail(a, b, out, precision):
    """The K loop runs over whole 32-deep tiles only: a partial last tile is dropped."""
    k = a.shape[1] // 32 * 32
    return real("matmul")(a[:, :k], b[:k], out, precision)


def matmul_b_row_major(a, b, out, precision):
    """b read as row-major whatever its strides: an fp32 b is K-major (as nn.Linear keeps W)."""
    return real("matmul")(a, torch.as_strided(b, b.shape, (b.shape[1], 1)), out, precision)


def linear_w_not_transposed(x, w, dy, y, out, precision):
    """y = x W instead of x W^T: the same shape, and the same values of nothing, where W is square."""
    real("linear_fwbw")(x, w, dy, y, out, precision)
    if w.shape[0] == w.shape[1]:
        real("matmul")(x, w, y, precision)
    return out


def linear_dw_transposed(x, w, dy, y, out, precision):
    """dW = x^T dy instead of dy^T x, written where dW goes (it fits where W is square)."""
    real("linear_fwbw")(x, w, dy, y, out, precision)
    if w.shape[0] == w.shape[1]:
        real("matmul")(x.t().contiguous(), dy, out[x.shape[0]:], precision)
    return out


def softmax_fwbw_dx_no_sum(x, dy, y, out):
    """dx = y dy: the backward forgets the row's sum of y dy."""
    real("softmax_fwbw")(x, dy, y, out)
    out.copy_(y.float() * dy.float())
    return out


def layer_norm_wrong_eps(x, w, b, out):
    """The shipped kernel called with another framework's eps (1e-6)."""
    return real("layer_norm")(x, w, b, out, eps=1e-6)


def layer_norm_one_pass(x, w, b, out):
    """The variance as E[x^2] - E[x]^2 in fp32, which cancels on rows far from zero."""
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    var = (xf * xf).mean(dim=-1, keepdim=True) - mean * mean
    return out.copy_((xf - mean) * torch.rsqrt(var.clamp_min(0) + 1e-5) * w.float() + b.float())


def conv_clamped_border(x, weight, out, stride, precision):
    """The border reads the edge pixel again where it should read zero padding."""
    pad = weight.shape[2] // 2
    xp = torch.nn.functional.pad(x.float(), (pad, pad, pad, pad), mode="replicate")
    return out.copy_(torch.nn.functional.conv2d(xp, weight.float(), stride=stride))


def conv_flipped_weight(x, weight, out, stride, precision):
    """A convolution in the textbook sense: the filter flipped, where frameworks correlate."""
    return real("conv2d")(x, weight.flip(-1, -2).contiguous(), out, stride, precision)


def sum_inner_drop_last(x, out, work):
    """The inner loop stops one element short."""
    return out.copy_(x[..., :-1].float().sum(dim=-1).reshape(-1))


def sum_lead_drop_last(x, out, work):
    """The leading rows' loop stops one row short."""
    return out.copy_(x.reshape(-1, x.shape[-1])[:-1].float().sum(dim=0))


def max_lead_drop_last(x, out, work):
    """The leading rows' loop stops one row short (where the exact inputs keep each column's max)."""
    return out.copy_(x.reshape(-1, x.shape[-1])[:-1].amax(dim=0))


@dataclass(frozen=True)
class Plant:
    """A bug planted in ``op``'s kernel; ``applies(dtype, shape)``: where it changes the result (a
    16-bit accumulation leaves fp32 as shipped, a stride-2 bug the stride-1 convolutions)."""

    op: str
    fn: Callable[..., Any]
    applies: Callable[[str, tuple[int, ...]], bool] = lambda dtype, shape: True


def _fp16(dtype: str, shape: tuple[int, ...]) -> bool:
    return dtype == "fp16"


def _only(dtype: str) -> Callable[[str, tuple[int, ...]], bool]:
    return lambda d, shape: d == dtype


def _square_w(dtype: str, shape: tuple[int, ...]) -> bool:
    return shape[1] == shape[2]


PLANTED: dict[str, Plant] = {
    "linear_wrong_forward": Plant("linear_fwbw", linear_wrong_forward),
    "linear_dx_acc16": Plant("linear_fwbw", linear_dx_acc16, _fp16),
    "softmax_wrong_forward": Plant("softmax_fwbw", softmax_wrong_forward),
    "layer_norm_eps_outside": Plant("layer_norm", _layer_norm_bug(False, True)),
    "layer_norm_sample_var": Plant("layer_norm", _layer_norm_bug(True, False)),
    "softmax_max_from_zero": Plant("softmax", softmax_max_from_zero),
    "max_inner_from_zero": Plant("max_inner", max_from_zero("inner")),
    "max_all_from_zero": Plant("max_all", max_from_zero("all")),
    "sum_all_dropped_block": Plant("sum_all", sum_all_dropped_block),
    "sum_all_acc16": Plant("sum_all", sum_all_acc16, _fp16),
    "conv_last_column": Plant("conv2d", conv_last_column, lambda dtype, shape: shape[6] == 2),
    "matmul_acc16": Plant("matmul", matmul_acc16, _fp16),
    "matmul_dropped_k_tail": Plant("matmul", matmul_dropped_k_tail, lambda dtype, shape: shape[2] % 32 != 0),
    "matmul_b_row_major": Plant("matmul", matmul_b_row_major, _only("fp32")),
    "row_sum_drop_last": Plant("row_sum", row_sum_drop_last),
    "row_sum_pairs_bf16": Plant("row_sum", row_sum_pairs_bf16, _only("bf16")),
    "vector_add_clamped_tail": Plant("vector_add", vector_add_clamped_tail),
    "relu_tail": Plant("relu", relu_tail),
    "linear_w_not_transposed": Plant("linear_fwbw", linear_w_not_transposed, _square_w),
    "linear_dw_transposed": Plant("linear_fwbw", linear_dw_transposed, _square_w),
    "softmax_fwbw_dx_no_sum": Plant("softmax_fwbw", softmax_fwbw_dx_no_sum),
    "layer_norm_wrong_eps": Plant("layer_norm", layer_norm_wrong_eps),
    "layer_norm_one_pass": Plant("layer_norm", layer_norm_one_pass, _only("fp32")),
    "conv_clamped_border": Plant("conv2d", conv_clamped_border),
    "conv_flipped_weight": Plant("conv2d", conv_flipped_weight),
    "sum_inner_drop_last": Plant("sum_inner", sum_inner_drop_last),
    "sum_lead_drop_last": Plant("sum_lead", sum_lead_drop_last),
    "max_lead_drop_last": Plant("max_lead", max_lead_drop_last),
}


def install(name: str) -> str:
    """Plant bug ``name`` in place of its op's kernel; returns the op."""
    plant = PLANTED[name]
    for dep in ("matmul", "linear_fwbw", plant.op):
        real(dep)
    if plant.op.startswith("max"):
        real(f"max_{plant.op.split('_')[-1]}")
    setattr(kernels, plant.op, plant.fn)
    return plant.op


def restore(name: str) -> None:
    """Put the shipped kernel back in place of bug ``name``."""
    op = PLANTED[name].op
    setattr(kernels, op, real(op))
