"""The headline cases of a GPU's suite: the ones ``run --crosscheck`` times again with
``triton.testing.do_bench_cudagraph`` (the one definition).

Per op and precision (dtype and the arithmetic used), the case that moves the most: its largest shape by
bytes for a memory-bound op, by FLOPs for a compute-bound one (as tools/evidence/verify_ops.py picks them),
among the shapes where envcheck measured a GPU time for PyTorch; at that shape, the implementations
``IMPLS`` envcheck measured. Every one is timed: the counterpart cycles through as many sets of buffers as the
case did (``Case.rotation_sets``), so both keep L2 cold alike at every size.
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
