"""Derived numbers: everything computed from a report's raw results, in one place. ``analyse(report)`` is what
every view, diff and history reads; none of them computes a throughput, a share, a flag or a verdict itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from envcheck.analysis.burn import BurnAnalysis, analyse_burn
from envcheck.analysis.ceilings import Ceilings, ceilings, env_gpu, theoretical_bandwidth_gbps
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

    @cached_property
    def best(self) -> dict[str, Finding]:
        """Per op, the finding naming its best row (a compute-bound op's fastest precision's)."""
        def tflops(f: Finding) -> float:
            v = f.params.get("tflops")
            return float(v) if isinstance(v, (int, float)) else 0.0

        out: dict[str, Finding] = {}
        for f in self.findings:
            if f.key in ("finding.bandwidth_best", "finding.compute_best", "finding.compute_best_nopeak"):
                op = str(f.params["op"])
                if op not in out or tflops(f) > tflops(out[op]):
                    out[op] = f
        return out

    @cached_property
    def fastest(self) -> dict[str, CaseResult]:
        """Per op, its row of the highest throughput as measured (what a run without ceilings quotes)."""
        out: dict[str, CaseResult] = {}
        for r in self.results:
            if r.rate is not None and (r.case.op not in out or r.rate > (out[r.case.op].rate or 0.0)):
                out[r.case.op] = r
        return out

    @cached_property
    def tolerance_ranges(self) -> tuple[tuple[str, float, float], ...]:
        """(precision, lowest, highest relative-L2 bound) of the judged cases, lowest first."""
        tol: dict[str, tuple[float, float]] = {}
        for r in self.results:
            if r.case.accuracy is not None:
                lo, hi = tol.get(r.tolerance.precision, (r.tolerance.rel_l2, r.tolerance.rel_l2))
                tol[r.tolerance.precision] = (min(lo, r.tolerance.rel_l2), max(hi, r.tolerance.rel_l2))
        return tuple((p, lo, hi) for p, (lo, hi) in sorted(tol.items(), key=lambda kv: kv[1]))

    @cached_property
    def samples(self) -> dict[str, tuple[int, int]]:
        """Per timing method, the fewest and most samples a case's time was taken from."""
        out: dict[str, tuple[int, int]] = {}
        for c in self.bench.cases:
            for tm in (c.gpu, c.launch):
                if tm:
                    lo, hi = out.get(tm.method, (tm.n, tm.n))
                    out[tm.method] = (min(lo, tm.n), max(hi, tm.n))
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

    @cached_property
    def theoretical_bandwidths(self) -> dict[int, float]:
        """Each probed GPU's theoretical memory bandwidth, from its own facts (a stored value is never read)."""
        gpus = self.report.environment.gpus
        return {g.index: bw for g in gpus
                if (bw := theoretical_bandwidth_gbps(g.get("mem_clock_max_mhz"), g.get("memory_bus_width_bits")))
                is not None}


def analyse_bench(env: Environment, bench: Bench) -> BenchAnalysis:
    """One bench against the environment it ran in (a fleet node's own, for instance)."""
    ceils = ceilings(env, bench)
    results = case_results(bench, ceils)
    found = findings(bench, results, ceils)
    return BenchAnalysis(bench, env_gpu(env, bench), ceils, results, found, recommendations(found),
                         summarise(results), bench_phases(bench, env.probe_s))


def analyse(report: Report) -> Analysis:
    with gc_paused():  # many objects, no cycles: see model/codec.py
        benches = tuple(analyse_bench(report.environment, b) for b in report.benches)
        node = analyse_node(report.node, benches, report.environment) if report.node is not None else None
        fleet = analyse_fleet(report.fleet, analyse_bench) if report.fleet is not None else None
        burn = analyse_burn(report.burn) if report.burn is not None else None
        cross = analyse_crosscheck(report.crosscheck, report.benches, report.node) if report.crosscheck is not None else None
        nodes = report.fleet.nodes if report.fleet is not None else ()
        fleet_cross = tuple((n.host, analyse_crosscheck(n.crosscheck, n.benches, n.node)) for n in nodes
                            if n.crosscheck is not None)
    return Analysis(report, benches, node, fleet, burn, cross, fleet_cross, node_phases(report.node))


__all__ = ["Analysis", "BenchAnalysis", "CaseResult", "Ceilings", "CrosscheckAnalysis", "Finding", "FleetAnalysis",
           "NodeAnalysis", "Recommendation", "Summary", "analyse"]
