"""Totals of a benchmark run: per op, per implementation and precision. Speedups go per precision too: an fp32
matmul on CUDA cores averaged with the tensor-core precisions would make a kernel at parity look slow.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envcheck.analysis.results import CaseResult


def geomean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if not vals:
        return None
    return math.exp(sum(math.log(x) for x in vals) / len(vals))


@dataclass(frozen=True)
class Tally:
    """Cases of one group. ``name`` parts: op, implementation, precision (None: all)."""

    op: str | None
    impl: str | None
    precision: str | None
    cases: int  # measured or attempted cases
    passed: int
    failed: int  # numerically over tolerance
    errors: int  # could not compile or run
    speedup_geomean: float | None
    speedup_max: float | None
    speedup_min: float | None
    speedups: int  # rows behind the speedup figures

    @property
    def success_rate(self) -> float | None:
        return self.passed / self.cases if self.cases else None


@dataclass(frozen=True)
class Summary:
    overall: Tally
    by_op: tuple[Tally, ...]
    by_op_impl: tuple[Tally, ...]  # non-torch implementations: the speedups users quote
    by_op_impl_precision: tuple[Tally, ...]


def tally(rows: Sequence[CaseResult], op: str | None = None, impl: str | None = None,
          precision: str | None = None) -> Tally:
    """Totals of ``rows``."""
    speedups = [r.speedup for r in rows if r.case.impl != r.spec.baseline and r.speedup is not None]
    return Tally(
        op, impl, precision, len(rows),
        passed=sum(r.status == "pass" for r in rows),
        failed=sum(r.status == "fail" for r in rows),
        errors=sum(r.status == "error" for r in rows),
        speedup_geomean=geomean(speedups), speedup_max=max(speedups) if speedups else None,
        speedup_min=min(speedups) if speedups else None, speedups=len(speedups),
    )


def summarise(results: Sequence[CaseResult]) -> Summary:
    ops = list(dict.fromkeys(r.case.op for r in results))
    by_op = tuple(tally([r for r in results if r.case.op == op], op) for op in ops)
    by_impl = []
    by_prec = []
    for op in ops:
        mine = [r for r in results if r.case.op == op and r.case.impl != r.spec.baseline]
        for impl in dict.fromkeys(r.case.impl for r in mine):
            rows = [r for r in mine if r.case.impl == impl]
            by_impl.append(tally(rows, op, impl))
            for prec in dict.fromkeys(r.case.precision for r in rows):
                by_prec.append(tally([r for r in rows if r.case.precision == prec], op, impl, prec))
    return Summary(tally(results), by_op, tuple(by_impl), tuple(by_prec))
