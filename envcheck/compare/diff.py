"""The result of ``envcheck diff``: pure data, built from reports, rendered elsewhere.

The first report is the baseline; every other report becomes one ``Comparison``
against it. A ratio is always other / baseline time: above 1.0 is slower.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from envcheck.compare import match as matching
from envcheck.compare import stats
from envcheck.compare.envdiff import CheckChange, EnvChange, check_changes, report_env_changes
from envcheck.model import Bench, Case, Report

NUMERIC_JUMP = 10.0  # relative error that grows (or shrinks) by this factor is reported


@dataclass(frozen=True)
class ReportInfo:
    """Who a report is: shown in headers, warnings and history rows."""

    label: str  # file name, as the user named it
    host: str
    created: str
    kind: str
    gpu_name: str | None
    verdict: str
    cases: int

    @classmethod
    def of(cls, label: str, r: Report) -> ReportInfo:
        return cls(label, r.host, r.created, r.kind, r.gpu_name, r.verdict, len(r.bench.cases) if r.bench else 0)


@dataclass(frozen=True)
class NumericChange:
    """Error against float64 on both sides; ``kind`` says why it is worth a line."""

    base_rel_l2: float
    other_rel_l2: float
    base_passed: bool
    other_passed: bool
    kind: str  # pass->fail | fail->pass | grew | shrank

    @property
    def factor(self) -> float | None:
        if self.base_rel_l2 > 0:
            return self.other_rel_l2 / self.base_rel_l2
        return None


def numeric_change(a: Case, b: Case) -> NumericChange | None:
    if a.error is None or b.error is None:
        return None
    ea, eb = a.error, b.error
    kind = None
    if ea.passed and not eb.passed:
        kind = "pass->fail"
    elif eb.passed and not ea.passed:
        kind = "fail->pass"
    elif ea.rel_l2 > 0 and eb.rel_l2 >= ea.rel_l2 * NUMERIC_JUMP:
        kind = "grew"
    elif ea.rel_l2 == 0 and eb.rel_l2 > 0 and eb.rel_l2 >= ea.tolerance / NUMERIC_JUMP:
        kind = "grew"  # from exact to a visible fraction of the tolerance
    elif eb.rel_l2 > 0 and ea.rel_l2 >= eb.rel_l2 * NUMERIC_JUMP:
        kind = "shrank"
    if kind is None:
        return None
    return NumericChange(ea.rel_l2, eb.rel_l2, ea.passed, eb.passed, kind)


def pct_of_ceiling(c: Case, bench: Bench) -> float | None:
    """This case's throughput as % of its own machine's theoretical ceiling.

    Memory-bound cases carry their % of theoretical bandwidth; the others (matmul)
    are judged on FLOP/s against the peak of the precision they used. Each machine
    is judged on its own limits: that is what lets an H100 and an H200 compare fairly.
    """
    if c.pct_theoretical is not None:
        return c.pct_theoretical
    if c.tflops is not None:
        ceil = bench.ceiling(c.precision, "theoretical")
        if ceil and ceil.value > 0:
            return 100.0 * c.tflops / ceil.value
    return None


@dataclass(frozen=True)
class CaseDiff:
    """One case on both sides. ``verdict``: faster | slower | same | uncertain | not comparable."""

    op: str
    impl: str
    dtype: str
    precision: str
    shape: str
    category: str
    verdict: str
    reasons: tuple[str, ...] = ()  # why not comparable
    timing: str | None = None  # gpu | launch
    method: str | None = None
    base_us: float | None = None
    other_us: float | None = None
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    n_base: int = 0
    n_other: int = 0
    base_gbps: float | None = None
    other_gbps: float | None = None
    base_tflops: float | None = None
    other_tflops: float | None = None
    base_pct: float | None = None  # % of the baseline machine's own ceiling
    other_pct: float | None = None  # % of the other machine's own ceiling
    numeric: NumericChange | None = None
    other_precision: str | None = None  # set for precision-mismatched pairs
    log_se: float | None = None

    @property
    def name(self) -> str:
        prec = self.precision if self.other_precision is None else f"{self.precision}/{self.other_precision}"
        p = f" ({prec})" if prec != self.dtype else ""
        return f"{self.op} {self.impl} {self.dtype}{p} {self.shape}"

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0

    def interval(self) -> stats.RatioInterval | None:
        if self.ratio is None:
            return None
        return stats.RatioInterval(self.ratio, self.low, self.high, self.log_se, self.n_base, self.n_other)


@dataclass(frozen=True)
class CaseRef:
    """A case present on one side only."""

    op: str
    impl: str
    dtype: str
    precision: str
    shape: str
    status: str

    @classmethod
    def of(cls, c: Case) -> CaseRef:
        return cls(c.op, c.impl, c.dtype, c.precision, c.shape_label, c.status)


@dataclass(frozen=True)
class GroupSummary:
    """Geometric-mean ratio of one group's comparable cases, and how the verdicts split."""

    name: str
    geomean: float | None
    low: float | None
    high: float | None
    count: int  # ratios behind the geomean
    faster: int
    slower: int
    same: int
    uncertain: int
    not_comparable: int
    verdict: str  # of the geomean, as for a single case; "none" when nothing was comparable


@dataclass(frozen=True)
class CeilingRow:
    """A physical limit on both machines (each its own)."""

    name: str
    kind: str
    unit: str
    base: float | None
    other: float | None
    base_source: str | None
    other_source: str | None

    @property
    def ratio(self) -> float | None:
        if self.base and self.other:
            return self.other / self.base
        return None


@dataclass(frozen=True)
class Comparison:
    base: ReportInfo
    other: ReportInfo
    env: tuple[EnvChange, ...]
    checks: tuple[CheckChange, ...]
    cases: tuple[CaseDiff, ...]
    only_base: tuple[CaseRef, ...]
    only_other: tuple[CaseRef, ...]
    ops: tuple[GroupSummary, ...]
    overall: GroupSummary
    ceilings: tuple[CeilingRow, ...]
    same_gpu: bool

    @property
    def compared(self) -> tuple[CaseDiff, ...]:
        return tuple(c for c in self.cases if c.ratio is not None and c.verdict != "not comparable")

    @property
    def not_comparable(self) -> tuple[CaseDiff, ...]:
        return tuple(c for c in self.cases if c.verdict == "not comparable")

    @property
    def numeric_changes(self) -> tuple[CaseDiff, ...]:
        return tuple(c for c in self.cases if c.numeric is not None)

    def regressions(self, pct: float) -> list[CaseDiff]:
        """Significant slowdowns larger than ``pct`` percent, worst first."""
        out = [c for c in self.cases if c.verdict == "slower" and c.ratio is not None and c.ratio > 1 + pct / 100]
        return sorted(out, key=lambda c: -(c.ratio or 0))


@dataclass(frozen=True)
class Diff:
    reports: tuple[ReportInfo, ...]
    comparisons: tuple[Comparison, ...]
    practical_pct: float
    confidence: float
    resamples: int

    @property
    def baseline(self) -> ReportInfo:
        return self.reports[0]

    def regressions(self, pct: float) -> list[tuple[Comparison, CaseDiff]]:
        return [(cmp, c) for cmp in self.comparisons for c in cmp.regressions(pct)]


def _case_diff(a: Case, b: Case, bench_a: Bench, bench_b: Bench, *, seed: int, resamples: int,
               practical: float, confidence: float = stats.CONFIDENCE) -> CaseDiff:
    reasons = matching.comparability(a, b)
    which, ta, tb, _ = matching.timings(a, b)
    common = dict(
        op=a.op, impl=a.impl, dtype=a.dtype, precision=a.precision, shape=a.shape_label, category=a.category,
        base_gbps=a.gbps, other_gbps=b.gbps, base_tflops=a.tflops, other_tflops=b.tflops,
        base_pct=pct_of_ceiling(a, bench_a), other_pct=pct_of_ceiling(b, bench_b), numeric=numeric_change(a, b),
        other_precision=b.precision if b.precision != a.precision else None,
    )
    if reasons or ta is None or tb is None:
        return CaseDiff(verdict="not comparable", reasons=tuple(reasons), timing=which,
                        base_us=ta.median_us if ta else None, other_us=tb.median_us if tb else None, **common)
    # Samples are per call already; divide by calls_per_sample only if a timing stored totals.
    # The interval covers within-run sampling noise only (see envcheck.compare.stats).
    iv = stats.ratio_interval(ta.samples_us, tb.samples_us, confidence=confidence, resamples=resamples, seed=seed)
    return CaseDiff(
        verdict=stats.verdict(iv, practical), timing=which, method=ta.method,
        base_us=ta.median_us, other_us=tb.median_us, ratio=iv.ratio, low=iv.low, high=iv.high,
        n_base=iv.n_base, n_other=iv.n_other, log_se=iv.log_se, **common,
    )


def summarise(name: str, cases: Sequence[CaseDiff], practical: float, confidence: float) -> GroupSummary:
    ivs = [c.interval() for c in cases if c.ratio is not None and c.verdict != "not comparable"]
    g = stats.geomean([iv for iv in ivs if iv is not None], confidence)
    count = {v: sum(c.verdict == v for c in cases) for v in ("faster", "slower", "same", "uncertain", "not comparable")}
    return GroupSummary(
        name=name, geomean=g.ratio if g else None, low=g.low if g else None, high=g.high if g else None,
        count=g.count if g else 0, faster=count["faster"], slower=count["slower"], same=count["same"],
        uncertain=count["uncertain"], not_comparable=count["not comparable"],
        verdict=stats.geomean_verdict(g, practical) if g else "none",
    )


def _ceilings(a: Bench | None, b: Bench | None) -> tuple[CeilingRow, ...]:
    rows: dict[tuple[str, str], CeilingRow] = {}
    for bench in (a, b):
        for c in bench.ceilings if bench else ():
            if (c.name, c.kind) in rows:
                continue
            ca = a.ceiling(c.name, c.kind) if a else None
            cb = b.ceiling(c.name, c.kind) if b else None
            rows[(c.name, c.kind)] = CeilingRow(c.name, c.kind, c.unit, ca.value if ca else None,
                                               cb.value if cb else None, ca.source if ca else None,
                                               cb.source if cb else None)
    return tuple(rows.values())


def compare(base: tuple[str, Report], other: tuple[str, Report], *, practical: float = stats.PRACTICAL,
            confidence: float = stats.CONFIDENCE, resamples: int = stats.RESAMPLES,
            seed: int = stats.SEED) -> Comparison:
    """One report against the baseline."""
    (la, a), (lb, b) = base, other
    m = matching.match(a.bench, b.bench)
    cases: list[CaseDiff] = []
    if a.bench and b.bench:
        for x, y in m.pairs:
            cases.append(_case_diff(x, y, a.bench, b.bench, seed=seed, resamples=resamples, practical=practical,
                                    confidence=confidence))
        for x, y in m.precision_pairs:
            cases.append(_case_diff(x, y, a.bench, b.bench, seed=seed, resamples=resamples, practical=practical,
                                    confidence=confidence))
    ops = list(dict.fromkeys(c.op for c in cases))
    op_rows = tuple(summarise(op, [c for c in cases if c.op == op], practical, confidence) for op in ops)
    ga, gb = a.gpu_name, b.gpu_name
    return Comparison(
        base=ReportInfo.of(la, a), other=ReportInfo.of(lb, b),
        env=tuple(report_env_changes(a, b)), checks=tuple(check_changes(a.checks, b.checks)),
        cases=tuple(cases), only_base=tuple(CaseRef.of(c) for c in m.only_base),
        only_other=tuple(CaseRef.of(c) for c in m.only_other), ops=op_rows,
        overall=summarise("all", cases, practical, confidence), ceilings=_ceilings(a.bench, b.bench),
        same_gpu=ga == gb,
    )


def diff(reports: Sequence[tuple[str, Report]], *, practical: float = stats.PRACTICAL,
         confidence: float = stats.CONFIDENCE, resamples: int = stats.RESAMPLES, seed: int = stats.SEED) -> Diff:
    """Compare every report with the first. ``reports``: (label, report) pairs, at least two."""
    if len(reports) < 2:
        raise ValueError("diff needs at least two reports")
    if not (0 < confidence < 1) or practical < 0 or not math.isfinite(practical):
        raise ValueError("confidence must be in (0, 1) and the practical threshold non-negative")
    comps = tuple(compare(reports[0], r, practical=practical, confidence=confidence, resamples=resamples, seed=seed)
                  for r in reports[1:])
    return Diff(tuple(ReportInfo.of(label, r) for label, r in reports), comps, practical * 100, confidence, resamples)
