"""The dtype check every kernel wrapper makes before any launch: a bad call is a one-line ValueError."""

from __future__ import annotations

import torch

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def one_dtype(op: str, names: str, *tensors: torch.Tensor, contiguous: bool = False) -> torch.dtype:
    """The one dtype, among fp32/fp16/bf16, of ``tensors`` (``names`` in the message); contiguous ones if asked."""
    if len({t.dtype for t in tensors}) != 1 or tensors[0].dtype not in DTYPES:
        raise ValueError(f"{op} needs {names} of one dtype among fp32/fp16/bf16, got "
                         f"{', '.join(str(t.dtype) for t in tensors)}")
    if contiguous and not all(t.is_contiguous() for t in tensors):
        raise ValueError(f"{op} needs contiguous tensors")
    return tensors[0].dtype
