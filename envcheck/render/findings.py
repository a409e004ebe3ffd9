"""Findings: what a benchmark run's own numbers say, as data.

Pure functions of a ``Bench``: each returns ``Finding`` objects (a catalogue key and
its parameters) only when the data supports them, so a clean run gets no
boilerplate. The renderer phrases them per language; parameter names carry their
unit the way fact keys do (``_us``, ``_pct``, ``_err``, ``_x``, ``elements``), so
the phrasing can format numbers without knowing the finding.

``recommendations`` turns findings into actions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envcheck.model import L2_RESIDENT, LAUNCH_BOUND, NOISY, THROTTLED, Bench, Case
from envcheck.summary import geomean, ops

LARGE = ("large", "xlarge")
LOW_BANDWIDTH_PCT = 70.0  # of the measured copy ceiling: below this a memory-bound kernel is leaving a lot behind


@dataclass(frozen=True)
class Finding:
    """One observation. ``level``: ``info``, ``warn`` (the numbers need care) or ``fail`` (something is wrong)."""

    key: str
    params: Mapping[str, Any] = field(default_factory=dict)
    level: str = "info"


@dataclass(frozen=True)
class Recommendation:
    key: str
    params: Mapping[str, Any] = field(default_factory=dict)


def variant(case: Case) -> str:
    """dtype, plus the precision actually used when it differs (``fp32 (tf32)``)."""
    return case.dtype if case.dtype == case.precision else f"{case.dtype} ({case.precision})"


def size_label(shape: tuple[int, ...]) -> str:
    """``1048576`` for a vector size, ``4096×4096×4096`` for a matmul: what size columns and findings show."""
    if len(shape) == 1:
        return f"{shape[0]:,}".replace(",", " ")
    return "×".join(str(d) for d in shape)


def row_label(case: Case) -> str:
    return f"{case.op} {case.impl} {variant(case)} {size_label(case.shape)}"


def elements(case: Case) -> int:
    return math.prod(case.shape)


def _is_matmul(case: Case) -> bool:
    return len(case.shape) == 3


def _measured(cases: Iterable[Case]) -> list[Case]:
    return [c for c in cases if c.status != "error" and c.best_time is not None]


# --------------------------------------------------------------------------- individual findings


def _group(case: Case) -> tuple[str, str, str, tuple[int, ...]]:
    """The rows that compare with one another: same op, dtype, precision and size."""
    return case.op, case.dtype, case.precision, case.shape


def launch_bound(bench: Bench) -> list[Finding]:
    """Per op: the largest size still flagged launch-bound, per implementation (where launch
    cost, not the kernel, decides). Implementations differ: Triton's Python launcher costs
    more than PyTorch's, so it stays launch-bound to larger sizes.

    ``torch_elements`` (vector ops only): PyTorch eager's limit, what users pay without Triton.
    """
    out = []
    for op in ops(bench):
        flagged = [c for c in bench.cases if c.op == op and LAUNCH_BOUND in c.flags]
        if not flagged:
            continue
        impls = dict.fromkeys(c.impl for c in bench.cases if c.op == op)
        limits, torch_top = [], None
        for impl in impls:
            mine = [c for c in flagged if c.impl == impl]
            if not mine:
                continue
            top = max(mine, key=elements)
            limits.append(f"{impl} {size_label(top.shape)}")
            if impl == "torch":
                torch_top = top
        params: dict[str, Any] = {"op": op, "limits": limits}
        if torch_top is not None and len(torch_top.shape) == 1:
            params["torch_elements"] = elements(torch_top)
        out.append(Finding("finding.launch_bound", params))
    return out


def launch_overhead(bench: Bench) -> list[Finding]:
    """What a Python caller pays per call where an implementation is launch-bound.

    Per non-torch implementation: its launch-bound rows that have a torch row in the same
    group (op, dtype, precision, size); the median eager launch time of each side over those
    pairs. Launch time, not launch minus GPU time: in a launch-bound row the host launch
    overlaps the GPU work, so the launch time is the whole cost of a call.
    """
    measured = [c for c in _measured(bench.cases) if c.launch]
    torch_rows = {_group(c): c for c in measured if c.impl == "torch"}
    out = []
    for impl in dict.fromkeys(c.impl for c in bench.cases if c.impl != "torch"):
        pairs = [(c, torch_rows[_group(c)]) for c in measured
                 if c.impl == impl and LAUNCH_BOUND in c.flags and _group(c) in torch_rows]
        if not pairs:
            continue
        out.append(Finding("finding.launch_overhead", {
            "impl": impl,
            "impl_us": statistics.median(c.launch.median_us for c, _ in pairs),  # type: ignore[union-attr]
            "torch_us": statistics.median(t.launch.median_us for _, t in pairs),  # type: ignore[union-attr]
            "count": len(pairs)}))
    return out


POWER_CAP = "sw_power_cap"


def _flagged(bench: Bench, flag: str) -> list[Case]:
    return [c for c in bench.cases if flag in c.flags]


def l2_resident(bench: Bench) -> list[Finding]:
    """Memory-bound rows whose working set fits in L2 (their GB/s measure the cache), with the
    largest such size per op. Compute-bound ops (matmul) are left out: they are judged in
    FLOP/s, where L2 residency is not a bandwidth concern."""
    rows = [c for c in _flagged(bench, L2_RESIDENT) if not c.compute_bound]
    if not rows:
        return []
    sizes = []
    for op in dict.fromkeys(c.op for c in rows):
        top = max((c for c in rows if c.op == op), key=elements)
        sizes.append(f"{op} {size_label(top.shape)}")
    return [Finding("finding.l2_resident", {"count": len(rows), "sizes": sizes})]


def _power_capped_only(case: Case) -> bool:
    return case.monitor is not None and set(case.monitor.throttle_reasons) == {POWER_CAP}


def throttled(bench: Bench) -> list[Finding]:
    """Rows slowed by heat or a hardware limit (a warning), apart from rows that only ran at the
    software power cap: that is how a GPU runs a full tensor-core load, not a fault."""
    rows = _flagged(bench, THROTTLED)
    capped = [c for c in rows if _power_capped_only(c)]
    hot = [c for c in rows if not _power_capped_only(c)]
    out = []
    if hot:
        reasons = sorted({r for c in hot if c.monitor for r in c.monitor.throttle_reasons})
        out.append(Finding("finding.throttled", {"count": len(hot), "rows": [row_label(c) for c in hot],
                                                 "reasons": reasons or ["?"]}, "warn"))
    if capped:
        out.append(Finding("finding.power_capped", {"count": len(capped), "rows": [row_label(c) for c in capped]}))
    return out


def noisy(bench: Bench) -> list[Finding]:
    rows = _flagged(bench, NOISY)
    if not rows:
        return []
    worst = max((c.best_time.cv for c in rows if c.best_time), default=0.0)
    return [Finding("finding.noisy", {"count": len(rows), "rows": [row_label(c) for c in rows],
                                      "cv_pct": 100 * worst}, "warn")]


def bandwidth_ceiling(bench: Bench) -> list[Finding]:
    """Per memory-bound op: the best share of the bandwidth ceilings, at sizes that reach HBM."""
    out = []
    for op in ops(bench):
        # Matmul's pct_theoretical is a share of the FLOP/s peak: compute_ceiling speaks for it.
        rows = [c for c in _measured(bench.cases) if c.op == op and c.pct_theoretical is not None
                and not _is_matmul(c) and L2_RESIDENT not in c.flags and LAUNCH_BOUND not in c.flags]
        if not rows:
            continue
        best = max(rows, key=lambda c: c.pct_theoretical or 0.0)
        out.append(Finding("finding.bandwidth_best", {
            "op": op, "impl": best.impl, "size": size_label(best.shape), "gbps": best.gbps,
            "theoretical_pct": best.pct_theoretical,
            "measured_pct": best.pct_measured if best.pct_measured is not None else None}))
    return out


def compute_ceiling(bench: Bench) -> list[Finding]:
    """Per op and precision with a FLOP/s peak: the best share of that peak."""
    out = []
    for op in ops(bench):
        rows = [c for c in _measured(bench.cases) if c.op == op and _is_matmul(c) and c.tflops]
        for prec in dict.fromkeys(c.precision for c in rows):
            sel = [c for c in rows if c.precision == prec]
            best = max(sel, key=lambda c: c.tflops or 0.0)
            peak = bench.ceiling(prec, "theoretical")
            params = {"op": op, "variant": variant(best), "impl": best.impl, "size": size_label(best.shape),
                      "tflops": best.tflops}
            if peak:
                out.append(Finding("finding.compute_best", {
                    **params, "peak_tflops": peak.value, "peak_pct": 100 * (best.tflops or 0) / peak.value}))
            else:
                out.append(Finding("finding.compute_best_nopeak", params))
    return out


def large_speedup(bench: Bench) -> list[Finding]:
    """Per op and non-torch implementation: geometric-mean speedup over the large sizes (launch cost excluded)."""
    out = []
    for op in ops(bench):
        for impl in dict.fromkeys(c.impl for c in bench.cases if c.op == op and c.impl != "torch"):
            rows = [c for c in _measured(bench.cases) if c.op == op and c.impl == impl and c.category in LARGE
                    and c.speedup is not None]
            g = geomean(c.speedup for c in rows)  # type: ignore[misc]
            if g is None:
                continue
            out.append(Finding("finding.speedup_large", {
                "op": op, "impl": impl, "speedup_x": g, "count": len(rows),
                "min_x": min(c.speedup for c in rows), "max_x": max(c.speedup for c in rows)}))  # type: ignore[type-var]
    return out


def tf32(bench: Bench) -> list[Finding]:
    """fp32 data multiplied in TF32: say so per implementation, with its largest error next to
    the largest error of IEEE fp32 rows of the same op and shapes.

    Failed rows are left out (``failures`` reports them), so what is quoted here is within tolerance.
    """
    measured = _measured(bench.cases)
    rows = [c for c in measured if c.dtype == "fp32" and c.precision == "tf32" and c.error and c.status != "fail"]
    out = []
    for impl in dict.fromkeys(c.impl for c in rows):
        mine = [c for c in rows if c.impl == impl]
        worst = max(mine, key=lambda c: c.error.rel_l2)  # type: ignore[union-attr]
        shapes = {(c.op, c.shape) for c in mine}
        ieee = [c for c in measured if c.dtype == "fp32" and c.precision == "fp32" and c.error
                and (c.op, c.shape) in shapes]
        params: dict[str, Any] = {
            "impl": impl, "count": len(mine),
            "tf32_err": worst.error.rel_l2,  # type: ignore[union-attr]
            "tf32_tol": worst.error.tolerance,  # type: ignore[union-attr]
        }
        if ieee:
            params["ieee_err"] = max(c.error.rel_l2 for c in ieee)  # type: ignore[union-attr]
            out.append(Finding("finding.tf32", params))
        else:
            out.append(Finding("finding.tf32_noieee", params))
    return out


def failures(bench: Bench) -> list[Finding]:
    out = []
    failed = [c for c in bench.cases if c.status == "fail"]
    if failed:
        out.append(Finding("finding.failed", {"count": len(failed), "rows": [
            f"{row_label(c)} ({c.error.rel_l2:.1e} > {c.error.tolerance:.1e})" if c.error else row_label(c)
            for c in failed]}, "fail"))
    errored = [c for c in bench.cases if c.status == "error"]
    if errored:
        out.append(Finding("finding.errored", {"count": len(errored), "rows": [
            f"{row_label(c)}: {c.message}" if c.message else row_label(c) for c in errored]}, "fail"))
    return out


def partial(bench: Bench) -> list[Finding]:
    if bench.interrupted:
        return [Finding("finding.interrupted", {"reason": bench.interrupted}, "fail")]
    if bench.partial:
        return [Finding("finding.partial", {}, "warn")]
    return []


def findings(bench: Bench | None) -> list[Finding]:
    """Every finding, most serious kinds first (the run's completeness, failures, then the measurements)."""
    if bench is None:
        return []
    out: list[Finding] = []
    for fn in (partial, failures, throttled, noisy, launch_bound, launch_overhead, l2_resident, bandwidth_ceiling,
               compute_ceiling, large_speedup, tf32):
        out += fn(bench)
    return out


# --------------------------------------------------------------------------- recommendations


def recommendations(found: Sequence[Finding]) -> list[Recommendation]:
    """Actions that follow from the findings, one per kind of problem."""
    keys = {f.key for f in found}
    out: list[Recommendation] = []
    if keys & {"finding.interrupted", "finding.partial"}:
        out.append(Recommendation("rec.rerun_partial"))
    fails = [f for f in found if f.key in ("finding.failed", "finding.errored")]
    if fails:
        ops_failing = sorted({r.split(" ")[0] for f in fails for r in f.params["rows"]})
        out.append(Recommendation("rec.failures", {"ops": ",".join(ops_failing)}))
    if "finding.throttled" in keys:
        out.append(Recommendation("rec.throttled"))
    if "finding.noisy" in keys:
        out.append(Recommendation("rec.noisy"))
    # PyTorch eager's limit: what users pay without Triton (Triton's own launcher stays launch-bound longer).
    bound = [f.params["torch_elements"] for f in found if f.key == "finding.launch_bound" and "torch_elements" in f.params]
    if bound:
        out.append(Recommendation("rec.small_tensors", {"elements": max(bound)}))
    for f in found:
        mp = f.params.get("measured_pct")
        if f.key == "finding.bandwidth_best" and mp is not None and mp < LOW_BANDWIDTH_PCT:
            out.append(Recommendation("rec.low_bandwidth", {"op": f.params["op"], "measured_pct": mp}))
    if keys & {"finding.tf32", "finding.tf32_noieee"}:
        out.append(Recommendation("rec.tf32"))
    return out
