"""The result of ``envcheck diff`` as pure data: every report against the first, its first bench compared; a
ratio is other / baseline time (above 1 is slower)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from envcheck.analysis import Analysis, BenchAnalysis, CaseResult, analyse
from envcheck.analysis.ceilings import Ceiling
from envcheck.analysis.collectives import analyse_sweep
from envcheck.analysis.peaks import Source
from envcheck.checks.keyed import keyed
from envcheck.compare import match as matching
from envcheck.compare import shipped, stats
from envcheck.compare.envdiff import CheckChange, EnvChange, check_changes, report_env_changes
from envcheck.compare.machine import MachineId, machine_of, same_machine
from envcheck.compare.node_diff import (
    CollectiveDiff,
    CopyDiff,
    NodeComparison,
    NodeSide,
    WorldComparison,
    compare_sides,
    node_side,
    world_side,
)
from envcheck.model import CaseKey, Note, Report, Timing
from envcheck.model.fleet import FleetNode
from envcheck.ops import variant

NUMERIC_JUMP = 10.0  # relative error that grows (or shrinks) by this factor is reported
NOT_JUDGED = stats.NOT_JUDGED
# Why a row is not judged: no repeats and no shipped floor, or a GPU run's host-timed row without a launch floor.
NO_FLOOR = "diff.not_judged.no_floor"
NO_LAUNCH_FLOOR = "diff.not_judged.launch"
HOST_CLOCK = "host_clock"  # model.TIMING_METHODS: a CPU run's times


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
    machine: MachineId | None = None

    @classmethod
    def of(cls, label: str, r: Report) -> ReportInfo:
        return cls(label, r.host, r.created, r.kind, r.gpu_name, r.verdict, sum(len(b.cases) for b in r.benches),
                   machine_of(r))


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


def numeric_change(a: CaseResult, b: CaseResult) -> NumericChange | None:
    """The change in a pair's numeric error, judged by the analysis' verdicts and tolerances."""
    ea, eb = a.case.accuracy, b.case.accuracy
    if ea is None or eb is None or a.verdict is None or b.verdict is None:
        return None
    pa, pb = a.verdict.passed, b.verdict.passed
    kind = None
    if pa and not pb:
        kind = "pass->fail"
    elif pb and not pa:
        kind = "fail->pass"
    elif ea.rel_l2 > 0 and eb.rel_l2 >= ea.rel_l2 * NUMERIC_JUMP:
        kind = "grew"
    elif ea.rel_l2 == 0 and eb.rel_l2 > 0 and eb.rel_l2 >= a.tolerance.rel_l2 / NUMERIC_JUMP:
        kind = "grew"  # from exact to a visible fraction of the tolerance
    elif eb.rel_l2 > 0 and ea.rel_l2 >= eb.rel_l2 * NUMERIC_JUMP:
        kind = "shrank"
    if kind is None:
        return None
    return NumericChange(ea.rel_l2, eb.rel_l2, pa, pb, kind)


@dataclass(frozen=True, kw_only=True)
class CaseDiff(stats.RatioRow):
    """One case on both sides: each side's numbers its analysis'; its ratio, interval and verdict as every
    compared row's (reasons: keys of match.py, NO_FLOOR, NO_LAUNCH_FLOOR); ``cluster``: the kind the geometric
    means treat as moving together."""

    op: str
    impl: str
    dtype: str
    precision: str
    shape: tuple[int, ...]
    category: str
    timing: str | None = None  # gpu | launch
    method: str | None = None
    base_us: float | None = None
    other_us: float | None = None
    base_gbps: float | None = None
    other_gbps: float | None = None
    base_tflops: float | None = None
    other_tflops: float | None = None
    base_pct: float | None = None
    other_pct: float | None = None
    numeric: NumericChange | None = None
    other_precision: str | None = None  # set for precision-mismatched pairs
    base_pct_measured: float | None = None
    other_pct_measured: float | None = None
    base_flags: tuple[str, ...] = ()
    other_flags: tuple[str, ...] = ()
    cluster: str = ""

    @property
    def key(self) -> CaseKey:
        return (self.op, self.impl, self.dtype, self.precision, self.shape)

    @property
    def name(self) -> str:
        """A compact identifier of the row ("matmul triton fp32/tf32 4096x4096x4096")."""
        v = variant(self.dtype, self.precision)
        if self.other_precision is not None:
            v = f"{v}/{self.other_precision}"
        return f"{self.op} {self.impl} {v} {'x'.join(map(str, self.shape))}"


@dataclass(frozen=True)
class CaseRef:
    """A case present on one side only."""

    op: str
    impl: str
    dtype: str
    precision: str
    shape: tuple[int, ...]
    status: str  # pass | fail | error, from the analysis

    @classmethod
    def of(cls, r: CaseResult) -> CaseRef:
        c = r.case
        return cls(c.op, c.impl, c.dtype, c.precision, c.shape, r.status)


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
    clusters: int = 0
    not_judged: int = 0  # ratios shown without a verdict, outside the geomean (no noise estimate covers them)


@dataclass(frozen=True)
class CeilingRow:
    """A physical limit on both machines (each its own), as the analysis found it."""

    name: str
    kind: str
    unit: str
    base: float | None
    other: float | None
    base_source: Source | None
    other_source: Source | None

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
    same_gpu: bool  # same GPU model
    same_machine: bool | None = None  # same physical GPUs (None: the reports cannot tell)
    floors: tuple[stats.NoiseFloor, ...] = ()  # every distinct noise floor used, largest first
    node: NodeComparison | None = None  # the node tests side by side, when both reports ran them
    tested: int = 0  # rows with an interval: the family the multiple-testing correction covers
    correction: str = stats.CORRECTION
    sources: tuple[tuple[str, int], ...] = ()  # (allowance source, rows using it), most trusted first
    shipped_model: str | None = None  # the GPU model whose shipped floors were used
    shipped_pairs: tuple[tuple[str, str], ...] = ()  # the committed controls they were learned from
    settings: tuple[str, ...] = ()  # the sampling settings the runs differ in (match.SAMPLING): no row compared

    @property
    def compared(self) -> tuple[CaseDiff, ...]:
        return tuple(c for c in self.cases if c.compared)

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
    unmatched: tuple[matching.Unmatched, ...] = ()  # fleet nodes with no partner, and why
    worlds: tuple[WorldComparison, ...] = ()  # fleets' collectives across their nodes, against the baseline's

    @property
    def baseline(self) -> ReportInfo:
        return self.reports[0]

    def regressions(self, pct: float) -> list[tuple[Comparison, CaseDiff]]:
        return [(cmp, c) for cmp in self.comparisons for c in cmp.regressions(pct)]

    @property
    def judged(self) -> int:
        """Rows held against run-to-run noise: cases, node rows and fleet-wide collectives."""
        nodes = [cmp.node for cmp in self.comparisons if cmp.node is not None] + [w.node for w in self.worlds]
        return (sum(c.judged for cmp in self.comparisons for c in cmp.cases)
                + sum(r.change.judged for n in nodes for r in n.collectives)
                + sum(r.change.judged for n in nodes for r in n.copies))

    def node_regressions(self, pct: float) -> list[tuple[str, str, CollectiveDiff | CopyDiff]]:
        """(baseline label, other label, row) of every node row (and fleet-wide collective) slower by more than ``pct``."""
        out = [(cmp.base.label, cmp.other.label, r) for cmp in self.comparisons if cmp.node is not None
               for r in cmp.node.regressions(pct)]
        return out + [(w.base, w.other, r) for w in self.worlds for r in w.node.regressions(pct)]


def case_kinds(timing: str | None, op: str, category: str) -> tuple[tuple[str, ...], ...]:
    """The kinds of a compared case, most specific first, each of one timing: a launch time moves with the host
    far more than a GPU time, so the two never share a floor."""
    t = timing or ""
    return ((t, op, category), (t, op), (t, category), (t,))


def _sides(a: CaseResult, b: CaseResult, timing: str | None) -> dict[str, object]:
    """What each side's analysis says of the pair."""
    ca = a.case
    return dict(
        op=ca.op, impl=ca.impl, dtype=ca.dtype, precision=ca.precision, shape=ca.shape, category=a.category,
        base_gbps=a.gbps, other_gbps=b.gbps, base_tflops=a.tflops, other_tflops=b.tflops,
        base_pct=a.pct_theoretical, other_pct=b.pct_theoretical,
        base_pct_measured=a.pct_measured, other_pct_measured=b.pct_measured,
        base_flags=a.flags, other_flags=b.flags,
        numeric=numeric_change(a, b), other_precision=b.case.precision if b.case.precision != ca.precision else None,
        cluster="/".join(case_kinds(timing, ca.op, a.category)[0]),
    )


class _Samples(Sequence[np.ndarray]):
    """The samples of timings as float32 arrays made when read: a large diff never holds a second copy."""

    def __init__(self, timings: Sequence[Timing]) -> None:
        self._timings = timings

    def __len__(self) -> int:
        return len(self._timings)

    def __getitem__(self, i: int) -> np.ndarray:  # type: ignore[override]
        return np.frombuffer(self._timings[i].samples_us.to_bytes(), dtype="<f4")


def _repeats(t: Timing) -> stats.Repeats | None:
    return stats.repeats_of(t.samples_us.numpy(), t.passes) if len(t.passes) >= 2 else None


@dataclass(frozen=True)
class _Rows:
    """What ``_case_diffs`` found: the rows, the distinct floors, and the family's bookkeeping."""

    cases: list[CaseDiff]
    floors: list[stats.NoiseFloor]
    tested: int
    sources: tuple[tuple[str, int], ...]
    shipped_used: bool
    launch_used: bool = False  # a floor of the launch_pairs (shipped.ModelFloors) judged a row


def _case_diffs(m: matching.Matching, *, practical: float, confidence: float, resamples: int,
                seed: int, model_floors: shipped.ModelFloors | None = None, settings: tuple[str, ...] = ()) -> _Rows:
    """Every pair's row, its floor from the reports' repeats or shipped for the model and kind, never from the
    pair; without one the row is not judged (docs/compare.md). ``settings``: sampling settings that differ."""
    out: list[CaseDiff | None] = []
    todo = []  # (slot, a, b, which, ta, tb) of the comparable pairs
    differ = [Note(matching.SETTINGS_DIFFER, {"names": settings})] if settings else []
    for a, b in (*m.pairs, *m.precision_pairs):
        reasons = differ + matching.comparability(a, b)
        which, ta, tb, _ = matching.timings(a, b)
        if reasons or ta is None or tb is None:
            out.append(CaseDiff(verdict="not comparable", reasons=tuple(reasons), timing=which,
                                base_us=ta.median_us if ta else None, other_us=tb.median_us if tb else None,
                                **_sides(a, b, which)))  # type: ignore[arg-type]
        else:
            todo.append((len(out), a, b, which, ta, tb))
            out.append(None)
    timings = [t for _, _, _, _, ta, tb in todo for t in (ta, tb)]
    ses = stats.median_log_se(_Samples(timings), lengths=[t.n for t in timings], resamples=resamples, seed=seed)
    judging: list[tuple[float, float | None, stats.NoiseFloor | None, int, int, str]] = []
    run_share = launch_used = False  # a shipped floor's run-level share went into a repeats row; a launch floor judged
    for k, (_, a, _, which, ta, tb) in enumerate(todo):
        within = math.hypot(ses[2 * k], ses[2 * k + 1])
        ra, rb = _repeats(ta), _repeats(tb)
        floor = stats.repeat_floor(ra, rb)
        single = model_floors.floor(case_kinds(which, a.case.op, a.category), a.case.impl) if model_floors else None
        ratio = tb.median_us / ta.median_us
        if floor is not None:  # the ratio of the repeats' geometric-mean medians: what their spread is of
            ratio = math.exp((rb.mean_log if rb else math.log(tb.median_us))
                             - (ra.mean_log if ra else math.log(ta.median_us)))
        why = NO_FLOOR  # no floor: not judged, for this reason
        if which == shipped.LAUNCH and ta.method != HOST_CLOCK and single is None:
            floor, why = None, NO_LAUNCH_FLOOR
        elif floor is not None and single is not None:  # what moves a whole run, which its repeats share
            floor = stats.with_run_share(floor, ra, rb, single, (ses[2 * k], ses[2 * k + 1]))
            run_share = run_share or floor.kind != ()
            launch_used = launch_used or (which == shipped.LAUNCH and floor.kind != ())
        elif floor is None and single is not None:
            floor = single
            launch_used = launch_used or which == shipped.LAUNCH
        judging.append((ratio, within if math.isfinite(within) else None, floor, ta.n, tb.n, why))
    judged, distinct = stats.judge(judging, practical, confidence)
    for (slot, a, b, which, ta, tb), r in zip(todo, judged, strict=True):
        out[slot] = CaseDiff(**vars(r), timing=which, method=ta.method, base_us=ta.median_us, other_us=tb.median_us,
                             **_sides(a, b, which))  # type: ignore[arg-type]
    tested = [r for r in judged if r.low is not None]  # the rows with an interval
    count = Counter(r.floor.source for r in tested if r.floor is not None)
    sources = tuple((s, count[s]) for s in stats.ALLOWANCE_SOURCES if s in count)
    return _Rows([c for c in out if c is not None], distinct, len(tested), sources, "shipped" in count or run_share,
                 launch_used)


def summarise(name: str, cases: Sequence[CaseDiff], practical: float, confidence: float) -> GroupSummary:
    """Geometric mean and verdict split of ``cases``, clustered by kind of case."""
    comparable = [c for c in cases if c.judged]
    ivs = [c.interval() for c in comparable]
    g = stats.geomean([iv for iv in ivs if iv is not None], [c.cluster for c in comparable], confidence)
    count = Counter(c.verdict for c in cases)
    return GroupSummary(
        name=name, geomean=g.ratio if g else None, low=g.low if g else None, high=g.high if g else None,
        count=g.count if g else 0, faster=count["faster"], slower=count["slower"], same=count["same"],
        uncertain=count["uncertain"], not_comparable=count["not comparable"],
        verdict=stats.geomean_verdict(g, practical) if g else "none", clusters=g.clusters if g else 0,
        not_judged=count[NOT_JUDGED],
    )


def _ceilings(a: BenchAnalysis | None, b: BenchAnalysis | None) -> tuple[CeilingRow, ...]:
    rows: dict[tuple[str, str], CeilingRow] = {}
    for c in (*(a.ceilings.found if a else ()), *(b.ceilings.found if b else ())):
        ca: Ceiling | None = a.ceilings.get(c.name, c.kind) if a else None
        cb: Ceiling | None = b.ceilings.get(c.name, c.kind) if b else None
        rows.setdefault((c.name, c.kind), CeilingRow(c.name, c.kind, c.unit, ca.value if ca else None,
                                                     cb.value if cb else None, ca.source if ca else None,
                                                     cb.source if cb else None))
    return tuple(rows.values())


def compare_analysed(base: tuple[str, Analysis], other: tuple[str, Analysis], *, practical: float = stats.PRACTICAL,
                     confidence: float = stats.CONFIDENCE, resamples: int = stats.RESAMPLES,
                     seed: int = stats.SEED, floors: Mapping[str, shipped.ModelFloors] | None = None) -> Comparison:
    """One analysed report against the analysed baseline. ``floors``: noise floors by GPU model (default: shipped)."""
    (la, aa), (lb, ab) = base, other
    a, b = aa.report, ab.report
    ba, bb = aa.bench, ab.bench
    na, nb = node_side(aa.node), node_side(ab.node)  # the node tests, compared when both ran them
    m = matching.match(ba.results if ba else (), bb.results if bb else ())
    ia, ib = ReportInfo.of(la, a), ReportInfo.of(lb, b)
    same = same_machine(ia.machine, ib.machine) if ia.machine and ib.machine else None
    model_floors = None
    settings = matching.settings_differ(ba.bench.settings if ba else None, bb.bench.settings if bb else None)
    # Shipped floors were learned from reruns on one physical GPU: never across models nor two GPUs of one.
    if ba and bb and (name_a := ba.bench.device.name) == bb.bench.device.name and same is True:
        model_floors = shipped.for_model(name_a) if floors is None else floors.get(name_a) if name_a else None
    found = _case_diffs(m, practical=practical, confidence=confidence, resamples=resamples, seed=seed,
                        model_floors=model_floors, settings=settings)
    cases = found.cases
    return Comparison(
        base=ia, other=ib, env=tuple(report_env_changes(a, b)), checks=tuple(check_changes(keyed(a.checks, a.environment, a.node), keyed(b.checks, b.environment, b.node), same)),
        cases=tuple(cases), only_base=tuple(CaseRef.of(r) for r in m.only_base),
        only_other=tuple(CaseRef.of(r) for r in m.only_other),
        ops=tuple(summarise(op, [c for c in cases if c.op == op], practical, confidence) for op in dict.fromkeys(c.op for c in cases)),
        overall=summarise("all", cases, practical, confidence), ceilings=_ceilings(ba, bb),
        same_gpu=a.gpu_name == b.gpu_name, same_machine=same, floors=tuple(found.floors), tested=found.tested, sources=found.sources,
        shipped_model=model_floors.model if found.shipped_used and model_floors else None,
        shipped_pairs=((*model_floors.pairs, *(model_floors.launch_pairs if found.launch_used else ()))
                       if found.shipped_used and model_floors else ()), settings=settings,
        node=compare_sides(na, nb, model_floors=model_floors, practical=practical, confidence=confidence,
                           resamples=resamples, seed=seed) if na and nb else None,
    )


def compare(base: tuple[str, Report], other: tuple[str, Report], *,
            floors: Mapping[str, shipped.ModelFloors] | None = None, **kw: float | int) -> Comparison:
    """One report against the baseline (each analysed here)."""
    return compare_analysed((base[0], analyse(base[1])), (other[0], analyse(other[1])), floors=floors,
                            **kw)  # type: ignore[arg-type]


def diff_analysed(analysed: Sequence[tuple[str, Analysis]], *, practical: float = stats.PRACTICAL,
                  confidence: float = stats.CONFIDENCE, resamples: int = stats.RESAMPLES,
                  seed: int = stats.SEED, floors: Mapping[str, shipped.ModelFloors] | None = None) -> Diff:
    """Compare every analysed report with the first. ``analysed``: (label, analysis), at least two."""
    if len(analysed) < 2:
        raise ValueError("diff needs at least two reports")
    if not (0 < confidence < 1) or practical < 0 or not math.isfinite(practical):
        raise ValueError("confidence must be in (0, 1) and the practical threshold non-negative")
    comps = tuple(compare_analysed(analysed[0], x, practical=practical, confidence=confidence, resamples=resamples,
                                   seed=seed, floors=floors) for x in analysed[1:])
    return Diff((comps[0].base, *(c.other for c in comps)), comps, practical * 100, confidence, resamples)


def diff(reports: Sequence[tuple[str, Report]], **kw: Any) -> Diff:
    """Compare every report with the first (each analysed here); ``kw``: as ``diff_analysed``'s."""
    return diff_analysed([(label, analyse(r)) for label, r in reports], **kw)


@dataclass(frozen=True)
class NodeReport:
    """One node of a report: a fleet's node as a report of its own (``label:node``, paired by host and GPU
    UUIDs), or a whole non-fleet report."""

    label: str
    report: Report
    id: matching.NodeId
    fleet: bool = False  # a node of a fleet report


def _uuids(report: Report, indices: Sequence[int]) -> frozenset[str]:
    by_index = {g.index: g.uuid for g in machine_of(report).gpus}
    found = [by_index.get(i) for i in indices] if indices else [u for u in by_index.values() if u]
    return frozenset(u for u in found if u) if all(found) else frozenset()


def _node_gpus(fleet_report: Report, node: FleetNode) -> tuple[int, ...]:
    """The CUDA devices this node's ranks ran on: its node tests' GPUs, else its ranks', else its suites'."""
    if node.node is not None and node.node.gpus:
        return tuple(node.node.gpus)
    ranks = fleet_report.fleet.ranks if fleet_report.fleet else ()
    mine = tuple(r.gpu for r in ranks if r.rank in node.ranks and r.gpu is not None)
    return mine or tuple(b.device.index for b in node.benches if b.device.index is not None)


def nodes_of(label: str, report: Report) -> tuple[NodeReport, ...]:
    """A fleet report as one report per node (``label:node``), each like that node's own ``run --gpus`` report
    with its machine's host name (a simulated node ``host/N`` is still ``host``); any other report as it is."""
    if report.fleet is None:
        return (NodeReport(label, report, matching.NodeId(label, report.host, _uuids(report, ()), report.host)),)
    out = []
    for node in report.fleet.nodes:
        host = node.node.host if node.node is not None and node.node.host else node.host
        r = replace(report, kind="run", host=host, environment=node.environment or report.environment,
                                checks=node.checks, benches=node.benches, node=node.node, fleet=None)
        name = f"{label}:{node.host}"
        out.append(NodeReport(name, r, matching.NodeId(name, host, _uuids(r, _node_gpus(report, node)), node.host), fleet=True))
    return tuple(out)


def world_of(report: Report) -> NodeSide | None:
    """A fleet report's collectives across all its nodes, as a comparison reads them (None: none)."""
    if report.fleet is None:
        return None
    return world_side(tuple(analyse_sweep(c) for c in report.fleet.collectives))


def diff_nodes(reports: Sequence[Sequence[tuple[NodeReport, Analysis]]],
               worlds: Sequence[tuple[str, NodeSide | None]] = (), *, practical: float = stats.PRACTICAL,
               confidence: float = stats.CONFIDENCE, resamples: int = stats.RESAMPLES,
               seed: int = stats.SEED) -> Diff:
    """Every node of every later report against the first report's node that is the same machine (the unmatched
    listed); ``worlds``: each report's collectives across its fleet, against the first's."""
    if len(reports) < 2:
        raise ValueError("diff needs at least two reports")
    base = list(reports[0])
    comps = []
    unmatched: list[matching.Unmatched] = []
    kw = {"practical": practical, "confidence": confidence, "resamples": resamples, "seed": seed}
    for other in reports[1:]:
        pairs, left = matching.pair_nodes(tuple(n.id for n, _ in base), tuple(n.id for n, _ in other))
        unmatched += [u for u in left if u.side == "other" or u not in unmatched]
        for p in pairs:
            (nb, ab), (no, ao) = base[p.base], other[p.other]
            comps.append(compare_analysed((nb.label, ab), (no.label, ao), **kw))  # type: ignore[arg-type]
    first, base_side = worlds[0] if worlds else ("", None)
    world_cmps = [WorldComparison(first, label, compare_sides(base_side, side, **kw))  # type: ignore[arg-type]
                  for label, side in worlds[1:] if base_side is not None and side is not None]
    infos = [n for n, _ in base] + [n for o in reports[1:] for n, _ in o]
    return Diff(tuple(ReportInfo.of(n.label, n.report) for n in infos), tuple(comps), practical * 100, confidence,
                resamples, tuple(unmatched), tuple(world_cmps))
