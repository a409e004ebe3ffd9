"""Whether an output is right: its error against an error model of the op at the precision actually used, and
its error on exact inputs (docs/judge.md states and derives both). With ``c`` roundings in the compute precision,
``s`` stored intermediates, ``K`` fp32 accumulations and e = c u_c + sqrt(K) u_a + s u_o, the scales are ``l2`` =
e + u_o, ``element`` = c u_c + K u_a + (1 + s) u_o and ``excess`` = sqrt(e^2 + 4 u_o e + 16 u_o^2 / n); each bound
is MARGIN x FIT x scale, FIT the worst correct measured (1 for a user's op). The error relative to the baseline's
is shown beside the verdict, never part of it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from envcheck.model import Accuracy
from envcheck.ops import UNIT_ROUNDOFF, OpSpec, spec

MARGIN = 3.0  # every bound over the worst correct implementation measured
EXACT_ULPS = 1.0
THEORY = (1.0, 1.0, 1.0)
# (op or op.output, precision) -> the worst correct (l2, element, excess) over the model's scales, as
# tools/evidence/judge_fit.py --fit wrote them from the evidence files the table names (docs/judge.md).
FIT: dict[tuple[str, str], tuple[float, float, float]] = {
    (k, p): (a, b, c) for k, p, a, b, c in json.loads(Path(__file__).with_name("judge_fit.json").read_text("utf-8"))["fit"]}


def _spec(op: OpSpec | str) -> OpSpec:
    return op if isinstance(op, OpSpec) else spec(op)


class Scales(NamedTuple):
    """The model's error scales of one output, relative to it, and the compute precision."""

    l2: float
    element: float
    excess: float
    precision: str


def scales(op: OpSpec | str, dtype: str, precision: str, shape: tuple[int, ...], output: str = "",
           elements: int | None = None) -> Scales:
    """The scales of ``output`` ("" for the whole) of a case of ``elements`` compared."""
    if dtype not in UNIT_ROUNDOFF or precision not in UNIT_ROUNDOFF:
        raise ValueError(f"unknown dtype/precision {dtype}/{precision}")
    op = _spec(op)
    compute = op.compute_precision(dtype, precision)
    c, stored = op.roundings(precision, output)
    u_c, u_a, u_o = UNIT_ROUNDOFF[compute], UNIT_ROUNDOFF["fp32"], UNIT_ROUNDOFF[dtype]
    k = max(1, dict(op.outputs(shape)).get(output, op.accumulation(shape)))
    e = c * u_c + math.sqrt(k) * u_a + stored * u_o
    n = max(1, elements or 1)
    return Scales(l2=e + u_o, element=c * u_c + k * u_a + (stored + 1) * u_o,
                  excess=math.sqrt(e * e + 4 * u_o * e + 16 * u_o * u_o / n), precision=compute)


@dataclass(frozen=True)
class Tolerance:
    """The bounds of one output of a case: ``rel_l2``, ``element``, ``excess`` and ``exact``."""

    rel_l2: float
    element: float
    excess: float
    precision: str
    exact: float = EXACT_ULPS


def fit_key(op: OpSpec | str, output: str = "") -> str:
    """The FIT table's name of an output: the op's, or ``op.output`` for an op with several."""
    name = _spec(op).name
    return f"{name}.{output}" if output else name


def tolerance(op: OpSpec | str, dtype: str, precision: str, shape: tuple[int, ...], output: str = "",
              elements: int | None = None) -> Tolerance:
    """The bounds of ``output`` of a case (``scales`` says what the arguments are)."""
    s, q = scales(op, dtype, precision, shape, output, elements), FIT.get((fit_key(op, output), precision), THEORY)
    # Never tighter than the model's scale itself: a correctly rounded output passes at any shape, even where
    # the fit's shapes never came near the worst case (a reduction's rounding against a short row's magnitude).
    m = [max(MARGIN * x, 1.0) for x in q]
    return Tolerance(m[0] * s.l2, m[1] * s.element, m[2] * s.excess, s.precision)


@dataclass(frozen=True)
class Verdict:
    """``passed`` and the bounds an output broke; ``ratio``: the worst statistic over its bound, the one number
    every view shows; ``relative``: rel_l2 over the baseline's, information only."""

    passed: bool
    broken: tuple[str, ...]
    ratio: float | None = None
    relative: float | None = None
    failed_outputs: tuple[str, ...] = ()
    output_ratios: tuple[tuple[str, float | None], ...] = ()

    def failed_ratios(self) -> tuple[tuple[str, float | None], ...]:
        """(name, ratio) of each output that broke a bound, in the op's order."""
        return tuple((name, ratio) for name, ratio in self.output_ratios if name in self.failed_outputs)


def judge(acc: Accuracy, tol: Tolerance, baseline: Accuracy | None = None, exact: Accuracy | None = None) -> Verdict:
    """The verdict on one output (``exact``: its statistics on exact inputs, if measured); a statistic the
    report's schema lacks is not judged."""
    ratios = {"rel_l2": acc.rel_l2 / tol.rel_l2}
    if acc.max_rel_elem is not None:
        ratios["element"] = acc.max_rel_elem / tol.element
    if acc.excess_l2 is not None:
        ratios["excess"] = acc.excess_l2 / tol.excess
    if exact is not None:
        ratios["exact"] = math.inf if exact.max_ulps is None else exact.max_ulps / tol.exact
    broken = ["nonfinite"] if acc.nonfinite or (exact is not None and exact.nonfinite) else []
    broken += [name for name, r in ratios.items() if not r <= 1.0]
    relative = acc.rel_l2 / baseline.rel_l2 if baseline is not None and baseline.rel_l2 > 0 else None
    return Verdict(not broken, tuple(broken), max(ratios.values()), relative)


def judge_outputs(outputs: Mapping[str, Accuracy], tols: Mapping[str, Tolerance],
                  baselines: Mapping[str, Accuracy] | None = None,
                  exacts: Mapping[str, Accuracy | None] | None = None) -> Verdict:
    """The verdict on a case of several outputs, each judged against its own bounds."""
    verdicts = {name: judge(acc, tols[name], (baselines or {}).get(name), (exacts or {}).get(name))
                for name, acc in outputs.items()}
    worst = max(verdicts.values(), key=lambda v: v.ratio or 0.0)
    broken = tuple(dict.fromkeys(b for v in verdicts.values() for b in v.broken))
    failed = tuple(name for name, v in verdicts.items() if not v.passed)
    return dataclasses.replace(worst, passed=not broken, broken=broken, failed_outputs=failed,
                               output_ratios=tuple((name, v.ratio) for name, v in verdicts.items()))
