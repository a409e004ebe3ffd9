"""A fleet's derived numbers: each node's metrics and its one verdict against a baseline or the fleet's median under
SuperBench-style rules (metric, direction, margin). A metric that could not be measured never passes.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.analysis.collectives import collective_rows
from envcheck.analysis.links import copy_rows
from envcheck.analysis.node import NOT_APPLICABLE, GpuRates, NodeProblem, gpu_rates, node_problems
from envcheck.model.facts import Check
from envcheck.model.fleet import Baseline, Fleet, FleetNode, RankStatus, Reference, Rule
from envcheck.model.node import Collectives

if TYPE_CHECKING:
    from envcheck.analysis import BenchAnalysis
    from envcheck.analysis.collectives import SweepAnalysis
    from envcheck.analysis.node import NodeAnalysis
    from envcheck.model import Bench, Environment
    from envcheck.model.bench import ParamValue

# --------------------------------------------------------------------------- metrics

# Each metric name starting with ``metric`` is held to its reference. A GPU's bandwidth and matmul rate repeat
# within ~1-2 % (docs/fleet.md), links and collectives vary more with NCCL's setup; failures: none allowed.
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("gpu.bandwidth_gbps", "higher", 0.05),
    Rule("gpu.matmul_tflops", "higher", 0.05),
    Rule("peer.", "higher", 0.10),
    Rule("node.", "higher", 0.10),
    Rule("wrong.", "lower", 0.0),
    Rule("checks.failed", "lower", 0.0),
)


@dataclass(frozen=True)
class Metric:
    """One number that stands for a node, or why it is missing."""

    name: str
    value: float | None
    reason: str | None = None
    algo: str | None = None  # NCCL's algorithm/protocol behind a busbw


def node_metrics(node: FleetNode, rates: Sequence[GpuRates] | None = None) -> tuple[Metric, ...]:
    """A node's metrics: its slowest GPU (a job runs at its pace), slowest peer link and collectives at their
    largest size. ``rates``: one per bench, if already derived."""
    out: list[Metric] = []
    rates = list(rates) if rates is not None else [gpu_rates(b) for b in node.benches]
    on_gpu = any(getattr(b.device, "backend", None) == "cuda" for b in node.benches)
    matmul_planned = on_gpu and any(c.op == "matmul" for b in node.benches for c in (*b.cases, *b.skipped))
    for name, attr, planned in (("gpu.bandwidth_gbps", "bandwidth_gbps", on_gpu),
                                ("gpu.matmul_tflops", "matmul_tflops", matmul_planned)):
        # A test nobody asked for (--ops without matmul) or that does not apply (``fleet --cpu``) is no finding.
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
        crashed = [sk.reason for sk in n.skipped if sk.test == "peer_copies" and sk.reason not in NOT_APPLICABLE]
        if crashed or (n.peer is not None and n.peer.error and not n.peer.copies):
            out.append(Metric("peer.d2d_gbps", None, crashed[0] if crashed else n.peer.error if n.peer else None))
        elif n.peer is not None:
            rows = copy_rows(n.peer, topo)
            for kind in ("d2d", "h2d", "d2h"):
                copies = [r for r in rows if r.kind == kind and r.method == "copy_engine" and r.directions == 1]
                if not copies:
                    continue
                if any(r.gbps is None or r.wrong for r in copies):
                    out.append(Metric(f"peer.{kind}_gbps", None, "copy_failed_or_wrong"))
                else:
                    out.append(Metric(f"peer.{kind}_gbps", min(r.gbps for r in copies if r.gbps is not None)))
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
        crashed = [sk.reason for sk in n.skipped if sk.test == "collectives" and sk.reason not in NOT_APPLICABLE]
        if crashed:
            out.append(Metric("node.collectives", None, crashed[0]))
    out.append(Metric("checks.failed", float(len(failed_checks(node)))))
    return tuple(out)


# Checks of the GPU driver stack do not apply to a node whose suites ran on the CPU (``fleet --cpu``).
GPU_STACK_CHECKS = ("driver.",)


def on_cpu(node: FleetNode) -> bool:
    """Every suite of the node ran on the CPU (``fleet --cpu``), and there was at least one."""
    return bool(node.benches) and all(getattr(b.device, "backend", None) != "cuda" for b in node.benches)


def failed_checks(node: FleetNode) -> tuple[Check, ...]:
    """The node's failed health checks that count against it."""
    cpu_only = on_cpu(node)
    return tuple(c for c in node.checks
                 if c.status == "fail" and not (cpu_only and c.id.startswith(GPU_STACK_CHECKS)))


# Why a rule was not applied on a CPU fleet (``fleet.not_applied.<reason>``): a shared CPU's speed is shown but not
# judged (as in ``burn --cpu``); a CPU has no GPUs to copy between; no node ran the test.
NOT_APPLIED_REASONS = ("cpu_speed", "no_gpu_pairs", "not_run")
_GPU_SPEED_RULES = ("gpu.bandwidth_gbps", "gpu.matmul_tflops")


@dataclass(frozen=True)
class NotApplied:
    """A rule in force that no node of a CPU fleet was held to, and why (``NOT_APPLIED_REASONS``)."""

    rule: Rule
    reason: str


def not_applied(fleet: Fleet, rules: Sequence[Rule], metrics: Sequence[Sequence[Metric]],
                refs: Sequence[Reference]) -> tuple[NotApplied, ...]:
    """The rules a CPU fleet was not judged by (no node has a metric nor a reference under them); none on GPUs."""
    if not fleet.nodes or not all(on_cpu(n) for n in fleet.nodes):
        return ()
    held = {r for ms in metrics for m in ms if (r := _rule_for(m.name, rules)) is not None}
    held |= {r for ref in refs if (r := _rule_for(ref.metric, rules)) is not None}
    return tuple(NotApplied(r, "cpu_speed" if r.metric.startswith(_GPU_SPEED_RULES)
                            else "no_gpu_pairs" if r.metric.startswith("peer.") else "not_run")
                 for r in rules if r not in held)


def _rule_for(name: str, rules: Sequence[Rule]) -> Rule | None:
    return max((r for r in rules if name.startswith(r.metric)), key=lambda r: len(r.metric), default=None)


def _references(metrics: Sequence[Sequence[Metric]]) -> tuple[Reference, ...]:
    """Each metric's median over the nodes that measured it; a busbw's over the nodes whose NCCL chose the most
    common algorithm, which it carries."""
    values: dict[str, list[tuple[float, str | None]]] = {}
    for ms in metrics:
        for m in ms:
            if m.value is not None:
                values.setdefault(m.name, []).append((m.value, m.algo))
    out = []
    for name, vals in sorted(values.items()):
        algos = [a for _, a in vals if a is not None]
        common = max(sorted(set(algos)), key=algos.count) if algos else None
        same = [v for v, a in vals if a == common] if common is not None else [v for v, _ in vals]
        out.append(Reference(name, statistics.median(same), common))
    return tuple(out)


def references(fleet: Fleet, metrics: Sequence[Sequence[Metric]]) -> tuple[tuple[Reference, ...], str]:
    """The values each node is held to and their source: the baseline's, else the fleet's medians."""
    if fleet.baseline is not None and fleet.baseline.values:
        return fleet.baseline.values, "baseline"
    return _references(metrics), "fleet_median"


@dataclass(frozen=True)
class Finding:
    """Why a node is not passing (``kind``, FINDING_KINDS): ``worse`` (``value`` vs ``reference``, ``shortfall`` the
    fraction worse), ``missing``, ``rank_failed`` (``ranks`` lost in phase ``reason``), ``algorithm_differs``,
    ``node_problem`` (``value`` problems its own tests found, the first ``reason``)."""

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

    @property
    def fails(self) -> bool:
        """Whether it fails its node (else the node is incomplete, or it only warns)."""
        return self.kind in FAILING_KINDS


@dataclass(frozen=True)
class NodeVerdict:
    """``pass``, ``fail`` (a rule failed or a rank failed) or ``incomplete`` (something was not measured)."""

    host: str
    status: str
    findings: tuple[Finding, ...] = ()


def _judge_metrics(metrics: Sequence[Metric], references: Sequence[Reference], source: str,
                   rules: Sequence[Rule]) -> tuple[Finding, ...]:
    """A node's metrics held to the references under the rules."""
    refs = {r.metric: r for r in references}
    findings: list[Finding] = []
    for m in metrics:
        rule = _rule_for(m.name, rules)
        if rule is None:
            continue
        RuleFinding = functools.partial(Finding, margin=rule.margin, direction=rule.direction)
        reference = refs.get(m.name)
        if m.value is None:
            findings.append(RuleFinding("missing", m.name, reason=m.reason))
        elif rule.direction == "lower" and rule.margin == 0.0:
            # A count that must be zero is held to zero, not to a median or baseline that may have failed too.
            if m.value > 0:
                findings.append(RuleFinding("worse", m.name, m.value, 0.0, ZERO_SOURCE, None))
        elif reference is not None:
            ref = reference.value
            if m.algo and reference.algo and m.algo != reference.algo:
                # Not like with like: say so, whatever the numbers.
                findings.append(RuleFinding("algorithm_differs", m.name, m.value, ref, source,
                                            reason=f"{m.algo} vs {reference.algo}"))
            if rule.direction == "higher":
                worse = m.value < ref * (1 - rule.margin)
                short = 1 - m.value / ref if ref else None
            else:
                worse = m.value > ref * (1 + rule.margin)
                short = (m.value / ref - 1) if ref else None
            if worse:
                findings.append(RuleFinding("worse", m.name, m.value, ref, source, short))
    # A reference the node has no metric for was not measured: never a pass.
    measured = {m.name for m in metrics}
    for ref_name in sorted(set(refs) - measured):
        rule = _rule_for(ref_name, rules)
        if rule is not None:
            findings.append(Finding("missing", ref_name, reference=refs[ref_name].value, source=source,
                                    reason="not_measured", margin=rule.margin, direction=rule.direction))
    return tuple(findings)


# Where rank 0 stopped hearing from a rank: it never joined, or a phase's hand-over failed or never came.
LOST_PHASES = ("join", "suite", "node", "world")


@dataclass(frozen=True)
class LostRank:
    """A rank that failed, hung, died or never reported, and the phase it was lost in (``LOST_PHASES``)."""

    rank: int
    host: str | None
    phase: str
    status: str
    error: str | None = None
    given_s: float | None = None


def world_culprits(collectives: Collectives) -> tuple[int, ...]:
    """The ranks that stopped a sweep across nodes: those that died without a word, else those that failed; at a
    time limit only those that failed (the others were waiting on them)."""
    bad = [o for o in collectives.ranks if o.status != "ok"]
    errors = tuple(o.rank for o in bad if o.status == "error")
    if collectives.error == "timed_out":
        return errors
    return tuple(o.rank for o in bad if o.status == "missing") or errors


def lost_ranks(fleet: Fleet) -> tuple[LostRank, ...]:
    """Every rank lost in any phase: its own hand-over failed or never came, or its worker stopped the collectives
    across nodes (``world_culprits``)."""
    out: dict[int, LostRank] = {}
    for r in fleet.ranks:
        if r.status != "ok":
            phase = "join" if r.status == "missing" else (r.phase or "suite")
            out[r.rank] = LostRank(r.rank, r.host, phase, r.status, r.error, r.given_s)
    by_world = {r.world_rank: r for r in fleet.ranks if r.world_rank is not None}
    for c in fleet.collectives:
        outcomes = {o.rank: o for o in c.ranks}
        for w in world_culprits(c):
            culprit = by_world.get(w)
            if culprit is not None and culprit.rank not in out:
                out[culprit.rank] = LostRank(culprit.rank, culprit.host, "world", outcomes[w].status, outcomes[w].error)
    return tuple(out[k] for k in sorted(out))


def _unfinished_world(fleet: Fleet, lost: Sequence[LostRank]) -> dict[str, str]:
    """Host -> why, for the nodes of an unfinished sweep across nodes with no lost rank to blame."""
    named = {x.rank for x in lost}
    out: dict[str, str] = {}
    for c in fleet.collectives:
        if c.error is None:
            continue
        taking_part = [r for r in fleet.ranks if r.world_rank is not None and r.world_rank < c.world_size]
        if any(r.rank in named for r in taking_part):
            continue
        for r in taking_part:
            out.setdefault(r.host or "?", c.error)
    return out


def judge(fleet: Fleet, metrics: Sequence[Sequence[Metric]] | None = None,
          problems: Sequence[Sequence[NodeProblem]] | None = None) -> tuple[NodeVerdict, ...]:
    """Every node's one verdict against the baseline or the fleet median; a lost rank or a problem its own tests
    found fails its node; a host lost before it sent anything gets a verdict of its own."""
    rules = fleet.rules or DEFAULT_RULES
    metrics = [node_metrics(n) for n in fleet.nodes] if metrics is None else metrics
    refs, source = references(fleet, metrics)
    lost = lost_ranks(fleet)
    failed: dict[str, dict[str, list[int]]] = {}
    for x in lost:
        failed.setdefault(x.host or "?", {}).setdefault(x.phase, []).append(x.rank)
    unfinished = _unfinished_world(fleet, lost)
    out = []
    for i, n in enumerate(fleet.nodes):
        extra = _lost_findings(failed.get(n.host, {}))
        if n.host in unfinished:
            extra += (Finding("missing", "world.collectives", reason=unfinished[n.host]),)
        found = problems[i] if problems is not None else node_problems(n.node) if n.node is not None else ()
        if found:
            extra += (Finding("node_problem", value=float(len(found)), reason=found[0].key),)
        fs = extra + _judge_metrics(metrics[i], refs, source, rules)
        out.append(NodeVerdict(n.host, "fail" if any(f.fails for f in fs) else "incomplete" if fs else "pass", fs))
    known = {n.host for n in fleet.nodes}
    for host, phases in sorted(failed.items()):
        if host not in known:
            out.append(NodeVerdict(host, "fail", _lost_findings(phases)))
    return tuple(out)


def _lost_findings(phases: dict[str, list[int]]) -> tuple[Finding, ...]:
    return tuple(Finding("rank_failed", ranks=tuple(phases[p]), reason=p) for p in LOST_PHASES if p in phases)


def baseline_from_nodes(nodes: Sequence[FleetNode], source: str, host: str | None = None,
                        created: str | None = None) -> Baseline:
    """A baseline from a previous report's nodes: per metric, the median over them."""
    return Baseline(source, _references([node_metrics(n) for n in nodes]), host, created)


# --------------------------------------------------------------------------- keys and metric names

# Every key this module hands to the presentation, each phrased in the catalogues.
FINDING_KINDS = ("worse", "missing", "rank_failed", "algorithm_differs", "node_problem")
FAILING_KINDS = ("worse", "rank_failed", "node_problem")
VERDICT_STATUSES = ("pass", "fail", "incomplete")
SOURCES = ("baseline", "fleet_median")
ZERO_SOURCE = "zero"  # a finding's source where a count is held to zero whatever the reference
# Why a metric has no value; a node test's error or skip reason (analysis.node) may stand there too.
MISSING_REASONS = ("no_bench", "not_measured", "not_measured_on_every_gpu", "copy_failed_or_wrong", "not_run",
                   "not_verified",
                   *(f"collective_{s}" for s in ("ok", "error", "wrong", "unverified")))
# What a metric name stands for (describe_metric), and the unit of its value.
METRIC_KEYS = ("gpu_bandwidth", "gpu_matmul", "peer", "busbw", "wrong_elements", "checks_failed", "collectives",
               "world_collectives", "other")
_METRIC_PATTERNS = (
    (re.compile(r"gpu\.bandwidth_gbps"), "gpu_bandwidth", "GB/s"),
    (re.compile(r"gpu\.matmul_tflops"), "gpu_matmul", "TFLOP/s"),
    (re.compile(r"peer\.(?P<kind>[a-z0-9]+)_gbps"), "peer", "GB/s"),
    (re.compile(r"node\.(?P<op>[a-z_]+)\.busbw_gbps(?:@(?P<size_bytes>\d+))?"), "busbw", "GB/s"),
    (re.compile(r"wrong\.collective_elements"), "wrong_elements", ""),
    (re.compile(r"checks\.failed"), "checks_failed", ""),
    (re.compile(r"node\.collectives"), "collectives", ""),
    (re.compile(r"world\.collectives"), "world_collectives", ""),
)


@dataclass(frozen=True)
class MetricName:
    """What a metric name stands for: a key of ``METRIC_KEYS``, its parameters and the unit of its values."""

    key: str
    params: tuple[tuple[str, ParamValue], ...] = ()
    unit: str = ""


def describe_metric(name: str) -> MetricName:
    """The inverse of :func:`node_metrics`' names; an unknown name (a newer baseline's) is ``other``."""
    for pattern, key, unit in _METRIC_PATTERNS:
        m = pattern.fullmatch(name)
        if m:
            params = tuple((k, int(v) if k == "size_bytes" else v) for k, v in m.groupdict().items() if v is not None)
            return MetricName(key, params, unit)
    return MetricName("other", (("name", name),))


# --------------------------------------------------------------------------- ranks

# A rank this much slower than the others' median is worth naming: the timeout is set for the slowest machine.
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
    """One node of a fleet: its GPUs' and node analyses, metrics, verdict and how its ranks ended."""

    node: FleetNode
    benches: tuple[BenchAnalysis, ...]
    analysis: NodeAnalysis
    metrics: tuple[Metric, ...]
    verdict: NodeVerdict
    ranks: tuple[RankStatus, ...]


@dataclass(frozen=True)
class FleetAnalysis:
    """Everything derived from a fleet report. ``verdicts``: one per node and per host lost before it sent anything;
    ``references`` and ``source``: what the nodes were held to; ``sweeps``: the world collectives."""

    fleet: Fleet
    nodes: tuple[FleetNodeAnalysis, ...]
    verdicts: tuple[NodeVerdict, ...]
    rules: tuple[Rule, ...]
    references: tuple[Reference, ...]
    source: str
    sweeps: tuple[SweepAnalysis, ...]
    failed_ranks: tuple[RankStatus, ...]
    slow: tuple[SlowRank, ...]
    lost: tuple[LostRank, ...] = ()
    interrupted: bool = False  # stopped by SIGTERM, SIGHUP or Ctrl-C: what finished, and who was lost
    not_applied: tuple[NotApplied, ...] = ()  # rules of a CPU fleet no node was held to

    @property
    def applied(self) -> tuple[Rule, ...]:
        """The rules the nodes were held to: those in force less those not applied."""
        skipped = {x.rule for x in self.not_applied}
        return tuple(r for r in self.rules if r not in skipped)

    @property
    def drain(self) -> tuple[NodeVerdict, ...]:
        return tuple(v for v in self.verdicts if v.status != "pass")

    @property
    def passed(self) -> bool:
        """The fleet's verdict: every node passed, no rank was lost, and the run was not stopped."""
        return not self.drain and not self.lost and not self.interrupted


def analyse_fleet(fleet: Fleet, analyse_bench: Callable[[Environment, Bench], BenchAnalysis]) -> FleetAnalysis:
    """``analyse_bench(environment, bench)`` gives a ``BenchAnalysis`` (``envcheck.analysis``)."""
    from envcheck.analysis.collectives import analyse_sweep
    from envcheck.analysis.node import analyse_node
    from envcheck.model import Environment

    per_node = []
    for n in fleet.nodes:
        env = n.environment or Environment()
        benches = tuple(analyse_bench(env, b) for b in n.benches)
        a = analyse_node(n.node, benches, env)
        per_node.append((n, benches, a, node_metrics(n, [g.rates for g in a.gpus])))
    metrics = [m for *_, m in per_node]
    verdicts = judge(fleet, metrics, [a.problems for _, _, a, _ in per_node])
    refs, source = references(fleet, metrics)
    nodes = tuple(FleetNodeAnalysis(n, b, a, m, verdicts[i], tuple(r for r in fleet.ranks if r.rank in n.ranks))
                  for i, (n, b, a, m) in enumerate(per_node))
    rules = fleet.rules or DEFAULT_RULES
    return FleetAnalysis(fleet, nodes, verdicts, rules, refs, source,
                         tuple(analyse_sweep(c) for c in fleet.collectives),
                         tuple(r for r in fleet.ranks if r.status != "ok"), slow_ranks(fleet.ranks),
                         lost_ranks(fleet), bool(fleet.settings.get("interrupted")),
                         not_applied(fleet, rules, metrics, refs))
