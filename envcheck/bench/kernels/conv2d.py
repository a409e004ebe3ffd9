"""2-D convolution, NCHW, as an implicit GEMM (no im2col buffer): M = N * P * Q pixels by K filters over C * R * R,
a tile per program with ``tl.dot``, each input patch gathered in place (zero padding R // 2 by masking). Square
kernels, one stride; precisions as matmul's, accumulated in fp32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from envcheck.bench.kernels.matmul import dot_precision
from envcheck.ops import OPS

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
    p, q = OPS["conv2d"].conv_output((nb, c, h, w, k, r, stride))
    if out.shape != (nb, k, p, q):
        raise ValueError(f"conv2d of {tuple(x.shape)} by {tuple(weight.shape)} at stride {stride} needs out of "
                         f"{(nb, k, p, q)}, got {tuple(out.shape)}")
    ip = dot_precision("conv2d", "x, weight and out", precision, x, weight, out)
    m = nb * p * q
    if m == 0 or k == 0:
        return out
    upcast = x.dtype == torch.bfloat16 and not x.is_cuda
    block_n = max(16, min(128, triton.next_power_of_2(k)))
    int64 = max(x.numel(), out.numel()) >= _INT32_LIMIT
    _conv2d_kernel[(triton.cdiv(m, _BLOCK_M), triton.cdiv(k, block_n))](
        x, weight, out, m, c, h, w, k, p, q, c * r * r, *x.stride(), *weight.stride(), *out.stride(),
        R=r, STRIDE=stride, PAD=r // 2, BLOCK_M=_BLOCK_M, BLOCK_N=block_n, BLOCK_K=_BLOCK_K,
        INPUT_PRECISION="ieee" if upcast else ip, UPCAST=upcast, INT64=int64,
        num_warps=4, num_stages=3)
    return out
