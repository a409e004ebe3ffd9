"""Realistic kernel bugs, planted one at a time in place of envcheck's Triton kernels, for the
judge to catch through the worker's own path (tests/interpret_child.py, tests/test_judge.py).
Each is what a kernel author writes by mistake; each must fail its case at the ``--interpret``
suite's own shapes. ``install(name)`` replaces ``envcheck.bench.kernels.<op>``, where
``impls.triton_impl`` looks it up.
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


@dataclass(frozen=True)
class Plant:
    """A bug planted in ``op``'s kernel; ``applies(dtype, shape)``: where it changes the result (a
    16-bit accumulation leaves fp32 as shipped, a stride-2 bug the stride-1 convolutions)."""

    op: str
    fn: Callable[..., Any]
    applies: Callable[[str, tuple[int, ...]], bool] = lambda dtype, shape: True


def _fp16(dtype: str, shape: tuple[int, ...]) -> bool:
    return dtype == "fp16"


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
