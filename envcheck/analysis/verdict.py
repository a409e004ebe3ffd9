"""One verdict per report with its reasons, worst first (``verdict.reason.<key>``): what JUnit, Prometheus, the
health check and ``envcheck run``'s exit status read, so they never disagree about a machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.model.bench import ParamValue
from envcheck.ops import variant

if TYPE_CHECKING:
    from envcheck.analysis import Analysis
    from envcheck.analysis.crosscheck import CrosscheckAnalysis
    from envcheck.analysis.fleet import Finding as FleetFinding

REASON_KEYS = ("check_failed", "bench_missing", "bench_empty", "bench_stopped", "case_failed", "node_problem",
               "fleet_node", "fleet_ranks_failed", "burn_gpu", "burn_host", "burn_stopped", "crosscheck_kernel",
               "crosscheck_copy", "crosscheck_collective", "crosscheck_failed", "fleet_crosscheck")


@dataclass(frozen=True)
class Reason:
    key: str
    params: tuple[tuple[str, ParamValue], ...] = ()

    def __post_init__(self) -> None:
        if self.key not in REASON_KEYS:
            raise ValueError(f"unknown verdict reason {self.key!r}")

    @property
    def values(self) -> dict[str, ParamValue]:
        return dict(self.params)


@dataclass(frozen=True)
class Verdict:
    """``status`` ``pass`` or ``fail``; ``reasons`` empty exactly when it passes."""

    status: str
    reasons: tuple[Reason, ...]

    @property
    def ok(self) -> bool:
        return self.status == "pass"


def _r(key: str, **params: ParamValue) -> Reason:
    return Reason(key, tuple(params.items()))


def _bench_reasons(analysis: Analysis) -> list[Reason]:
    if not analysis.report.benches:
        return [_r("bench_missing")]
    out: list[Reason] = []
    for ba in analysis.benches:
        gpu = ba.bench.device.index
        if not ba.bench.cases:
            out.append(_r("bench_empty", gpu=gpu))
            continue
        if ba.bench.partial:
            stop = ba.bench.stop
            out.append(_r("bench_stopped", gpu=gpu, cause=stop.cause.value if stop is not None else "partial"))
        bad = [r for r in ba.results if r.status != "pass"]
        if bad:
            first = bad[0].case
            out.append(_r("case_failed", gpu=gpu, count=len(bad), op=first.op, impl=first.impl, dtype=first.dtype,
                          shape="x".join(str(s) for s in first.shape), status=bad[0].status))
    if analysis.node is not None and analysis.node.problems:
        out.append(_r("node_problem", count=len(analysis.node.problems), problem=analysis.node.problems[0].key))
    return out


def _finding(findings: tuple[FleetFinding, ...]) -> str:
    """The first of a node's findings in a few words: its kind, the metric, the ranks it names."""
    if not findings:
        return "-"
    f = findings[0]
    return " ".join(x for x in (f.kind, f.metric or "", f"rank {','.join(map(str, f.ranks))}" if f.ranks else "") if x)


def _fleet_reasons(analysis: Analysis) -> list[Reason]:
    fleet = analysis.fleet
    if fleet is None:
        return []
    out = [_r("fleet_node", host=v.host, status=v.status, finding=_finding(v.findings))
           for v in fleet.verdicts if v.status != "pass"]
    if fleet.failed_ranks and not out:  # failed_ranks: those whose status is not ok
        out.append(_r("fleet_ranks_failed", count=len(fleet.failed_ranks)))
    # fleet --crosscheck: a node whose numbers an independent tool does not bear out, or whose tool failed.
    for host, cross in analysis.fleet_crosschecks:
        if cross.findings:
            first = cross.findings[0]
            out.append(_r("fleet_crosscheck", host=host, count=len(cross.findings), finding=first.key, tool=first.tool))
    return out


def _burn_reasons(analysis: Analysis) -> list[Reason]:
    burn = analysis.burn
    if burn is None:
        return []
    out = [_r("burn_gpu", gpu=g.gpu.index, status=g.status, finding=g.findings[0].key if g.findings else g.status)
           for g in burn.gpus if g.status != "pass"]
    out += [_r("burn_host", finding=f.key) for f in burn.findings]
    if burn.interrupted or not burn.gpus:
        out.append(_r("burn_stopped"))
    return out


def crosscheck_reasons(cross: CrosscheckAnalysis | None) -> list[Reason]:
    """The first cross-check row outside its bar and the first tool that failed, each with how many there are."""
    if cross is None:
        return []
    out: list[Reason] = []
    outside = [f.row for f in cross.findings if f.key == "outside_bar" and f.row is not None]
    if outside:
        r = outside[0]
        # Values as the sentence shows them: the reasons are phrased without the renderers' formatting.
        common: dict[str, ParamValue] = {"count": len(outside), "tool": r.counterpart.tool, "ratio": f"{r.ratio:.3f}",
                  "bar_pct": f"{100 * r.bar:g}"}
        if r.kind == "kernel":
            out.append(_r("crosscheck_kernel", gpu=r.gpu, op=r.op, impl=r.impl,
                          precision=variant(r.dtype or "", r.precision or ""),
                          shape="x".join(str(d) for d in r.shape), **common))
        elif r.kind == "copy":
            out.append(_r("crosscheck_copy", src=r.src, dst=r.dst, **common))
        else:
            out.append(_r("crosscheck_collective", op=r.op, size_mib=f"{(r.size_bytes or 0) / 2**20:g}",
                          quantity=r.quantity, mode=r.counterpart.mode or "-", **common))
    failed = [f for f in cross.findings if f.key in ("tool_failed", "row_failed", "not_finished")]
    if failed:
        f = failed[0]
        out.append(_r("crosscheck_failed", count=len(failed), tool=f.tool,
                      cause=f.cause or ("not_finished" if f.key == "not_finished" else "row"),
                      detail=f.detail.splitlines()[-1][:200] if f.detail else "-"))
    return out


def verdict(analysis: Analysis) -> Verdict:
    """The report's verdict and why: a check fails; a suite is missing, empty or stopped, a case is not a pass or the
    node tests found a problem; a fleet node does not pass or a rank was lost; a burn-in GPU does not hold, the host
    logged an Xid or it stopped early; a cross-check row lies outside its bar or its tool failed."""
    from envcheck.analysis.fleet import GPU_STACK_CHECKS

    report = analysis.report
    # A CPU run the user asked for (run --interpret) expects no GPU: the GPU driver's checks do not count
    # against it, as on a node of fleet --cpu.
    asked_cpu = report.kind == "run" and bool(report.benches) and all(
        b.settings.interpret and b.device.backend != "cuda" for b in report.benches)
    reasons = [_r("check_failed", check=c.id, finding=c.finding) for c in report.checks
               if c.status == "fail" and not (asked_cpu and c.id.startswith(GPU_STACK_CHECKS))]
    if report.kind == "run":
        reasons += _bench_reasons(analysis)
    elif report.kind == "fleet":
        reasons += _fleet_reasons(analysis)
    reasons += _burn_reasons(analysis)
    reasons += crosscheck_reasons(analysis.crosscheck)
    return Verdict("fail" if reasons else "pass", tuple(reasons))
