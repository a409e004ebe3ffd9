"""Float64 references of the first users' workloads (issue 22), chunk by chunk, with the
magnitude each output element's rounding error scales with (accuracy.py says how both are used).

- reductions: the sum or max in float64 over the op's axes; mag is the same reduction of |x|
  (a max is exact: its error must be zero, and the scale is only there to read it);
- layer_norm: (x - mean) rstd w + b over row chunks; mag = rstd |w| (|x - mean| + mean|x|) + |b|:
  an error in the mean moves every element of the row by up to K u mean|x| rstd |w|, however
  close the element is to the mean;
- conv2d: torch's float64 convolution over batch chunks; mag = the convolution of |x| by |w|;
- softmax_fwbw: y = softmax(x) over dx = y (dy - sum(y dy)) (two named chunks per row chunk,
  judged apart); mag = y (as softmax's) and y (|dy| + sum(y |dy|));
- linear_fwbw: y = x W^T, dx = dy W and dW = dy^T x, flattened one after the other (three
  named chunks, judged apart); mag = |x| |W|^T, |dy| |W| and |dy|^T |x|.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from envcheck.ops import spec

LAYER_NORM_EPS = 1e-5
OPS: frozenset[str] = frozenset({"conv2d", "layer_norm", "softmax_fwbw", "linear_fwbw",
                                 *(f"{how}_{over}" for how in ("sum", "max") for over in ("all", "inner", "lead"))})


def slices(n: int, per_item: int, chunk_elements: int) -> Iterator[slice]:
    """Slices of a first dimension of ``n`` items of ``per_item`` elements each, about
    ``chunk_elements`` elements a slice and never less than one item (a row is never split)."""
    step = max(1, chunk_elements // max(1, per_item))
    for lo in range(0, n, step):
        yield slice(lo, min(n, lo + step))


def chunks(op: str, inputs: dict[str, Any], shape: tuple[int, ...], chunk_elements: int,
           ref_chunk: Any) -> Iterator[Any]:
    """``ref_chunk(rows, ref, mag)`` pieces covering ``op``'s output along its first dimension."""
    import torch

    s = spec(op)
    if s.family == "reduce":
        xd = inputs["x"].double()
        dims = {"all": (0, 1, 2), "inner": (2,), "lead": (0, 1)}[s.reduce_over]
        if op.startswith("sum"):
            ref, mag = xd.sum(dim=dims), xd.abs().sum(dim=dims)
        else:
            ref, mag = xd.amax(dim=dims), xd.abs().amax(dim=dims)
        yield ref_chunk(slice(0, ref.numel()), ref.reshape(-1), mag.reshape(-1))
        return
    if op in ("layer_norm", "softmax_fwbw"):
        x = inputs["x"]
        rows = x.shape[0]
        for sl in slices(rows, x.shape[1], chunk_elements):
            xd = x[sl].double()
            if op == "layer_norm":
                wd, bd = inputs["weight"].double(), inputs["bias"].double()
                mean = xd.mean(dim=-1, keepdim=True)
                centred = xd - mean
                rstd = torch.rsqrt((centred * centred).mean(dim=-1, keepdim=True) + LAYER_NORM_EPS)
                ref = centred * rstd * wd + bd
                mag = rstd * wd.abs() * (centred.abs() + xd.abs().mean(dim=-1, keepdim=True)) + bd.abs()
                yield ref_chunk(sl, ref, mag)
                continue
            dyd = inputs["dy"][sl].double()
            y = torch.softmax(xd, dim=-1)
            yield ref_chunk(sl, y, y, "y")  # the output's first rows; dx's are ``rows`` further
            yield ref_chunk(slice(rows + sl.start, rows + sl.stop), y * (dyd - (y * dyd).sum(dim=-1, keepdim=True)),
                            y * (dyd.abs() + (y * dyd.abs()).sum(dim=-1, keepdim=True)), "dx")
        return
    if op == "conv2d":
        x, w = inputs["x"], inputs["weight"]
        stride, pad = shape[6], shape[5] // 2
        wd = w.double()
        wd_abs = wd.abs()
        for sl in slices(x.shape[0], x[0].numel(), chunk_elements):
            xd = x[sl].double()
            ref = torch.nn.functional.conv2d(xd, wd, stride=stride, padding=pad)
            mag = torch.nn.functional.conv2d(xd.abs(), wd_abs, stride=stride, padding=pad)
            yield ref_chunk(sl, ref, mag)
        return
    if op == "linear_fwbw":
        xd, wd, dyd = inputs["x"].double(), inputs["w"].double(), inputs["dy"].double()
        at = 0
        for name, ref, mag in (("y", xd @ wd.t(), xd.abs() @ wd.abs().t()), ("dx", dyd @ wd, dyd.abs() @ wd.abs()),
                               ("dW", dyd.t() @ xd, dyd.abs().t() @ xd.abs())):
            yield ref_chunk(slice(at, at + ref.numel()), ref.reshape(-1), mag.reshape(-1), name)
            at += ref.numel()
        return
    raise ValueError(f"unknown op {op!r}")
