"""Derived numbers: everything computed from a report's raw results, in one place.

``analyse(report)`` returns an ``Analysis``: per benchmarked device, its ceilings (theoretical
and measured, each with its source), every case's derived numbers (``CaseResult``: GB/s,
TFLOP/s, shares of the ceilings, speedup, verdict, flags, NVML conditions), findings,
recommendations and totals. Terminal, Markdown, HTML, charts, diff and history read these;
none of them computes a throughput, a share, a speedup, a flag or a verdict itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from envcheck.analysis.ceilings import Ceilings, ceilings, env_gpu
from envcheck.analysis.findings import Finding, Recommendation, findings, recommendations
from envcheck.analysis.results import CaseResult, case_results
from envcheck.analysis.summary import Summary, summarise
from envcheck.model import Bench, CaseKey, Gpu, Report
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

    @property
    def bench(self) -> BenchAnalysis | None:
        """The first (or only) device's analysis."""
        return self.benches[0] if self.benches else None


def analyse_bench(report: Report, bench: Bench) -> BenchAnalysis:
    ceils = ceilings(report.environment, bench)
    results = case_results(bench, ceils)
    found = findings(bench, results, ceils)
    return BenchAnalysis(bench, env_gpu(report.environment, bench), ceils, results, found,
                         recommendations(found), summarise(results))


def analyse(report: Report) -> Analysis:
    with gc_paused():  # many objects, no cycles: see model/codec.py
        return Analysis(report, tuple(analyse_bench(report, b) for b in report.benches))


__all__ = ["Analysis", "BenchAnalysis", "CaseResult", "Ceilings", "Finding", "Recommendation", "Summary", "analyse"]
