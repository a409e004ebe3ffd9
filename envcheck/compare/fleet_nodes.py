"""A fleet report's nodes as reports of their own (``label:node``), paired by host and GPU UUIDs for ``diff``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from envcheck.analysis import Analysis
from envcheck.analysis.collectives import analyse_sweep
from envcheck.compare import stats
from envcheck.compare.diff import Diff, ReportInfo, compare_analysed
from envcheck.compare.machine import machine_of
from envcheck.compare.match import NodeId, Unmatched, pair_nodes
from envcheck.compare.node_diff import NodeSide, WorldComparison, compare_sides, world_side
from envcheck.model import Report
from envcheck.model.fleet import FleetNode


@dataclass(frozen=True)
class NodeReport:
    """One node of a report: a fleet's node as a report of its own, or a whole non-fleet report."""

    label: str
    report: Report
    id: NodeId
    fleet: bool = False  # a node of a fleet report


def _uuids(report: Report, indices: Sequence[int]) -> frozenset[str]:
    m = machine_of(report)
    by_index = {g.index: g.uuid for g in m.gpus}
    if not indices:
        return frozenset(u for u in by_index.values() if u)
    found = [by_index.get(i) for i in indices]
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
        return (NodeReport(label, report, NodeId(label, report.host, _uuids(report, ()), report.host)),)
    out = []
    for node in report.fleet.nodes:
        host = node.node.host if node.node is not None and node.node.host else node.host
        r = dataclasses.replace(report, kind="run", host=host, environment=node.environment or report.environment,
                                checks=node.checks, benches=node.benches, node=node.node, fleet=None)
        name = f"{label}:{node.host}"
        out.append(NodeReport(name, r, NodeId(name, host, _uuids(r, _node_gpus(report, node)), node.host), fleet=True))
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
    unmatched: list[Unmatched] = []
    for other in reports[1:]:
        pairs, left = pair_nodes(tuple(n.id for n, _ in base), tuple(n.id for n, _ in other))
        unmatched += [u for u in left if u.side == "other" or u not in unmatched]
        for p in pairs:
            (nb, ab), (no, ao) = base[p.base], other[p.other]
            comps.append(compare_analysed((nb.label, ab), (no.label, ao), practical=practical,
                                          confidence=confidence, resamples=resamples, seed=seed))
    kw = {"practical": practical, "confidence": confidence, "resamples": resamples, "seed": seed}
    first, base_side = worlds[0] if worlds else ("", None)
    world_cmps = [WorldComparison(first, label, compare_sides(base_side, side, **kw))  # type: ignore[arg-type]
                  for label, side in worlds[1:] if base_side is not None and side is not None]
    infos = [n for n, _ in base] + [n for o in reports[1:] for n, _ in o]
    return Diff(tuple(ReportInfo.of(n.label, n.report) for n in infos), tuple(comps), practical * 100, confidence,
                resamples, tuple(unmatched), tuple(world_cmps))
