"""How far an output is from its float64 reference, chunk by chunk (reference_ops.py): statistics only, no
verdict (docs/judge.md). Non-finite outputs count as zeros, and apart; every output is NaN-poisoned before its
checked call (``checked_call``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.bench import reference_ops
from envcheck.bench.impls import Impl, torch_dtype
from envcheck.bench.reference_ops import RefChunk
from envcheck.model import Accuracy, OutputAccuracy
from envcheck.ops import UNIT_ROUNDOFF, OpSpec

if TYPE_CHECKING:
    import torch

reference_chunks = reference_ops.chunks  # float64 reference pieces of a built-in op


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
        self.err_sq += o.err_sq
        self.ref_sq += o.ref_sq
        self.excess_sq += o.excess_sq
        self.max_abs = max(self.max_abs, o.max_abs)
        self.max_rel = max(self.max_rel, o.max_rel)
        self.nonfinite += o.nonfinite
        self.elements += o.elements
        self.max_ulps = max(self.max_ulps, o.max_ulps)

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

