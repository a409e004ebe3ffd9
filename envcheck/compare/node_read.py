"""What a node comparison reads of one analysed node: the one adapter between ``analysis/node.py`` and
``compare/node_diff.py``; it derives nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envcheck.analysis.node import CopyRow, CounterRow, GpuNvlinks, NodeAnalysis, PairPath, SweepAnalysis, topo_label
from envcheck.model.node import RankTiming


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
class TopologyPair:
    a: int
    b: int
    label: str  # as nvidia-smi topo -m prints it: NV18, SYS...
    via: str  # nvlink | nvswitch | pcie
    expected_gbps: float | None


@dataclass(frozen=True)
class NodeSide:
    """One node's results as the comparison reads them."""

    collectives: tuple[CollectivePoint, ...]
    nccl_versions: tuple[tuple[str, str | None], ...]  # (scope, version) per sweep
    copies: tuple[CopyPoint, ...]
    counters: tuple[CounterRow, ...]
    pairs: tuple[TopologyPair, ...]
    nvlinks: tuple[GpuNvlinks, ...]


def _per_iteration(timings: Sequence[RankTiming]) -> tuple[float, ...]:
    """Iteration i's time averaged over the ranks that have an i-th sample."""
    series = [list(t.timing.samples_us) for t in timings if len(t.timing.samples_us)]
    if not series:
        return ()
    n = max(len(s) for s in series)
    out = []
    for i in range(n):
        xs = [s[i] for s in series if i < len(s)]
        out.append(sum(xs) / len(xs))
    return tuple(out)


def _points(sa: SweepAnalysis) -> tuple[CollectivePoint, ...]:
    out = []
    for row, result in zip(sa.rows, sa.collectives.results, strict=True):
        t: float | None
        if row.time_basis == "gpu" and row.gpu_time_us is not None:
            t, timing, busbw = row.gpu_time_us, "gpu", row.busbw_gbps
            samples = _per_iteration(result.gpu_timings)
        else:
            t, timing, busbw, samples = row.time_us, "call", row.busbw_gbps, _per_iteration(result.timings)
        out.append(CollectivePoint(sa.collectives.scope, row.op, row.size_bytes, row.n, t, busbw, samples, timing,
                                   row.status, row.algo_label))
    return tuple(out)


def _pair(p: PairPath) -> TopologyPair:
    return TopologyPair(p.a, p.b, topo_label(p), p.via, p.expected_gbps)


def _copies(na: NodeAnalysis) -> tuple[CopyPoint, ...]:
    peer = na.node.peer if na.node is not None else None
    copies = peer.copies if peer is not None else ()
    if len(copies) != len(na.copies):  # rows are one per copy (analysis.node.copy_rows); never mis-pair
        return tuple(CopyPoint(r, ()) for r in na.copies)
    return tuple(CopyPoint(r, tuple(c.timing.samples_us) if c.timing is not None else ())
                 for r, c in zip(na.copies, copies, strict=True))


def node_side(na: NodeAnalysis | None) -> NodeSide | None:
    """The comparison's view of one analysed node; None for a run without node tests."""
    if na is None or na.node is None:
        return None
    return NodeSide(
        collectives=tuple(p for sa in na.sweeps for p in _points(sa)),
        nccl_versions=tuple((sa.collectives.scope, sa.collectives.nccl_version) for sa in na.sweeps),
        copies=_copies(na), counters=na.counters, pairs=tuple(_pair(p) for p in na.paths), nvlinks=na.nvlinks,
    )


def world_side(sweeps: Sequence[SweepAnalysis]) -> NodeSide | None:
    """A fleet's collectives across all its nodes as a side of a comparison; None when it ran none."""
    if not sweeps:
        return None
    return NodeSide(tuple(p for sa in sweeps for p in _points(sa)),
                    tuple((sa.collectives.scope, sa.collectives.nccl_version) for sa in sweeps), (), (), (), ())
