"""The node tests of two reports side by side: each side's numbers its node analysis' (through ``NodeSide``);
ratios, verdicts and what changed built here. Collectives pair on (scope, op, size), copies on their ends; a
row's floor is the one shipped for its kind, for two runs on one machine; without one it is not judged.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from envcheck.analysis.collectives import SweepAnalysis
from envcheck.analysis.counters import CounterRow
from envcheck.analysis.links import CopyRow, GpuNvlinks, PairPath, topo_label
from envcheck.analysis.node import NodeAnalysis
from envcheck.compare import shipped, stats
from envcheck.compare.stats import RatioRow
from envcheck.model import Note
from envcheck.model.node import RankTiming

# Reason keys (the presentation's catalogue phrases them).
NODE_FAILED = "compare.node_failed"  # side, status
RANKS_DIFFER = "compare.ranks_differ"  # baseline, other
TIMING_DIFFERS = "compare.methods_differ"  # baseline, other (the key of match.METHODS_DIFFER)

NO_NODE_FLOOR = "diff.not_judged.no_node_floor"
MEASURED = ("ok", "unverified")  # collective statuses whose time is a measurement of the call
# Collectives from this size are "large": their run-to-run noise differs from the small sizes' (nccl-tests' bar
# tightens there too).
LARGE_BYTES = 64 << 20


@dataclass(frozen=True)
class CollectivePoint:
    """One collective at one size on one node: its GPU time, else its per-call time (``timing``), over
    per-iteration ``samples_us`` (each the mean over the ranks)."""

    scope: str
    op: str
    size_bytes: int
    ranks: int
    time_us: float | None
    busbw_gbps: float | None
    samples_us: tuple[float, ...]
    timing: str  # gpu | call
    status: str
    algo: str | None


@dataclass(frozen=True)
class CopyPoint:
    """One peer or host copy: the analysis' row and the per-iteration times behind its median."""

    row: CopyRow
    samples_us: tuple[float, ...]


@dataclass(frozen=True)
class NodeSide:
    """One node's results as the comparison reads them."""

    collectives: tuple[CollectivePoint, ...]
    nccl_versions: tuple[tuple[str, str | None], ...]  # (scope, version) per sweep
    copies: tuple[CopyPoint, ...]
    counters: tuple[CounterRow, ...]
    pairs: tuple[PairPath, ...]
    nvlinks: tuple[GpuNvlinks, ...]


def _per_iteration(timings: Sequence[RankTiming]) -> tuple[float, ...]:
    """Iteration i's time averaged over the ranks that have an i-th sample."""
    series = [list(t.timing.samples_us) for t in timings if len(t.timing.samples_us)]
    columns = ([x for x in col if x is not None] for col in itertools.zip_longest(*series))
    return tuple(sum(xs) / len(xs) for xs in columns)


def _points(sweeps: Sequence[SweepAnalysis]) -> tuple[CollectivePoint, ...]:
    out = []
    for sa in sweeps:
        for row, result in zip(sa.rows, sa.collectives.results, strict=True):
            gpu = row.time_basis == "gpu" and row.gpu_time_us is not None
            out.append(CollectivePoint(sa.collectives.scope, row.op, row.size_bytes, row.n,
                                       row.gpu_time_us if gpu else row.time_us, row.busbw_gbps,
                                       _per_iteration(result.gpu_timings if gpu else result.timings),
                                       "gpu" if gpu else "call", row.status, row.algo_label))
    return tuple(out)


def _versions(sweeps: Sequence[SweepAnalysis]) -> tuple[tuple[str, str | None], ...]:
    return tuple((sa.collectives.scope, sa.collectives.nccl_version) for sa in sweeps)


def node_side(na: NodeAnalysis | None) -> NodeSide | None:
    """The comparison's view of one analysed node; None for a run without node tests."""
    if na is None or na.node is None:
        return None
    copies = na.node.peer.copies if na.node.peer is not None else ()
    if len(copies) == len(na.copies):  # rows are one per copy (analysis.node.copy_rows); never mis-pair
        points = tuple(CopyPoint(r, tuple(c.timing.samples_us) if c.timing is not None else ())
                       for r, c in zip(na.copies, copies, strict=True))
    else:
        points = tuple(CopyPoint(r, ()) for r in na.copies)
    return NodeSide(_points(na.sweeps), _versions(na.sweeps), points, na.counters, na.paths, na.nvlinks)


def world_side(sweeps: Sequence[SweepAnalysis]) -> NodeSide | None:
    """A fleet's collectives across all its nodes as a side of a comparison; None when it ran none."""
    return NodeSide(_points(sweeps), _versions(sweeps), (), (), (), ()) if sweeps else None


@dataclass(frozen=True)
class CollectiveDiff:
    scope: str  # node | world
    op: str
    size_bytes: int
    ranks: int
    timing: str  # gpu | call
    base_us: float | None
    other_us: float | None
    base_busbw: float | None
    other_busbw: float | None
    base_algo: str | None
    other_algo: str | None
    base_status: str
    other_status: str
    change: RatioRow

    @property
    def busbw_change_pct(self) -> float | None:
        if self.base_busbw and self.other_busbw is not None:
            return (self.other_busbw / self.base_busbw - 1) * 100
        return None


@dataclass(frozen=True)
class CopyDiff:
    kind: str  # d2d | h2d | d2h
    method: str
    src: int | None
    dst: int | None
    directions: int
    base_gbps: float | None
    other_gbps: float | None
    base_pct_expected: float | None
    other_pct_expected: float | None
    change: RatioRow

    @property
    def host_link(self) -> bool:
        return self.kind in ("h2d", "d2h")

    @property
    def gbps_change_pct(self) -> float | None:
        if self.base_gbps and self.other_gbps is not None:
            return (self.other_gbps / self.base_gbps - 1) * 100
        return None


@dataclass(frozen=True)
class CounterDiff:
    """One GPU's error counter (summed over its links) on both sides; rates per second in the tests, since boot."""

    gpu: int
    name: str
    base_delta: int | None
    other_delta: int | None
    base_per_s: float | None
    other_per_s: float | None
    base_boot_per_s: float | None
    other_boot_per_s: float | None
    base_over_limit: bool
    other_over_limit: bool

    @property
    def nonzero(self) -> bool:
        return any(x for x in (self.base_delta, self.other_delta, self.base_boot_per_s, self.other_boot_per_s))


@dataclass(frozen=True)
class Change:
    """A difference in how the node is wired or driven (``what``): ``path``, ``nvlinks``, ``nccl``, ``algorithm``."""

    what: str
    before: str | None
    after: str | None
    gpus: tuple[int, ...] = ()
    scope: str | None = None
    op: str | None = None
    size_bytes: int | None = None


@dataclass(frozen=True)
class NodeComparison:
    collectives: tuple[CollectiveDiff, ...]
    copies: tuple[CopyDiff, ...]  # peer copies and host links, in the baseline's order
    counters: tuple[CounterDiff, ...]
    changes: tuple[Change, ...]
    only_base: tuple[str, ...] = ()  # rows measured on one side only, as "scope op size" / "kind method src->dst"
    only_other: tuple[str, ...] = ()
    floors: tuple[stats.NoiseFloor, ...] = ()
    # Where some row's floor was shipped: the GPU model and the node controls its node floors came from.
    shipped_model: str | None = None
    shipped_pairs: tuple[tuple[str, str], ...] = ()

    @property
    def peer_copies(self) -> tuple[CopyDiff, ...]:
        return tuple(c for c in self.copies if not c.host_link)

    @property
    def host_links(self) -> tuple[CopyDiff, ...]:
        return tuple(c for c in self.copies if c.host_link)

    def regressions(self, pct: float) -> list[CollectiveDiff | CopyDiff]:
        """Significant slowdowns (lower bandwidth) larger than ``pct`` percent of the time, worst first."""
        rows: list[CollectiveDiff | CopyDiff] = [*self.collectives, *self.copies]
        out = [r for r in rows if r.change.verdict == "slower" and (r.change.ratio or 0) > 1 + pct / 100]
        return sorted(out, key=lambda r: -(r.change.ratio or 0))


@dataclass(frozen=True)
class WorldComparison:
    """The collectives across all nodes of two fleet reports (``base`` / ``other``: their labels)."""

    base: str
    other: str
    node: NodeComparison


def _mean_log_se(xs: Sequence[float]) -> float:
    """Standard error of log(mean) of ``xs`` (delta method); inf with too few samples."""
    if len(xs) < stats.MIN_SAMPLES:
        return math.inf
    m = statistics.fmean(xs)
    return statistics.stdev(xs) / (m * math.sqrt(len(xs))) if m > 0 else math.inf


def _median_log_se(a: Sequence[float], b: Sequence[float], resamples: int, seed: int) -> float:
    if min(len(a), len(b)) < stats.MIN_SAMPLES:
        return math.inf
    ses = stats.median_log_se([np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)],
                              resamples=resamples, seed=seed)
    return math.hypot(float(ses[0]), float(ses[1]))


@dataclass(frozen=True)
class _Pending:
    """A pair with a ratio, before its floor is known."""

    ratio: float
    within_se: float
    kinds: tuple[tuple[str, ...], ...]
    n_base: int
    n_other: int


def _finish(pending: Sequence[_Pending | RatioRow], practical: float, confidence: float,
            model_floors: shipped.ModelFloors | None) -> tuple[list[RatioRow], list[stats.NoiseFloor]]:
    """Each row's floor (shipped for its kind, never from the pair; without one the row is not judged), its
    interval and its verdict, the rows with an interval called as one family."""
    judging: list[tuple[float, float | None, stats.NoiseFloor | None, int, int, str]] = []
    for p in pending:
        if isinstance(p, _Pending):
            floor = model_floors.node_floor(p.kinds) if model_floors is not None else None
            within = p.within_se if math.isfinite(p.within_se) else None
            # No floor: not judged; no samples either: no interval at all (uncertain).
            judging.append((p.ratio, within, floor or (stats.NO_FLOOR if within is None else None), p.n_base,
                            p.n_other, NO_NODE_FLOOR))
    judged, used = stats.judge(judging, practical, confidence)
    rows = iter(judged)
    return [row if isinstance(row, RatioRow) else next(rows) for row in pending], used


def _collective_pending(a: CollectivePoint, b: CollectivePoint) -> _Pending | RatioRow:
    reasons = [Note(NODE_FAILED, {"side": side, "status": p.status})
               for side, p in (("baseline", a), ("other", b)) if p.status not in MEASURED]
    if a.ranks != b.ranks:
        reasons.append(Note(RANKS_DIFFER, {"baseline": a.ranks, "other": b.ranks}))
    if a.timing != b.timing:
        reasons.append(Note(TIMING_DIFFERS, {"baseline": a.timing, "other": b.timing}))
    if reasons or not a.time_us or not b.time_us:
        return RatioRow("not comparable", reasons=tuple(reasons))
    within = math.hypot(_mean_log_se(a.samples_us), _mean_log_se(b.samples_us))
    size = "large" if a.size_bytes >= LARGE_BYTES else "small"
    kinds = ((a.scope, a.op, size, str(a.size_bytes)), (a.scope, a.op, size), (a.scope, a.op), (a.scope,), ())
    return _Pending(b.time_us / a.time_us, within, kinds, len(a.samples_us), len(b.samples_us))


def _copy_pending(a: CopyPoint, b: CopyPoint, resamples: int, seed: int) -> _Pending | RatioRow:
    reasons = [Note(NODE_FAILED, {"side": side, "status": "error" if p.row.error else "wrong"})
               for side, p in (("baseline", a), ("other", b)) if p.row.error or p.row.wrong]
    if reasons or not a.row.gbps or not b.row.gbps:
        return RatioRow("not comparable", reasons=tuple(reasons))
    # Bandwidth over the median time: the time ratio is the inverse bandwidth ratio.
    within = _median_log_se(a.samples_us, b.samples_us, resamples, seed)
    kind = "host" if a.row.kind in ("h2d", "d2h") else "peer"
    return _Pending(a.row.gbps / b.row.gbps, within, (("copy", kind, a.row.method), ("copy", kind), ("copy",)),
                    len(a.samples_us), len(b.samples_us))


_CollKey = tuple[str, str, int]
_CopyKey = tuple[str, str, int | None, int | None, int]
_Keyed = tuple[dict[_CollKey, CollectivePoint], dict[_CopyKey, CopyPoint]]


def _keyed(side: NodeSide) -> _Keyed:
    """One side's collectives by (scope, op, size) and copies by their ends, in its order."""
    return ({(p.scope, p.op, p.size_bytes): p for p in side.collectives},
            {(p.row.kind, p.row.method, p.row.src, p.row.dst, p.row.directions): p for p in side.copies})


def _copy_label(k: _CopyKey) -> str:
    kind, method, src, dst, directions = k
    arrow = "<->" if directions == 2 else "->"
    ends = {"h2d": f"host{arrow}GPU{dst}", "d2h": f"GPU{src}{arrow}host"}.get(kind, f"GPU{src}{arrow}GPU{dst}")
    return f"{kind} {method} {ends}"


def _changes(a: NodeSide, b: NodeSide) -> list[Change]:
    out: list[Change] = []
    paths = [{(p.a, p.b): topo_label(p) for p in s.pairs} for s in (a, b)]
    links = [{(g.gpu,): f"{g.active}/{g.total}" for g in s.nvlinks} for s in (a, b)]
    for what, (xa, xb) in (("path", paths), ("nvlinks", links)):
        out += [Change(what, xa.get(k), xb.get(k), gpus=k) for k in dict.fromkeys([*xa, *xb]) if xa.get(k) != xb.get(k)]
    va, vb = dict(a.nccl_versions), dict(b.nccl_versions)
    for scope in dict.fromkeys([*va, *vb]):
        if scope in va and scope in vb and va[scope] != vb[scope]:
            out.append(Change("nccl", va[scope], vb[scope], scope=scope))
    ca = {(p.scope, p.op, p.size_bytes): p.algo for p in a.collectives}
    for p in b.collectives:
        before = ca.get((p.scope, p.op, p.size_bytes))
        if (p.scope, p.op, p.size_bytes) in ca and before is not None and p.algo is not None and before != p.algo:
            out.append(Change("algorithm", before, p.algo, scope=p.scope, op=p.op, size_bytes=p.size_bytes))
    return out


def _pending(ka: _Keyed, kb: _Keyed, resamples: int, seed: int) -> tuple[
        list[tuple[CollectivePoint, CollectivePoint]], list[tuple[CopyPoint, CopyPoint]], list[_Pending | RatioRow]]:
    """The paired collectives and copies, and each pair's ratio before its floor (or why none)."""
    (ca, xa), (cb, xb) = ka, kb
    colls = [(ca[k], cb[k]) for k in ca if k in cb]
    copies = [(xa[k], xb[k]) for k in xa if k in xb]
    pending = [*(_collective_pending(x, y) for x, y in colls), *(_copy_pending(x, y, resamples, seed) for x, y in copies)]
    return colls, copies, pending


def floor_rows(a: NodeSide, b: NodeSide, *, resamples: int = stats.RESAMPLES,
               seed: int = stats.SEED) -> list[tuple[tuple[tuple[str, ...], ...], float, float]]:
    """(kinds, log ratio, within-run standard error) of every node row with an interval of its own: what
    ``tools/evidence/noise_floors.py`` learns the shipped node floors from."""
    _, _, pending = _pending(_keyed(a), _keyed(b), resamples, seed)
    return [(p.kinds, math.log(p.ratio), p.within_se) for p in pending
            if isinstance(p, _Pending) and math.isfinite(p.within_se)]


def compare_sides(a: NodeSide, b: NodeSide, *, practical: float = stats.PRACTICAL,
                  confidence: float = stats.CONFIDENCE, resamples: int = stats.RESAMPLES,
                  seed: int = stats.SEED, model_floors: shipped.ModelFloors | None = None) -> NodeComparison:
    """``model_floors``: the shipped floors of the node's GPU model, for two runs on one machine."""
    (ca, xa), (cb, xb) = ka, kb = _keyed(a), _keyed(b)
    colls, pairs, pending = _pending(ka, kb, resamples, seed)
    rows, floors = _finish(pending, practical, confidence, model_floors)
    collectives = tuple(
        CollectiveDiff(x.scope, x.op, x.size_bytes, x.ranks, x.timing, x.time_us, y.time_us, x.busbw_gbps,
                       y.busbw_gbps, x.algo, y.algo, x.status, y.status, r)
        for (x, y), r in zip(colls, rows[:len(colls)], strict=True))
    copies = tuple(
        CopyDiff(x.row.kind, x.row.method, x.row.src, x.row.dst, x.row.directions, x.row.gbps, y.row.gbps,
                 x.row.pct_expected, y.row.pct_expected, r)
        for (x, y), r in zip(pairs, rows[len(colls):], strict=True))
    by_a, by_b = ({(c.gpu, c.name): c for c in side.counters} for side in (a, b))
    counters = tuple(CounterDiff(
        k[0], k[1], x.delta if x else None, y.delta if y else None, x.per_s if x else None, y.per_s if y else None,
        x.boot_per_s if x else None, y.boot_per_s if y else None, bool(x and x.over_limit), bool(y and y.over_limit))
        for k in dict.fromkeys([*by_a, *by_b]) for x, y in [(by_a.get(k), by_b.get(k))])
    only_base = (*(" ".join(map(str, k)) for k in ca if k not in cb), *(_copy_label(k) for k in xa if k not in xb))
    only_other = (*(" ".join(map(str, k)) for k in cb if k not in ca), *(_copy_label(k) for k in xb if k not in xa))
    used = any(r.floor is not None and r.floor.source == "shipped" for r in rows)
    source = model_floors if used else None  # the model whose node floors some row took
    return NodeComparison(collectives, copies, counters, tuple(_changes(a, b)), only_base, only_other,
                          tuple(floors), source.model if source else None, source.node_pairs if source else ())
