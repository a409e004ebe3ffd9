"""Summary statistics of a benchmark run, derived from its cases (never stored)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from envcheck.model import Bench, Case


def geomean(xs: Iterable[float]) -> float | None:
    vals = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if not vals:
        return None
    return math.exp(sum(math.log(x) for x in vals) / len(vals))


@dataclass(frozen=True)
class Tally:
    """Cases of one group (an op, an implementation, or all): like a test report's totals."""

    name: str
    cases: int  # measured or attempted cases
    passed: int
    failed: int  # numerically over tolerance
    errors: int  # could not compile or run
    speedup_geomean: float | None
    speedup_max: float | None
    speedup_min: float | None

    @property
    def success_rate(self) -> float | None:
        return self.passed / self.cases if self.cases else None


def tally(name: str, cases: Iterable[Case]) -> Tally:
    cs = list(cases)
    speedups = [c.speedup for c in cs if c.impl != "torch" and c.speedup is not None]
    return Tally(
        name=name,
        cases=len(cs),
        passed=sum(c.status == "pass" for c in cs),
        failed=sum(c.status == "fail" for c in cs),
        errors=sum(c.status == "error" for c in cs),
        speedup_geomean=geomean(speedups),
        speedup_max=max(speedups) if speedups else None,
        speedup_min=min(speedups) if speedups else None,
    )


def ops(bench: Bench) -> list[str]:
    """Ops in the order they were run."""
    seen: dict[str, None] = {}
    for c in bench.cases:
        seen.setdefault(c.op, None)
    return list(seen)


def by_op(bench: Bench) -> list[Tally]:
    return [tally(op, (c for c in bench.cases if c.op == op)) for op in ops(bench)]


def by_op_impl(bench: Bench) -> list[Tally]:
    """One tally per (op, non-torch implementation): the geometric-mean speedups users quote."""
    out = []
    for op in ops(bench):
        impls = dict.fromkeys(c.impl for c in bench.cases if c.op == op and c.impl != "torch")
        for impl in impls:
            out.append(tally(f"{op}/{impl}", (c for c in bench.cases if c.op == op and c.impl == impl)))
    return out


def overall(bench: Bench) -> Tally:
    return tally("all", bench.cases)
