"""The headline cases of a GPU's suite, which ``run --crosscheck`` times again: per op, dtype and precision, the
largest shape (by bytes, or FLOPs where compute-bound) with a GPU time for PyTorch, and there each of ``IMPLS``.
"""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.model import Bench, Case

IMPLS = ("torch", "triton")


@dataclass(frozen=True)
class Headline:
    case: Case
    compute_bound: bool


def _size(bench: Bench, c: Case) -> int:
    spec = bench.spec(c.op)
    t = spec.traffic(c.shape, c.dtype)
    return t.flops if spec.compute_bound else t.bytes


def headlines(bench: Bench) -> tuple[Headline, ...]:
    """``bench``'s headline cases, in the suite's order (a CUDA bench; none on the CPU)."""
    if bench.device.backend != "cuda":
        return ()
    timed = [c for c in bench.cases if c.impl in IMPLS and c.failure is None and c.gpu is not None]
    best: dict[tuple[str, str, str], Case] = {}
    for c in timed:
        key = (c.op, c.dtype, c.precision)
        if c.impl == "torch" and (key not in best or _size(bench, c) > _size(bench, best[key])):
            best[key] = c
    return tuple(Headline(c, bench.spec(c.op).compute_bound) for c in timed
                 if (head := best.get((c.op, c.dtype, c.precision))) is not None and c.shape == head.shape)
