"""Derived numbers of a fleet: each node's metrics, its verdict against a baseline or the fleet's
median under SuperBench-style rules (metric, direction, margin), the nodes to take out of service and
why, and where a slow collective comes from (bisection over sub-groups of ranks).

Pure functions of the raw results. A metric that could not be measured never passes: the node is
``incomplete`` and listed with the reason, beside the nodes that failed a rule.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.analysis.node import GpuRates, collective_rows, copy_rows, gpu_rates
from envcheck.model.fleet import Baseline, Fleet, FleetNode, RankStatus, Reference, Rule

# --------------------------------------------------------------------------- metrics

# SuperBench-style rules: each metric name starting with ``metric`` is held to its reference.
# The margins: a GPU's copy bandwidth and matmul rate repeat within ~1-2 % run to run on an idle
# GPU (the H200 reports in reports/), so 5 % is a real shortfall; links and collectives vary more
# with NCCL's channel setup and placement, hence 10 %. Failed checks and wrong results: none allowed.
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("gpu.bandwidth_gbps", "higher", 0.05),
    Rule("gpu.matmul_tflops", "higher", 0.05),
    Rule("peer.", "higher", 0.10),
    Rule("node.", "higher", 0.10),
    Rule("wrong.", "lower", 0.0),
    Rule("checks.failed", "lower", 0.0),
)


# Node tests skipped because they do not apply, not because they failed.
NOT_ASKED = ("no_cuda", "not_requested", "single_gpu")


@dataclass(frozen=True)
class Metric:
    """One number that stands for a node, or why it is missing."""

    name: str
    value: float | None
    reason: str | None = None
    algo: str | None = None  # NCCL's algorithm/protocol behind a busbw


def node_metrics(node: FleetNode, rates: Sequence[GpuRates] | None = None) -> tuple[Metric, ...]:
    """A node's metrics: its slowest GPU, its slowest peer link, its collectives at their largest size.

    The slowest member stands for the node, because a job runs at the pace of its slowest GPU.
    ``rates``: its GPUs' rates already derived (one per bench), else they are derived here.
    """
    out: list[Metric] = []
    rates = list(rates) if rates is not None else [gpu_rates(b) for b in node.benches]
    on_gpu = any(getattr(b.device, "backend", None) == "cuda" for b in node.benches)
    matmul_planned = any(c.op == "matmul" for b in node.benches for c in (*b.cases, *b.skipped))
    for name, attr, planned in (("gpu.bandwidth_gbps", "bandwidth_gbps", on_gpu),
                                ("gpu.matmul_tflops", "matmul_tflops", matmul_planned)):
        # A metric of a test nobody asked for (a CPU run, --ops without matmul) is no finding; one that
        # was planned and is missing is.
        if node.benches and not planned:
            continue
        vals = [getattr(r, attr) for r in rates if getattr(r, attr) is not None]
        if not node.benches:
            out.append(Metric(name, None, "no_bench"))
        elif len(vals) < len(node.benches):
            out.append(Metric(name, None, "not_measured_on_every_gpu"))
        else:
            out.append(Metric(name, min(vals)))
    n = node.node
    topo = n.topology if n is not None else None
    if n is not None and len(n.gpus) > 1:
        crashed = [sk.reason for sk in n.skipped if sk.test == "peer_copies" and sk.reason not in NOT_ASKED]
        if crashed or (n.peer is not None and n.peer.error and not n.peer.copies):
            out.append(Metric("peer.d2d_gbps", None, crashed[0] if crashed else n.peer.error))
        elif n.peer is not None:
            rows = copy_rows(n.peer, topo)
            for kind in ("d2d", "h2d", "d2h"):
                planned = [r for r in rows if r.kind == kind and r.method == "copy_engine" and r.directions == 1]
                if not planned:
                    continue
                if any(r.gbps is None or r.wrong for r in planned):
                    out.append(Metric(f"peer.{kind}_gbps", None, "copy_failed_or_wrong"))
                else:
                    out.append(Metric(f"peer.{kind}_gbps", min(r.gbps for r in planned if r.gbps is not None)))
    wrong = 0
    unverified = False
    for c in (n.collectives if n is not None else ()):
        rows_c = collective_rows(c)
        for op in sorted({r.op for r in rows_c}):
            measured = [r for r in rows_c if r.op == op and r.status != "skipped"]
            if not measured:
                # Every size skipped (never reached, or no memory for any): never a pass.
                out.append(Metric(f"node.{op}.busbw_gbps", None, "not_run"))
                continue
            largest = max(measured, key=lambda r: r.size_bytes)
            name = f"node.{op}.busbw_gbps@{largest.size_bytes}"
            out.append(Metric(name, largest.busbw_gbps, algo=largest.algo_label)
                       if largest.status == "ok" and largest.busbw_gbps
                       else Metric(name, None, f"collective_{largest.status}"))
            for r in measured:
                if r.wrong:
                    wrong += r.wrong
                if r.wrong is None:
                    unverified = True
    if n is not None and n.collectives:
        out.append(Metric("wrong.collective_elements", None, "not_verified") if unverified and not wrong
                   else Metric("wrong.collective_elements", float(wrong)))
    if n is not None and len(n.gpus) > 1:
        crashed = [sk.reason for sk in n.skipped if sk.test == "collectives" and sk.reason not in NOT_ASKED]
        if crashed:
            out.append(Metric("node.collectives", None, crashed[0]))
    out.append(Metric("checks.failed", float(sum(c.status == "fail" for c in node.checks))))
    return tuple(out)


def _rule_for(name: str, rules: Sequence[Rule]) -> Rule | None:
    best = None
    for r in rules:
        if name.startswith(r.metric) and (best is None or len(r.metric) > len(best.metric)):
            best = r
    return best


def _references(nodes: Sequence[FleetNode],
                metrics: Sequence[Sequence[Metric]] | None = None) -> tuple[Reference, ...]:
    """Each metric's median over the nodes that measured it. A busbw's median is taken over the nodes
    whose NCCL chose the most common algorithm for it, and carries that algorithm. ``metrics``: each
    node's metrics already derived, in node order."""
    values: dict[str, list[tuple[float, str | None]]] = {}
    for i, node in enumerate(nodes):
        for m in (metrics[i] if metrics is not None else node_metrics(node)):
            if m.value is not None:
                values.setdefault(m.name, []).append((m.value, m.algo))
    out = []
    for name, vals in sorted(values.items()):
        algos = [a for _, a in vals if a is not None]
        common = max(sorted(set(algos)), key=algos.count) if algos else None
        same = [v for v, a in vals if a == common] if common is not None else [v for v, _ in vals]
        out.append(Reference(name, statistics.median(same), common))
    return tuple(out)


def fleet_medians(fleet: Fleet, metrics: Sequence[Sequence[Metric]] | None = None) -> tuple[Reference, ...]:
    """Each metric's median over the fleet's nodes (see :func:`_references`)."""
    return _references(fleet.nodes, metrics)


def rules_in_force(fleet: Fleet) -> tuple[Rule, ...]:
    """The rules the verdicts were judged by: the fleet's own, else the defaults."""
    return fleet.rules or DEFAULT_RULES


def references(fleet: Fleet, metrics: Sequence[Sequence[Metric]] | None = None) -> tuple[tuple[Reference, ...], str]:
    """The values each node is held to and where they come from: the baseline's (``baseline``) when the
    fleet has one, else the fleet's medians (``fleet_median``)."""
    if fleet.baseline is not None and fleet.baseline.values:
        return fleet.baseline.values, "baseline"
    return fleet_medians(fleet, metrics), "fleet_median"


@dataclass(frozen=True)
class Finding:
    """Why a node is not passing: a metric worse than its reference, or one that is missing.

    ``kind``: ``worse`` (``value`` vs ``reference`` from ``source``: ``baseline`` or ``fleet_median``,
    ``shortfall`` the fraction worse), ``missing`` (``reason``), ``rank_failed`` (``ranks``),
    ``algorithm_differs`` (a busbw whose NCCL algorithm is not the reference's: ``reason`` names both).
    ``margin``: the rule's allowance the metric was held to (``direction`` says which way is better).
    """

    kind: str
    metric: str | None = None
    value: float | None = None
    reference: float | None = None
    source: str | None = None
    shortfall: float | None = None
    reason: str | None = None
    ranks: tuple[int, ...] = ()
    margin: float | None = None
    direction: str | None = None


@dataclass(frozen=True)
class NodeVerdict:
    """``pass``, ``fail`` (a rule failed or a rank failed) or ``incomplete`` (something was not measured)."""

    host: str
    status: str
    findings: tuple[Finding, ...] = ()


def judge_node(node: FleetNode, references: Sequence[Reference], source: str, rules: Sequence[Rule],
               failed_ranks: Sequence[int] = (), metrics: Sequence[Metric] | None = None) -> NodeVerdict:
    refs = {r.metric: r for r in references}
    findings: list[Finding] = []
    if failed_ranks:
        findings.append(Finding("rank_failed", ranks=tuple(failed_ranks)))
    metrics = node_metrics(node) if metrics is None else metrics
    for m in metrics:
        rule = _rule_for(m.name, rules)
        if rule is None:
            continue
        if m.value is None:
            findings.append(Finding("missing", m.name, reason=m.reason, margin=rule.margin, direction=rule.direction))
            continue
        reference = refs.get(m.name)
        if reference is None:
            continue
        ref = reference.value
        if m.algo and reference.algo and m.algo != reference.algo:
            # Not like with like: say so, whatever the numbers.
            findings.append(Finding("algorithm_differs", m.name, m.value, ref, source,
                                    reason=f"{m.algo} vs {reference.algo}", margin=rule.margin,
                                    direction=rule.direction))
        if rule.direction == "higher":
            worse = m.value < ref * (1 - rule.margin)
            short = 1 - m.value / ref if ref else None
        else:
            worse = m.value > ref * (1 + rule.margin)
            short = (m.value / ref - 1) if ref else None
        if worse:
            findings.append(Finding("worse", m.name, m.value, ref, source, short, margin=rule.margin,
                                    direction=rule.direction))
    # A reference the node has no metric for (a size it could not reach, a test that never ran) was not
    # measured: never a pass.
    measured = {m.name for m in metrics}
    for ref_name in sorted(set(refs) - measured):
        rule = _rule_for(ref_name, rules)
        if rule is not None:
            findings.append(Finding("missing", ref_name, reference=refs[ref_name].value, source=source,
                                    reason="not_measured", margin=rule.margin, direction=rule.direction))
    if any(f.kind in ("worse", "rank_failed") for f in findings):
        status = "fail"
    elif findings:
        status = "incomplete"
    else:
        status = "pass"
    return NodeVerdict(node.host, status, tuple(findings))


def judge(fleet: Fleet, metrics: Sequence[Sequence[Metric]] | None = None) -> tuple[NodeVerdict, ...]:
    """Every node's verdict: against the baseline's values when the fleet has one, else the fleet median.
    ``metrics``: each node's metrics already derived, in node order."""
    rules = rules_in_force(fleet)
    refs, source = references(fleet, metrics)
    failed: dict[str, list[int]] = {}
    for r in fleet.ranks:
        if r.status != "ok":
            failed.setdefault(r.host or "?", []).append(r.rank)
    out = [judge_node(n, refs, source, rules, failed.get(n.host, ()), metrics[i] if metrics is not None else None)
           for i, n in enumerate(fleet.nodes)]
    known = {n.host for n in fleet.nodes}
    for host, ranks in sorted(failed.items()):
        if host not in known:
            out.append(NodeVerdict(host, "fail", (Finding("rank_failed", ranks=tuple(ranks)),)))
    return tuple(out)


def to_drain(fleet: Fleet) -> tuple[NodeVerdict, ...]:
    """The nodes to take out of service, with their findings: those that failed, and those that could
    not be vouched for (a test that could not run never counts as a pass)."""
    return tuple(v for v in judge(fleet) if v.status != "pass")


def baseline_from_nodes(nodes: Sequence[FleetNode], source: str, host: str | None = None,
                        created: str | None = None) -> Baseline:
    """A baseline from a previous report's nodes (one node for a single-node report): per metric, the
    median over those nodes."""
    return Baseline(source, _references(nodes), host, created)


# --------------------------------------------------------------------------- keys and metric names

# Every key this module hands to the presentation, each phrased in the catalogues.
FINDING_KINDS = ("worse", "missing", "rank_failed", "algorithm_differs")
VERDICT_STATUSES = ("pass", "fail", "incomplete")
SOURCES = ("baseline", "fleet_median")
# Why a metric has no value (Metric.reason); a node test's error or skip reason may stand there too
# (envcheck.analysis.node.RUN_ERRORS, SKIP_REASONS), or an exception's last line.
MISSING_REASONS = ("no_bench", "not_measured", "not_measured_on_every_gpu", "copy_failed_or_wrong", "not_run",
                   "not_verified",
                   *(f"collective_{s}" for s in ("ok", "error", "wrong", "unverified")))
# What a metric name stands for (describe_metric), and the unit of its value.
METRIC_KEYS = ("gpu_bandwidth", "gpu_matmul", "peer", "busbw", "wrong_elements", "checks_failed", "collectives",
               "other")
_METRIC_PATTERNS = (
    (re.compile(r"gpu\.bandwidth_gbps"), "gpu_bandwidth", "GB/s"),
    (re.compile(r"gpu\.matmul_tflops"), "gpu_matmul", "TFLOP/s"),
    (re.compile(r"peer\.(?P<kind>[a-z0-9]+)_gbps"), "peer", "GB/s"),
    (re.compile(r"node\.(?P<op>[a-z_]+)\.busbw_gbps(?:@(?P<size_bytes>\d+))?"), "busbw", "GB/s"),
    (re.compile(r"wrong\.collective_elements"), "wrong_elements", ""),
    (re.compile(r"checks\.failed"), "checks_failed", ""),
    (re.compile(r"node\.collectives"), "collectives", ""),
)


@dataclass(frozen=True)
class MetricName:
    """What a metric name (as :func:`node_metrics` writes it) stands for: a key of ``METRIC_KEYS``, its
    parameters (``kind`` of copy, collective ``op`` and ``size_bytes``) and the unit of its values."""

    key: str
    params: tuple[tuple[str, Any], ...] = ()
    unit: str = ""


def describe_metric(name: str) -> MetricName:
    """The inverse of the names :func:`node_metrics` builds; an unknown name (a newer baseline's) is
    ``other`` with the name itself as its parameter."""
    for pattern, key, unit in _METRIC_PATTERNS:
        m = pattern.fullmatch(name)
        if m:
            params = tuple((k, int(v) if k == "size_bytes" else v) for k, v in m.groupdict().items() if v is not None)
            return MetricName(key, params, unit)
    return MetricName("other", (("name", name),))


# --------------------------------------------------------------------------- ranks

# A rank that reported in time but took this much longer than the median of the others: worth naming,
# since the rank timeout is set for the slowest machine a fleet may hold, not for this one.
SLOW_RANK_FACTOR = 1.5


@dataclass(frozen=True)
class SlowRank:
    rank: int
    host: str | None
    elapsed_s: float
    others_median_s: float


def slow_ranks(ranks: Sequence[RankStatus], factor: float = SLOW_RANK_FACTOR) -> tuple[SlowRank, ...]:
    """Ranks that reported in time but took more than ``factor`` times the median of the other ranks."""
    timed = [r for r in ranks if r.status == "ok" and r.elapsed_s is not None]
    out = []
    for r in timed:
        others = [x.elapsed_s for x in timed if x.rank != r.rank and x.elapsed_s is not None]
        if len(others) < 1 or r.elapsed_s is None:
            continue
        med = statistics.median(others)
        if med > 0 and r.elapsed_s > factor * med:
            out.append(SlowRank(r.rank, r.host, r.elapsed_s, med))
    return tuple(out)


# --------------------------------------------------------------------------- a fleet, analysed once


@dataclass(frozen=True)
class FleetNodeAnalysis:
    """One node of a fleet: its GPUs' analyses (``benches``: ``BenchAnalysis``), its node analysis, its
    metrics, its verdict and how its ranks ended."""

    node: FleetNode
    benches: tuple[Any, ...]
    analysis: Any  # envcheck.analysis.node.NodeAnalysis
    metrics: tuple[Metric, ...]
    verdict: NodeVerdict
    ranks: tuple[RankStatus, ...]


@dataclass(frozen=True)
class FleetAnalysis:
    """Everything derived from a fleet report. ``verdicts``: one per node, and one per host whose ranks
    failed before it sent anything; ``drain``: those not passing; ``references`` and ``source``: what
    the nodes were held to; ``sweeps``: the world collectives with their narrowing."""

    fleet: Fleet
    nodes: tuple[FleetNodeAnalysis, ...]
    verdicts: tuple[NodeVerdict, ...]
    rules: tuple[Rule, ...]
    references: tuple[Reference, ...]
    source: str
    sweeps: tuple[Any, ...]  # envcheck.analysis.node.SweepAnalysis
    failed_ranks: tuple[RankStatus, ...]
    slow: tuple[SlowRank, ...]

    @property
    def drain(self) -> tuple[NodeVerdict, ...]:
        return tuple(v for v in self.verdicts if v.status != "pass")


def analyse_fleet(fleet: Fleet, analyse_bench: Callable[[Any, Any], Any]) -> FleetAnalysis:
    """``analyse_bench(environment, bench)`` gives a ``BenchAnalysis`` (``envcheck.analysis``)."""
    from envcheck.analysis.node import analyse_node, analyse_sweep, rates_from
    from envcheck.model import Environment

    per_node = []
    for n in fleet.nodes:
        env = n.environment or Environment()
        benches = tuple(analyse_bench(env, b) for b in n.benches)
        rates = [rates_from(ba.bench, ba.ceilings, ba.results) for ba in benches]
        per_node.append((n, benches, analyse_node(n.node, benches, env), node_metrics(n, rates)))
    metrics = [m for *_, m in per_node]
    verdicts = judge(fleet, metrics)
    refs, source = references(fleet, metrics)
    nodes = tuple(FleetNodeAnalysis(n, b, a, m, verdicts[i], tuple(r for r in fleet.ranks if r.rank in n.ranks))
                  for i, (n, b, a, m) in enumerate(per_node))
    return FleetAnalysis(fleet, nodes, verdicts, rules_in_force(fleet), refs, source,
                         tuple(analyse_sweep(c) for c in fleet.collectives),
                         tuple(r for r in fleet.ranks if r.status != "ok"), slow_ranks(fleet.ranks))
