"""``envcheck history``: each machine's reports over time. An op's trend is its geometric-mean time ratio to the
first report sampled alike that ran it; a step is a significant change between consecutive reports of a group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from envcheck.analysis import Analysis, analyse
from envcheck.analysis.ceilings import BANDWIDTH, THEORETICAL
from envcheck.analysis.ceilings import MEASURED as MEASURED_CEILING
from envcheck.compare import stats
from envcheck.compare.diff import CaseDiff, Comparison, ReportInfo, compare_analysed, summarise
from envcheck.compare.envdiff import EnvChange, can_move
from envcheck.compare.machine import MachineId, machine_of
from envcheck.compare.match import SAMPLING
from envcheck.compare.node_diff import MEASURED, node_side
from envcheck.model import Report, Settings
from envcheck.ops import OpSpec, lookup, variant

# Why a report is not in any machine's history (``LeftOut.reason``).
NO_BENCHMARK = "no_benchmark"  # a check or probe report, or a run that measured nothing
UNREADABLE = "unreadable"  # not a report, or one that fails validation: ``detail`` is the error


@dataclass(frozen=True)
class LeftOut:
    """A file or report left out of the history, and why (``detail``: the one-line error)."""

    label: str
    reason: str
    detail: str | None = None


@dataclass(frozen=True)
class OpPoint:
    """One op in one report."""

    op: str
    ratio: float | None  # geomean time ratio to the first report (1.0 for the first)
    low: float | None
    high: float | None
    count: int
    peak_gbps: float | None
    peak_gbps_pct: float | None  # of this report's own theoretical bandwidth
    peak_tflops: float | None
    peak_tflops_pct: float | None  # of this report's own peak for that precision


@dataclass(frozen=True)
class NodePoint:
    """A node's numbers in one report: NCCL all_reduce busbw at the sweep's smallest and largest size, and the
    slowest GPU pair's one-way peer copy: what a cable, a switch tray, a driver or NCCL moves."""

    small_bytes: int | None
    small_busbw: float | None
    large_bytes: int | None
    large_busbw: float | None
    p2p_gbps: float | None
    p2p_pairs: int


@dataclass(frozen=True)
class Point:
    info: ReportInfo
    ops: tuple[OpPoint, ...]
    copy_gbps: float | None  # measured bandwidth ceiling of the run (analysis)
    theoretical_gbps: float | None
    node: NodePoint | None = None  # the node tests (run --gpus, a fleet's node)
    gpu_uuid: str | None = None  # the GPU whose suite the per-op trend compares (the report's first)

    def op(self, name: str) -> OpPoint | None:
        return next((o for o in self.ops if o.op == name), None)


@dataclass(frozen=True)
class Step:
    """A significant change in one group between report ``index - 1`` and report ``index``."""

    index: int
    created: str
    group: str  # "matmul triton bf16"
    ratio: float  # geomean time ratio new / previous
    low: float | None
    high: float | None
    count: int
    direction: str  # faster | slower
    changes: tuple[EnvChange, ...]  # environment differences at that point

    @property
    def change_pct(self) -> float:
        """Less (faster) or more (slower) time in percent: "7% faster" is a 0.93 ratio."""
        return abs(self.ratio - 1) * 100

    @property
    def factor(self) -> float:
        """The change as a factor >= 1, for changes too large for percent."""
        return 1 / self.ratio if self.ratio < 1 else self.ratio


@dataclass(frozen=True)
class History:
    """One machine's reports in time order; ``hosts`` / ``gpus``: names with their reports' labels, if several."""

    points: tuple[Point, ...]
    ops: tuple[str, ...]
    steps: tuple[Step, ...]
    hosts: tuple[tuple[str, tuple[str, ...]], ...]
    gpus: tuple[tuple[str, tuple[str, ...]], ...]
    practical_pct: float
    machine: MachineId | None = None
    # (sampling settings, labels) of each group measured alike, if several: a report is compared within its group.
    settings: tuple[tuple[Settings, tuple[str, ...]], ...] = ()

    @property
    def trend(self) -> bool:
        """Two reports or more: one report is a starting point, not a trend."""
        return len(self.points) > 1


@dataclass(frozen=True)
class Histories:
    """One history per machine (most reports first), and what was left out."""

    machines: tuple[History, ...]
    left_out: tuple[LeftOut, ...] = ()


def _when(r: Report) -> tuple[int, float, str]:
    """Sort key: parseable ISO times in order, unparseable ones last (still in name order)."""
    try:
        return (0, datetime.fromisoformat(r.created.replace("Z", "+00:00")).timestamp(), r.created)
    except (ValueError, AttributeError):
        return (1, 0.0, str(r.created))


def group_name(c: CaseDiff) -> str:
    return f"{c.op} {c.impl} {variant(c.dtype, c.precision)}"


def _op_point(op: str, a: Analysis, vs_first: Sequence[CaseDiff] | None, declared: Sequence[OpSpec] = ()) -> OpPoint:
    """``vs_first``: the op's cases against the first report that ran it (None: this is it); ``declared``: the
    user ops any report declared (a report that did not run one has an empty point there)."""
    bench = a.bench
    results = [r for r in (bench.results if bench else ()) if r.case.op == op and r.status != "error"]
    top = max((r for r in results if r.rate is not None), key=lambda r: r.rate or 0.0, default=None)
    span: tuple[float | None, float | None, float | None, int]
    if not any(r.case.op == op for r in (bench.results if bench else ())):  # not run here: no value in its column
        span = (None, None, None, 0)
    elif vs_first is None:  # the first report that ran it: its ratio is 1 by definition
        span = (1.0, 1.0, 1.0, len(results))
    else:
        g = summarise(op, vs_first, 0.0, stats.CONFIDENCE)
        span = (g.geomean, g.low, g.high, g.count)
    bound = lookup(op, (*(bench.bench.ops if bench else ()), *declared)).compute_bound
    return OpPoint(
        op, *span,
        top.gbps if top and not bound else None, top.pct_theoretical if top and not bound else None,
        top.tflops if top and bound else None, top.pct_theoretical if top and bound else None,
    )


def _mixed(infos: Sequence[ReportInfo], attr: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    groups: dict[str, list[str]] = {}
    for i in infos:
        groups.setdefault(str(getattr(i, attr) or "unknown"), []).append(i.label)
    return tuple((k, tuple(v)) for k, v in groups.items()) if len(groups) > 1 else ()


def node_point(a: Analysis) -> NodePoint | None:
    """The node series' values of one analysed report (None without node tests)."""
    side = node_side(a.node)
    if side is None:
        return None
    ar = sorted((p for p in side.collectives if p.scope == "node" and p.op == "all_reduce"
                 and p.busbw_gbps is not None and p.status in MEASURED), key=lambda p: p.size_bytes)
    p2p = [c.row.gbps for c in side.copies if c.row.kind == "d2d" and c.row.method == "copy_engine"
           and c.row.directions == 1 and c.row.gbps is not None and not c.row.error]
    if not ar and not p2p:  # a one-GPU node: no collective within it, no pair to copy between
        return None
    return NodePoint(ar[0].size_bytes if ar else None, ar[0].busbw_gbps if ar else None,
                     ar[-1].size_bytes if ar else None, ar[-1].busbw_gbps if ar else None,
                     min(p2p) if p2p else None, len(p2p))


def _sampling(a: Analysis) -> tuple[object, ...]:
    """How a report's (first) suite was sampled: reports that differ here are never compared (match.SAMPLING)."""
    return tuple(getattr(a.report.benches[0].settings, n) for n in SAMPLING) if a.report.benches else ()


def _first_gpu(a: Analysis) -> str | None:
    return a.report.benches[0].device.uuid if a.report.benches else None


def on_gpu(a: Analysis, uuid: str | None) -> Analysis:
    """``a`` compared with a report whose first suite ran on GPU ``uuid``: that GPU's suite where ``a`` holds one
    (a node report holds one per GPU), so a node simulated on GPU 1 is trended against GPU 1, not GPU 0."""
    if uuid is None or _first_gpu(a) == uuid:
        return a
    mine = next((ba for ba in a.benches if ba.bench.device.uuid == uuid), None)
    if mine is None:
        return a
    return Analysis(dataclasses.replace(a.report, benches=(mine.bench,)), (mine,), a.node, a.fleet)


def _ceiling(a: Analysis, kind: str) -> float | None:
    c = a.bench.ceilings.get(BANDWIDTH, kind) if a.bench else None
    return c.value if c else None


def history(reports: Sequence[tuple[str, Report]], *, practical: float = stats.PRACTICAL,
            resamples: int = stats.RESAMPLES, seed: int = stats.SEED) -> History:
    """Trends and steps of ``reports`` ((label, report) pairs of one machine, any order: sorted by ``created``)."""
    if not reports:
        raise ValueError("history needs at least one report")
    ordered = sorted(((label, analyse(r)) for label, r in reports), key=lambda la: _when(la[1].report))
    first = ordered[0]
    ops = dict.fromkeys(c.op for _, a in ordered for b in a.report.benches[:1] for c in b.cases)
    kw = {"practical": practical, "resamples": resamples, "seed": seed}
    declared = tuple({s.name: s for _, a in ordered for b in a.report.benches for s in b.ops}.values())
    sampling = [_sampling(a) for _, a in ordered]
    ran = [{c.op for b in a.report.benches[:1] for c in b.cases} for _, a in ordered]
    compared: dict[tuple[int, int], Comparison] = {}

    def against(j: int, i: int) -> Comparison:
        """Report ``i`` against report ``j`` (on the GPU of ``i``'s suite), compared once."""
        if (j, i) not in compared:
            (lj, aj), (li, ai) = ordered[j], ordered[i]
            compared[(j, i)] = compare_analysed((lj, on_gpu(aj, _first_gpu(ai))), (li, ai), **kw)  # type: ignore[arg-type]
        return compared[(j, i)]

    points: list[Point] = []
    steps: list[Step] = []
    for i, (label, a) in enumerate(ordered):
        # An op's trend baseline: the first report sampled alike that ran it; a step's: the latest alike.
        alike = [j for j in range(i) if sampling[j] == sampling[i]]
        firsts = {op: next((j for j in alike if op in ran[j]), None) for op in ops}
        points.append(Point(
            ReportInfo.of(label, a.report),
            tuple(_op_point(op, a, None if (j := firsts[op]) is None else
                            [c for c in against(j, i).cases if c.op == op], declared) for op in ops),
            _ceiling(a, MEASURED_CEILING), _ceiling(a, THEORETICAL), node_point(a), _first_gpu(a),
        ))
        if not alike:
            continue
        step_cmp = against(alike[-1], i)
        groups: dict[str, list[CaseDiff]] = {}
        for c in step_cmp.cases:
            groups.setdefault(group_name(c), []).append(c)
        for name, cases in groups.items():
            g = summarise(name, cases, practical, stats.CONFIDENCE)
            if g.verdict in ("faster", "slower") and g.geomean is not None:
                # Only what can move this implementation explains its step (a Triton install never a torch row).
                changes = tuple(c for c in step_cmp.env if can_move(c, cases[0].impl))
                steps.append(Step(i, a.report.created, name, g.geomean, g.low, g.high, g.count, g.verdict, changes))
    infos = [p.info for p in points]
    by_sampling: dict[tuple[object, ...], list[int]] = {}
    for i, key in enumerate(sampling):
        by_sampling.setdefault(key, []).append(i)
    settings = tuple((ordered[idx[0]][1].report.benches[0].settings, tuple(infos[i].label for i in idx))
                     for idx in by_sampling.values()) if len(by_sampling) > 1 else ()
    return History(tuple(points), tuple(ops), tuple(steps), _mixed(infos, "host"), _mixed(infos, "gpu_name"),
                   practical * 100, machine_of(first[1].report), settings)


def histories(reports: Sequence[tuple[str, Report]], left_out: Sequence[LeftOut] = (), *,
              practical: float = stats.PRACTICAL, resamples: int = stats.RESAMPLES,
              seed: int = stats.SEED) -> Histories:
    """One history per machine of ``reports``; reports without benchmark results are added to ``left_out``."""
    skipped = list(left_out)
    by_machine: dict[tuple[str, tuple[str, ...]], list[tuple[str, Report]]] = {}
    for label, r in reports:
        if not any(b.cases for b in r.benches):
            skipped.append(LeftOut(label, NO_BENCHMARK, r.kind))
            continue
        by_machine.setdefault(machine_of(r).key, []).append((label, r))
    groups = sorted(by_machine.values(), key=lambda g: -len(g))  # stable: equal sizes keep their order
    return Histories(tuple(history(g, practical=practical, resamples=resamples, seed=seed) for g in groups),
                     tuple(skipped))
