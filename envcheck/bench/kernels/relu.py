"""Element-wise ``out = relu(x)``: a read-one, write-one bandwidth probe, launched as vector_add is."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from envcheck.bench.kernels.checks import one_dtype
from envcheck.bench.kernels.vector_add import launch_config

_INT32_LIMIT = 2**31  # int64 offsets from this size on; module-level so a test can force them


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr, INT64: tl.constexpr):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    # fp32 compare: exact for every dtype, and right under the interpreter, which has no bf16 arithmetic.
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    zero = tl.zeros_like(x)
    # `x < 0` rather than max(x, 0): NaN compares false and passes through, as in torch.relu.
    tl.store(out_ptr + offsets, tl.where(x < zero, zero, x), mask=mask)


def relu(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out = max(x, 0)`` (NaN kept) for 1-D contiguous fp32/fp16/bf16 tensors; returns ``out``."""
    if x.dim() != 1 or out.shape != x.shape:
        raise ValueError(f"relu needs two 1-D tensors of one length, got {tuple(x.shape)}, {tuple(out.shape)}")
    one_dtype("relu", "x and out", x, out, contiguous=True)
    n = x.numel()
    if n == 0:
        return out
    block, warps = launch_config(n, x.element_size())
    _relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK_SIZE=block, INT64=n >= _INT32_LIMIT - block,
                                           num_warps=warps)
    return out
