"""Forward and backward of a linear layer without bias, as envcheck's Triton matmul runs them: x (M, K), W (N, K)
(nn.Linear's layout), dy (M, N); y = x W^T, dx = dy W and dW = dy^T x, each through ``kernels.matmul``.
"""

from __future__ import annotations

import torch

from envcheck.bench.kernels.matmul import matmul

PATHS: tuple[str, ...] = ("matmul",)


def path() -> str:
    return "matmul"


def linear_fwbw(x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor, y: torch.Tensor, out: torch.Tensor,
                precision: str) -> torch.Tensor:
    """y = x W^T, then out[:M] = dy W and out[M:] = dy^T x; returns ``out``."""
    if x.dim() != 2 or w.dim() != 2 or dy.dim() != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"linear_fwbw needs x (M, K), w (N, K) and dy (M, N), got {tuple(x.shape)}, "
                         f"{tuple(w.shape)}, {tuple(dy.shape)}")
    m, k = x.shape
    n = w.shape[0]
    if dy.shape != (m, n) or y.shape != (m, n) or out.shape != (m + n, k):
        raise ValueError(f"linear_fwbw needs dy and y of ({m}, {n}) and out of ({m + n}, {k}), got "
                         f"{tuple(dy.shape)}, {tuple(y.shape)}, {tuple(out.shape)}")
    matmul(x, w.t(), y, precision)
    matmul(dy, w, out[:m], precision)
    matmul(dy.t(), x, out[m:], precision)
    return out
