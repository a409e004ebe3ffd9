"""Element-wise ``out = x + y``: the bandwidth probe (3 bytes moved per element and dtype byte).

The launch config is a fixed function of the size, not ``@triton.autotune``: autotuning adds a dictionary-keyed
dispatch to every launch, the very cost a benchmark measures.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from envcheck.bench.kernels.checks import one_dtype

_INT32_LIMIT = 2**31  # int64 offsets from this size on; module-level so a test can force them

# The diff's positive control (``run --control vector_add_extra_bytes``): the kernel also reads and adds a
# zero buffer of this share of its elements, 3.12 bytes moved instead of 3: about 4% slower, the same result.
EXTRA_SHARE = 0.12


@triton.jit
def _vector_add_kernel(x_ptr, y_ptr, out_ptr, n, extra_ptr, n_extra, BLOCK_SIZE: tl.constexpr,
                       INT64: tl.constexpr, EXTRA: tl.constexpr):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    # Add in fp32 and round once on store, as torch does for fp16/bf16 (free: memory-bound).
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    if EXTRA:
        x += tl.load(extra_ptr + offsets, mask=offsets < n_extra, other=0.0).to(tl.float32)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def launch_config(n: int, element_size: int) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for ``n`` elements of ``element_size`` bytes (relu's too): 4 KiB of each input
    per program, one 16-byte load per thread at 8 warps; small tensors get 4 warps, more programs per byte."""
    return 4096 // element_size, 8 if n * element_size >= 1 << 22 else 4


def extra_buffer(x: torch.Tensor) -> torch.Tensor:
    """The positive control's zero-filled extra input for ``x`` (``EXTRA_SHARE`` of its elements)."""
    return torch.zeros(max(1, math.ceil(x.numel() * EXTRA_SHARE)), dtype=x.dtype, device=x.device)


def vector_add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
    """``out = x + y`` for 1-D contiguous tensors of one dtype (fp32, fp16 or bf16); returns ``out``.
    ``extra``: the positive control's zero buffer (``extra_buffer``), read and added as well."""
    if x.dim() != 1 or y.shape != x.shape or out.shape != x.shape:
        raise ValueError(f"vector_add needs three 1-D tensors of one length, got {tuple(x.shape)}, "
                         f"{tuple(y.shape)}, {tuple(out.shape)}")
    one_dtype("vector_add", "x, y and out", x, y, out, contiguous=True)
    n = x.numel()
    if n == 0:
        return out
    block, warps = launch_config(n, x.element_size())
    _vector_add_kernel[(triton.cdiv(n, block),)](
        x, y, out, n, extra if extra is not None else x, extra.numel() if extra is not None else 0,
        BLOCK_SIZE=block, INT64=n >= _INT32_LIMIT - block, EXTRA=extra is not None, num_warps=warps)
    return out
