"""2-D convolution, NCHW, as an implicit GEMM: no im2col buffer is ever written.

The output (N, K, P, Q) is a matrix product of M = N * P * Q output pixels by K filters over
the reduction C * R * R: each program computes a BLOCK_M x BLOCK_N tile of it with ``tl.dot``,
gathering the input patch of each (pixel, reduction index) on the fly (zero padding R // 2 by
masking), so the input is read from memory in place. Square kernels, one stride for both axes.

Precision as matmul's (kernels/matmul.py): fp32 in IEEE ("fp32") or TF32 ("tf32"), fp16 and
bf16 on tensor cores, always accumulated in fp32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from envcheck.bench.kernels.matmul import _PRECISIONS

_INT32_LIMIT = 2**31
PATHS: tuple[str, ...] = ("implicit_gemm",)
_BLOCK_M = 64
_BLOCK_K = 32


@triton.jit
def _conv2d_kernel(x_ptr, w_ptr, out_ptr, M, C, H, W, K, P, Q, CRR,
                   sxn, sxc, sxh, sxw, swk, swc, swr, sws, son, sok, sop, soq,
                   R: tl.constexpr, STRIDE: tl.constexpr, PAD: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   INPUT_PRECISION: tl.constexpr, UPCAST: tl.constexpr, INT64: tl.constexpr):
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    f = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    if INT64:
        m = m.to(tl.int64)
    n = m // (P * Q)
    pq = m % (P * Q)
    p = pq // Q
    q = pq % Q
    h0 = p * STRIDE - PAD
    w0 = q * STRIDE - PAD
    m_mask = m < M
    f_mask = f < K
    x_base = x_ptr + n * sxn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, CRR, BLOCK_K):
        j = start + tl.arange(0, BLOCK_K)
        c = j // (R * R)
        rs = j % (R * R)
        r = rs // R
        s = rs % R
        h = h0[:, None] + r[None, :]
        w = w0[:, None] + s[None, :]
        j_mask = j < CRR
        a_mask = m_mask[:, None] & j_mask[None, :] & (h >= 0) & (h < H) & (w >= 0) & (w < W)
        a = tl.load(x_base[:, None] + c[None, :] * sxc + h * sxh + w * sxw, mask=a_mask, other=0.0)
        b = tl.load(w_ptr + f[None, :] * swk + c[:, None] * swc + r[:, None] * swr + s[:, None] * sws,
                    mask=j_mask[:, None] & f_mask[None, :], other=0.0)
        if UPCAST:
            # Interpreter only: numpy has no bfloat16 (as in kernels/matmul.py).
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    offs = n[:, None] * son + f[None, :] * sok + p[:, None] * sop + q[:, None] * soq
    tl.store(out_ptr + offs, acc, mask=m_mask[:, None] & f_mask[None, :])


def path() -> str:
    return "implicit_gemm"


def output_size(h: int, w: int, r: int, stride: int) -> tuple[int, int]:
    """(P, Q) with padding r // 2 (as envcheck/ops.py counts it)."""
    pad = r // 2
    return (h + 2 * pad - r) // stride + 1, (w + 2 * pad - r) // stride + 1


def conv2d(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, stride: int, precision: str) -> torch.Tensor:
    """``out = conv2d(x, weight, stride=stride, padding=R // 2)`` for NCHW ``x`` (N, C, H, W) and
    ``weight`` (K, C, R, R), any strides; ``out`` is (N, K, P, Q). Returns ``out``."""
    if x.dim() != 4 or weight.dim() != 4 or weight.shape[1] != x.shape[1] or weight.shape[2] != weight.shape[3]:
        raise ValueError(f"conv2d needs x (N, C, H, W) and a square weight (K, C, R, R), got {tuple(x.shape)}, "
                         f"{tuple(weight.shape)}")
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"conv2d needs a positive integer stride, got {stride!r}")
    nb, c, h, w = x.shape
    k, _, r, _ = weight.shape
    p, q = output_size(h, w, r, stride)
    if out.shape != (nb, k, p, q):
        raise ValueError(f"conv2d of {tuple(x.shape)} by {tuple(weight.shape)} at stride {stride} needs out of "
                         f"{(nb, k, p, q)}, got {tuple(out.shape)}")
    if len({x.dtype, weight.dtype, out.dtype}) != 1 or x.dtype not in _PRECISIONS:
        raise ValueError(f"conv2d needs x, weight and out of one dtype among fp32/fp16/bf16, got "
                         f"{x.dtype}, {weight.dtype}, {out.dtype}")
    input_precision = _PRECISIONS[x.dtype].get(precision)
    if input_precision is None:
        raise ValueError(f"conv2d precision {precision!r} does not apply to {x.dtype}: use "
                         f"{' or '.join(_PRECISIONS[x.dtype])}")
    m = nb * p * q
    if m == 0 or k == 0:
        return out
    upcast = x.dtype == torch.bfloat16 and not x.is_cuda
    block_n = max(16, min(128, triton.next_power_of_2(k)))
    int64 = max(x.numel(), out.numel()) >= _INT32_LIMIT
    _conv2d_kernel[(triton.cdiv(m, _BLOCK_M), triton.cdiv(k, block_n))](
        x, weight, out, m, c, h, w, k, p, q, c * r * r, *x.stride(), *weight.stride(), *out.stride(),
        R=r, STRIDE=stride, PAD=r // 2, BLOCK_M=_BLOCK_M, BLOCK_N=block_n, BLOCK_K=_BLOCK_K,
        INPUT_PRECISION="ieee" if upcast else input_precision, UPCAST=upcast, INT64=int64,
        num_warps=4, num_stages=3)
    return out
