"""Derived numbers: everything computed from a report's raw results, in one place.

``analyse(report)`` returns an ``Analysis``: per benchmarked device, its ceilings (theoretical
and measured, each with its source), every case's derived numbers (``CaseResult``: GB/s,
TFLOP/s, shares of the ceilings, speedup, verdict, flags, NVML conditions), findings,
recommendations and totals; for a node run (``report.node``) the node's analysis (``node``:
per-GPU rates and outliers, link paths, copies, collectives, counters, problems); for a fleet
report the fleet's (``fleet``: each node analysed the same way, verdicts, world collectives); for a run
with ``--crosscheck`` its cross-checks (``crosscheck``: each of envcheck's numbers against an independent
tool's, the ratio and its bar).
Terminal, Markdown, HTML, charts, diff and history read these; none of them computes a
throughput, a share, a speedup, a flag or a verdict itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from envcheck.analysis.burn import BurnAnalysis, analyse_burn
from envcheck.analysis.ceilings import Ceilings, ceilings, env_gpu
from envcheck.analysis.crosscheck import CrosscheckAnalysis, analyse_crosscheck
from envcheck.analysis.findings import Finding, Recommendation, findings, recommendations
from envcheck.analysis.fleet import FleetAnalysis, analyse_fleet
from envcheck.analysis.node import NodeAnalysis, analyse_node
from envcheck.analysis.phases import BenchPhases, bench_phases, node_phases
from envcheck.analysis.results import CaseResult, case_results
from envcheck.analysis.summary import Summary, summarise
from envcheck.model import Bench, CaseKey, Environment, Gpu, Report
from envcheck.model.codec import gc_paused


@dataclass(frozen=True)
class BenchAnalysis:
    bench: Bench
    gpu: Gpu | None  # the probed GPU the bench ran on (None: CPU, or not matched)
    ceilings: Ceilings
    results: tuple[CaseResult, ...]
    findings: tuple[Finding, ...]
    recommendations: tuple[Recommendation, ...]
    summary: Summary
    phases: BenchPhases | None = None  # where the run's time went (None: not recorded)

    @cached_property
    def by_key(self) -> dict[CaseKey, CaseResult]:
        out: dict[CaseKey, CaseResult] = {}
        for r in self.results:
            out.setdefault(r.key, r)
        return out


@dataclass(frozen=True)
class Analysis:
    report: Report
    benches: tuple[BenchAnalysis, ...]
    node: NodeAnalysis | None = None  # a run with --gpus: the node's results against its links
    fleet: FleetAnalysis | None = None  # a fleet report
    burn: BurnAnalysis | None = None  # envcheck burn / run --burn: the burn-in's numbers and verdicts
    crosscheck: CrosscheckAnalysis | None = None  # run --crosscheck: ratios to independent tools, bars, findings
    fleet_crosschecks: tuple[tuple[str, CrosscheckAnalysis], ...] = ()  # fleet --crosscheck: (node's host, its own)
    node_phases: BenchPhases | None = None  # where the node tests' time went (run --gpus)

    @property
    def bench(self) -> BenchAnalysis | None:
        """The first (or only) device's analysis."""
        return self.benches[0] if self.benches else None


def analyse_bench(report: Report, bench: Bench) -> BenchAnalysis:
    return analyse_bench_in(report.environment, bench)


def analyse_bench_in(env: Environment, bench: Bench) -> BenchAnalysis:
    """One bench against the environment it ran in (a fleet node's own, for instance)."""
    ceils = ceilings(env, bench)
    results = case_results(bench, ceils)
    found = findings(bench, results, ceils)
    return BenchAnalysis(bench, env_gpu(env, bench), ceils, results, found, recommendations(found),
                         summarise(results), bench_phases(bench, env.probe_s))


def analyse(report: Report) -> Analysis:
    with gc_paused():  # many objects, no cycles: see model/codec.py
        benches = tuple(analyse_bench(report, b) for b in report.benches)
        node = analyse_node(report.node, benches, report.environment) if report.node is not None else None
        fleet = analyse_fleet(report.fleet, analyse_bench_in) if report.fleet is not None else None
        burn = analyse_burn(report.burn) if report.burn is not None else None
        cross = analyse_crosscheck(report.crosscheck, report.benches, report.node) if report.crosscheck is not None else None
        nodes = report.fleet.nodes if report.fleet is not None else ()
        fleet_cross = tuple((n.host, analyse_crosscheck(n.crosscheck, n.benches, n.node)) for n in nodes
                            if n.crosscheck is not None)
    return Analysis(report, benches, node, fleet, burn, cross, fleet_cross, node_phases(report.node))


__all__ = ["Analysis", "BenchAnalysis", "CaseResult", "Ceilings", "CrosscheckAnalysis", "Finding", "FleetAnalysis",
           "NodeAnalysis", "Recommendation", "Summary", "analyse"]
