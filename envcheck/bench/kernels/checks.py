"""The dtype check every kernel wrapper makes before any launch: a bad call is a one-line ValueError."""

from __future__ import annotations

import torch

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def one_dtype(op: str, names: str, *tensors: torch.Tensor, contiguous: bool = False) -> torch.dtype:
    """The one dtype, among fp32/fp16/bf16, of ``tensors`` (``names`` in the message); contiguous ones if asked.
    One pass on the good path: it runs in every launch a benchmark times."""
    dtype = tensors[0].dtype
    ok = dtype in DTYPES
    for t in tensors:
        ok = ok and t.dtype == dtype and (not contiguous or t.is_contiguous())
    if ok:
        return dtype
    if dtype not in DTYPES or any(t.dtype != dtype for t in tensors):
        raise ValueError(f"{op} needs {names} of one dtype among fp32/fp16/bf16, got "
                         f"{', '.join(str(t.dtype) for t in tensors)}")
    raise ValueError(f"{op} needs contiguous tensors")
