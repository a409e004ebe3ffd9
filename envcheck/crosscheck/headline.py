"""The headline cases of a GPU's suite: the ones ``run --crosscheck`` times again with
``triton.testing.do_bench_cudagraph`` (the one definition).

Per op and precision (dtype and the arithmetic used), the case that moves the most: its largest shape by
bytes for a memory-bound op, by FLOPs for a compute-bound one (as tools/evidence/verify_ops.py picks them),
among the shapes where envcheck measured a GPU time for PyTorch; at that shape, the implementations
``IMPLS`` envcheck measured. A memory-bound headline whose working set L2 could hold (under
``L2_MULTIPLE`` x L2) is listed as not compared (``fits_l2``): envcheck keeps L2 cold between its calls,
``do_bench_cudagraph`` replays one set of buffers, and the two would time different memories.
"""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.bench.l2 import ROTATE_L2_MULTIPLE
from envcheck.model import Bench, Case

IMPLS = ("torch", "triton")
# Past this multiple of L2 neither envcheck's rotating buffers nor do_bench_cudagraph's one set is served by L2.
L2_MULTIPLE = ROTATE_L2_MULTIPLE


@dataclass(frozen=True)
class Headline:
    """One case to time again; ``skipped``: why it is listed and not timed (``fits_l2``)."""

    case: Case
    compute_bound: bool
    skipped: str | None = None


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
        if c.impl != "torch":
            continue
        key = (c.op, c.dtype, c.precision)
        if key not in best or _size(bench, c) > _size(bench, best[key]):
            best[key] = c
    l2 = bench.device.l2_bytes or 0
    out = []
    for c in timed:
        head = best.get((c.op, c.dtype, c.precision))
        if head is None or c.shape != head.shape:
            continue
        spec = bench.spec(c.op)
        small = not spec.compute_bound and spec.working_set_bytes(c.shape, c.dtype) < L2_MULTIPLE * l2
        out.append(Headline(c, spec.compute_bound, "fits_l2" if small else None))
    return tuple(out)
