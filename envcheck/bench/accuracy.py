"""How far an output is from its float64 reference, chunk by chunk: statistics only, no verdict (docs/judge.md).
Non-finite outputs count as zeros, and apart; every output is NaN-poisoned before its checked call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from envcheck.bench.impls import LAYER_NORM_EPS, REDUCE_DIMS, Impl, Inputs, torch_dtype
from envcheck.model import Accuracy, OutputAccuracy
from envcheck.ops import REFERENCE_CHUNK_ELEMENTS, UNIT_ROUNDOFF, OpSpec, spec

if TYPE_CHECKING:
    import torch

# Float64 references of every built-in op, chunk by chunk along the output's first dimension (a row never split),
# with the magnitude each element's rounding error scales with: the op on the inputs' absolute values, except where
# an error in a shared intermediate moves a whole row: layer norm's rstd |w| (|x - mean| + mean|x|) + |b| (its
# mean), softmax_fwbw's dx's y (|dy| + sum(y |dy|)) (the row's sum). Several outputs are named per chunk.


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


def reference_chunks(op: str, inputs: Inputs, chunk_elements: int = REFERENCE_CHUNK_ELEMENTS,
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


def ulp(ref: torch.Tensor, dtype: str) -> torch.Tensor:
    """The spacing of ``dtype``'s numbers at each |ref| (float64; the subnormal spacing below the smallest normal)."""
    import torch

    info = torch.finfo(torch_dtype(dtype))
    _, exp = torch.frexp(ref)
    lowest = int(math.log2(info.tiny)) + 1  # frexp's exponent of the smallest normal
    exp = torch.where(ref == 0, lowest, torch.clamp_min(exp, lowest))
    return torch.ldexp(torch.ones_like(ref), exp + int(math.log2(info.eps)) - 1)


class Tally:
    """Running sums of the statistics of the outputs checked so far, whole and per named output (several checked
    calls add in as one longer output); ``spec`` and ``precision``: the roundings ``max_ulps`` allows for."""

    def __init__(self, dtype: str, spec: OpSpec | None = None, precision: str = "") -> None:
        self.dtype = dtype
        self.whole = _Sums()
        self.parts: dict[str, _Sums] = {}
        self.spec, self.precision = spec, precision

    def _rounding(self, output: str) -> float:
        """The op's own roundings of an element of ``output``, relative to its magnitude."""
        if self.spec is None:
            return 0.0
        c, s = self.spec.roundings(self.precision, output)
        return c * UNIT_ROUNDOFF[self.spec.compute_precision(self.dtype, self.precision)] + s * UNIT_ROUNDOFF[self.dtype]

    def add(self, out: torch.Tensor, chunks: Iterable[RefChunk]) -> Tally:
        """Compare ``out`` with its reference chunks, summing in float64 on its device, a chunk at a time."""
        import torch

        tdt = torch_dtype(self.dtype)
        floor = torch.finfo(tdt).tiny
        for chunk in chunks:
            o = out[chunk.rows].double()
            if o.shape != chunk.ref.shape:  # broadcasting would compare something else, silently
                raise ValueError(f"output of shape {tuple(out.shape)} against a reference of shape "
                                 f"{tuple(chunk.ref.shape)}")
            bad = ~torch.isfinite(o)
            n_bad = int(bad.sum().item())
            if n_bad:
                o = torch.where(bad, torch.zeros_like(o), o)
            diff = (o - chunk.ref).abs()
            excess = o - chunk.ref.to(tdt).double()  # beyond the one rounding to the output's dtype
            sums = _Sums(float(torch.sum(diff * diff).item()), float(torch.sum(chunk.ref * chunk.ref).item()),
                         float(torch.sum(excess * excess).item()),
                         float(diff.max().item()) if diff.numel() else 0.0,
                         float((diff / torch.clamp_min(chunk.mag, floor)).max().item()) if diff.numel() else 0.0,
                         n_bad, o.numel(), float((diff / (ulp(chunk.ref, self.dtype) + self._rounding(chunk.output)
                                                          * chunk.mag)).max().item()) if diff.numel() else 0.0)
            self.whole.add(sums)
            if chunk.output:
                self.parts.setdefault(chunk.output, _Sums()).add(sums)
        return self

    def accuracy(self) -> Accuracy:
        return self.whole.accuracy()

    def outputs(self) -> tuple[OutputAccuracy, ...]:
        """Each named output's statistics (empty for an op with one output)."""
        if len(self.parts) < 2:
            return ()
        return tuple(OutputAccuracy(name, sums.accuracy()) for name, sums in self.parts.items())


@dataclass
class _Sums:
    err_sq: float = 0.0
    ref_sq: float = 0.0
    excess_sq: float = 0.0
    max_abs: float = 0.0
    max_rel: float = 0.0
    nonfinite: int = 0
    elements: int = 0
    max_ulps: float = 0.0

    def add(self, o: _Sums) -> None:
        """The maxima kept, the rest summed."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(o, f.name)
            setattr(self, f.name, max(mine, theirs) if f.name.startswith("max_") else mine + theirs)

    def accuracy(self) -> Accuracy:
        return statistics(self.err_sq, self.ref_sq, self.max_abs, self.max_rel, self.nonfinite, self.elements,
                          self.excess_sq, self.max_ulps)


def compare(out: torch.Tensor, chunks: Iterable[RefChunk], dtype: str) -> Accuracy:
    """The statistics of ``out`` (a tensor of ``dtype``) against its reference chunks, whole."""
    return Tally(dtype).add(out, chunks).accuracy()


def statistics(err_sq: float, ref_sq: float, max_abs: float, max_rel: float, nonfinite: int,
               elements: int, excess_sq: float | None = None, max_ulps: float | None = None) -> Accuracy:
    """An Accuracy from accumulated sums."""
    # An all-zero reference (relu of all-negative input) has no scale: the error's absolute norm stands in.
    def rel(sq: float) -> float:
        return math.sqrt(sq / ref_sq) if ref_sq > 0 else math.sqrt(sq)

    excess = None if excess_sq is None else _finite(rel(excess_sq))
    return Accuracy(rel_l2=_finite(rel(err_sq)), max_abs=_finite(max_abs), max_rel_elem=_finite(max_rel),
                    nonfinite=nonfinite, elements=elements, excess_l2=excess,
                    max_ulps=None if max_ulps is None else _finite(max_ulps))


LARGEST = 1.7976931348623157e308  # float64's largest: fails any bound, and JSON can hold it


def _finite(x: float) -> float:
    # A NaN (a broken reference) or an overflow never reaches the report as "no error" or as what JSON cannot hold.
    return LARGEST if math.isnan(x) else min(x, LARGEST)


def poison(out: torch.Tensor) -> None:
    """Fill a floating-point output with NaN so elements a kernel fails to write stay visible."""
    if out.is_floating_point():
        out.fill_(float("nan"))


def checked_call(fn: Impl, out: torch.Tensor | None) -> tuple[torch.Tensor, bool]:
    """One call of ``fn`` whose output (``out``, or what it returns: then a second call, on the first result's
    poisoned block) started as NaN: ``(output, poisoned)``, False where the allocator did not hand it back."""
    if out is not None:
        poison(out)
    result = fn()
    same = out is not None and not isinstance(result, tuple) and result.data_ptr() == out.data_ptr()
    if same and result.shape == out.shape:
        return result, True
    ptrs = [_poisoned(t) for t in _parts(result)]  # no name left holding a block: freed below
    del result
    result = fn()
    poisoned = [t.data_ptr() for t in _parts(result)] == ptrs
    if isinstance(result, tuple):
        import torch

        result = torch.cat(result)
    return result, poisoned


def _poisoned(t: torch.Tensor) -> int:
    poison(t)
    return t.data_ptr()


def _parts(result: torch.Tensor | tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The tensors an implementation returned: one, or the outputs of an op with several."""
    return result if isinstance(result, tuple) else (result,)
