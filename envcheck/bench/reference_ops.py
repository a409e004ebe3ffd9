"""Float64 references of every built-in op, chunk by chunk along the output's first dimension (a row never split),
with the magnitude each element's rounding error scales with: the op on the inputs' absolute values, except where
an error in a shared intermediate moves a whole row: layer norm's rstd |w| (|x - mean| + mean|x|) + |b| (its
mean), softmax_fwbw's dx's y (|dy| + sum(y |dy|)) (the row's sum). Several outputs are named per chunk.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.bench.impls import REDUCE_DIMS, Inputs
from envcheck.ops import REFERENCE_CHUNK_ELEMENTS, spec

if TYPE_CHECKING:
    import torch

LAYER_NORM_EPS = 1e-5


@dataclass(frozen=True)
class RefChunk:
    """The float64 reference of ``out[rows]`` and the magnitude its rounding error scales with."""

    rows: slice
    ref: torch.Tensor
    mag: torch.Tensor
    output: str = ""  # which output of an op with several (``y``, ``dx``, ``dW``): judged apart


def slices(n: int, per_item: int, chunk_elements: int) -> Iterator[slice]:
    """Slices of ``n`` items of ``per_item`` elements, about ``chunk_elements`` a slice, at least one item."""
    step = max(1, chunk_elements // max(1, per_item))
    for lo in range(0, n, step):
        yield slice(lo, min(n, lo + step))


def chunks(op: str, inputs: Inputs, chunk_elements: int = REFERENCE_CHUNK_ELEMENTS,
           shape: tuple[int, ...] = ()) -> Iterator[RefChunk]:
    """Pieces covering ``op``'s output along its first dimension, computed on the inputs' device."""
    import torch

    s = spec(op)
    if s.family == "reduce":
        xd = inputs["x"].double()
        dims = REDUCE_DIMS[s.reduce_over]
        how = torch.sum if op.startswith("sum") else torch.amax
        yield RefChunk(slice(0, s.output_elements(xd.shape)), how(xd, dim=dims).reshape(-1),
                        how(xd.abs(), dim=dims).reshape(-1))
    elif op == "conv2d":
        x, wd = inputs["x"], inputs["weight"].double()
        for sl in slices(x.shape[0], x[0].numel(), chunk_elements):
            xd = x[sl].double()
            conv = [torch.nn.functional.conv2d(v, w, stride=shape[6], padding=shape[5] // 2)
                    for v, w in ((xd, wd), (xd.abs(), wd.abs()))]
            yield RefChunk(sl, *conv)
    elif op == "matmul":
        a, bd = inputs["a"], inputs["b"].double()
        for sl in slices(a.shape[0], max(*bd.shape), chunk_elements):
            ad = a[sl].double()
            yield RefChunk(sl, ad @ bd, ad.abs() @ bd.abs())
    elif op == "linear_fwbw":
        xd, wd, dyd = inputs["x"].double(), inputs["w"].double(), inputs["dy"].double()
        at = 0
        for name, p, q in (("y", xd, wd.t()), ("dx", dyd, wd), ("dW", dyd.t(), xd)):
            ref = p @ q
            yield RefChunk(slice(at, at + ref.numel()), ref.reshape(-1), (p.abs() @ q.abs()).reshape(-1), name)
            at += ref.numel()
    else:  # element-wise and row-wise ops
        x = inputs["x"]
        for sl in slices(x.shape[0], x[0].numel(), chunk_elements):
            yield from _rows(op, x[sl].double(), inputs, sl, x.shape[0])


def _rows(op: str, xd: torch.Tensor, inputs: Inputs, sl: slice, rows: int) -> list[RefChunk]:
    """The chunks of an element-wise or row-wise op on input rows ``sl``."""
    import torch

    if op == "vector_add":
        yd = inputs["y"][sl].double()
        return [RefChunk(sl, xd + yd, xd.abs() + yd.abs())]
    if op == "relu":
        return [RefChunk(sl, torch.clamp_min(xd, 0.0), xd.abs())]
    if op == "row_sum":
        return [RefChunk(sl, xd.sum(dim=-1), xd.abs().sum(dim=-1))]
    if op == "layer_norm":
        wd, bd = inputs["weight"].double(), inputs["bias"].double()
        centred = xd - xd.mean(dim=-1, keepdim=True)
        rstd = torch.rsqrt((centred * centred).mean(dim=-1, keepdim=True) + LAYER_NORM_EPS)
        mag = rstd * wd.abs() * (centred.abs() + xd.abs().mean(dim=-1, keepdim=True)) + bd.abs()
        return [RefChunk(sl, centred * rstd * wd + bd, mag)]
    y = torch.softmax(xd, dim=-1)
    if op == "softmax":
        return [RefChunk(sl, y, y)]
    if op != "softmax_fwbw":
        raise ValueError(f"unknown op {op!r}")
    dyd = inputs["dy"][sl].double()
    dx = y * (dyd - (y * dyd).sum(dim=-1, keepdim=True))
    mag = y * (dyd.abs() + (y * dyd.abs()).sum(dim=-1, keepdim=True))
    return [RefChunk(sl, y, y, "y"), RefChunk(slice(rows + sl.start, rows + sl.stop), dx, mag, "dx")]  # dx below y
