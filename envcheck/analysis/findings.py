"""Findings: what a run's own numbers say, as a catalogue key, parameters (named with their unit: ``_us``,
``_pct``...) and rows, only where the data supports them; ``recommendations`` turns them into actions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from envcheck.analysis import flags as fl
from envcheck.analysis.ceilings import THEORETICAL, Ceilings
from envcheck.analysis.results import CaseResult, group_key
from envcheck.analysis.summary import geomean
from envcheck.model import Bench, CaseKey, StopCause
from envcheck.model.bench import ParamValue
from envcheck.ops import OPS, OpSpec

Shape = tuple[int, ...]

LARGE = ("large", "xlarge")
LOW_BANDWIDTH_PCT = 70.0  # of the measured ceiling: below this a memory-bound kernel is leaving a lot behind


@dataclass(frozen=True)
class Finding:
    """One observation (``info``, ``warn`` or ``fail``) and the cases it is about, in report order."""

    key: str
    params: Mapping[str, ParamValue] = field(default_factory=dict)
    level: str = "info"
    rows: tuple[CaseKey, ...] = ()


@dataclass(frozen=True)
class Recommendation:
    key: str
    params: Mapping[str, ParamValue] = field(default_factory=dict)


def _ops(results: Sequence[CaseResult]) -> list[str]:
    return list(dict.fromkeys(r.case.op for r in results))


def _spec(results: Sequence[CaseResult], op: str) -> OpSpec:
    return next(r.spec for r in results if r.case.op == op)


def _measured(results: Sequence[CaseResult]) -> list[CaseResult]:
    return [r for r in results if r.status != "error" and r.time is not None]


def _flagged(results: Sequence[CaseResult], flag: str) -> list[CaseResult]:
    return [r for r in results if flag in r.flags]


def _keys(rows: Sequence[CaseResult]) -> tuple[CaseKey, ...]:
    return tuple(r.key for r in rows)


def stopped(bench: Bench) -> list[Finding]:
    stop = bench.stop
    if stop is None:
        return []
    if stop.cause is StopCause.LEGACY:
        return [Finding("finding.stopped.legacy", {"text": stop.detail or ""}, "fail")]
    params: dict[str, ParamValue] = {"finished": stop.finished, "planned": stop.planned, **{
        name: getattr(stop, name) for name in ("signal", "returncode", "timeout_s", "detail")
        if getattr(stop, name) is not None}}
    return [Finding(f"finding.stopped.{stop.cause.value}", params, "fail")]


def failures(results: Sequence[CaseResult]) -> list[Finding]:
    by = {status: [r for r in results if r.status == status] for status in ("fail", "error")}
    return [Finding(key, {"count": len(rows)}, "fail", _keys(rows))
            for key, rows in (("finding.failed", by["fail"]), ("finding.errored", by["error"])) if rows]


def throttled(results: Sequence[CaseResult]) -> list[Finding]:
    """Rows slowed by heat or a hardware limit (the SW power cap is how a GPU runs a full load)."""
    rows = _flagged(results, fl.THROTTLED)
    capped = [r for r in rows if r.conditions is not None and r.conditions.power_capped_only]
    hot = [r for r in rows if not (r.conditions is not None and r.conditions.power_capped_only)]
    out = []
    if hot:
        reasons = tuple(sorted({x for r in hot if r.conditions for x in r.conditions.reasons}))
        out.append(Finding("finding.throttled", {"count": len(hot), "reasons": reasons}, "warn", _keys(hot)))
    if capped:
        out.append(Finding("finding.power_capped", {"count": len(capped)}, "info", _keys(capped)))
    return out


def noisy(results: Sequence[CaseResult]) -> list[Finding]:
    rows = _flagged(results, fl.NOISY)
    if not rows:
        return []
    worst = max((r.time.cv for r in rows if r.time), default=0.0)
    host_clock = all(r.time is not None and r.time.method == "host_clock" for r in rows)  # the CPU baseline
    return [Finding("finding.noisy", {"count": len(rows), "cv_pct": 100 * worst, "host_clock": host_clock}, "warn",
                    _keys(rows))]


def launch_bound(results: Sequence[CaseResult]) -> list[Finding]:
    """Per op and implementation (their launchers differ): how many rows are launch-bound, and the largest."""
    out = []
    flagged = _flagged(results, fl.LAUNCH_BOUND)
    for op in _ops(flagged):
        for impl in dict.fromkeys(r.case.impl for r in flagged if r.case.op == op):
            mine = [r for r in flagged if r.case.op == op and r.case.impl == impl]
            top = max(mine, key=lambda r: math.prod(r.case.shape))
            out.append(Finding("finding.launch_bound", {"op": op, "impl": impl, "count": len(mine),
                                                        "top_shape": top.case.shape}, "info", _keys(mine)))
    return out


def launch_overhead(results: Sequence[CaseResult]) -> list[Finding]:
    """Per non-baseline implementation, over its launch-bound rows with a torch row in the group: the median
    launch time of each side (in a launch-bound row the launch overlaps the GPU work: it is the whole cost)."""
    measured = [r for r in _measured(results) if r.case.launch]
    torch_rows = {group_key(r.case): r for r in measured if r.case.impl == r.spec.baseline}
    out = []
    for impl in dict.fromkeys(r.case.impl for r in results if r.case.impl != r.spec.baseline):
        pairs = [(r, torch_rows[group_key(r.case)]) for r in measured
                 if r.case.impl == impl and fl.LAUNCH_BOUND in r.flags and group_key(r.case) in torch_rows]
        if not pairs:
            continue
        out.append(Finding("finding.launch_overhead", {
            "impl": impl,
            "impl_us": statistics.median(r.case.launch.median_us for r, _ in pairs),  # type: ignore[union-attr]
            "torch_us": statistics.median(t.case.launch.median_us for _, t in pairs),  # type: ignore[union-attr]
            "count": len(pairs)}, "info", _keys([r for r, _ in pairs])))
    return out


def l2_resident(results: Sequence[CaseResult]) -> list[Finding]:
    """Memory-bound rows whose working set fits in L2 (their GB/s measure the cache)."""
    rows = [r for r in _flagged(results, fl.L2_RESIDENT) if not r.spec.compute_bound]
    return [Finding("finding.l2_resident", {"count": len(rows)}, "info", _keys(rows))] if rows else []


def above_ceiling(results: Sequence[CaseResult]) -> list[Finding]:
    """Rows faster than a ceiling they are held against: memory-bound rows served from L2 apart (``_cached``);
    the rest by the kind of ceiling beaten (a compute-bound row is never "cached": its time is arithmetic)."""
    rows = _flagged(results, fl.ABOVE_CEILING)
    if not rows:
        return []
    compute = [r for r in rows if r.spec.compute_bound]
    cached = [r for r in rows if r not in compute and fl.L2_RESIDENT in r.flags]
    bandwidth = [r for r in rows if r not in compute and r not in cached]
    faster = bandwidth + compute
    out = []
    if faster:
        worst = max(max(r.pct_measured or 0.0, r.pct_theoretical or 0.0) for r in faster)
        key = ("finding.above_ceiling_mixed" if bandwidth and compute else
               "finding.above_ceiling_compute" if compute else "finding.above_ceiling")
        out.append(Finding(key, {"count": len(faster), "worst_pct": worst, "bandwidth": len(bandwidth),
                                 "compute": len(compute)}, "warn", _keys(faster)))
    if cached:
        out.append(Finding("finding.above_ceiling_cached", {"count": len(cached)}, "info", _keys(cached)))
    return out


def bandwidth_best(results: Sequence[CaseResult]) -> list[Finding]:
    """Per memory-bound op: the best share of the bandwidth ceilings, at sizes that reach DRAM."""
    out = []
    for op in _ops(results):
        if _spec(results, op).compute_bound:
            continue
        rows = [r for r in _measured(results) if r.case.op == op and r.pct_theoretical is not None
                and fl.L2_RESIDENT not in r.flags and fl.LAUNCH_BOUND not in r.flags]
        if not rows:
            continue
        best = max(rows, key=lambda r: r.pct_theoretical or 0.0)
        out.append(Finding("finding.bandwidth_best", {
            "op": op, "impl": best.case.impl, "shape": best.case.shape, "gbps": best.gbps,
            "theoretical_pct": best.pct_theoretical, "measured_pct": best.pct_measured}, "info", (best.key,)))
    return out


def compute_best(results: Sequence[CaseResult], ceils: Ceilings) -> list[Finding]:
    """Per compute-bound op and precision: the best share of that precision's FLOP/s peak."""
    out = []
    for op in _ops(results):
        if not _spec(results, op).compute_bound:
            continue
        rows = [r for r in _measured(results) if r.case.op == op and r.tflops]
        for prec in dict.fromkeys(r.case.precision for r in rows):
            best = max((r for r in rows if r.case.precision == prec), key=lambda r: r.tflops or 0.0)
            peak = ceils.get(prec, THEORETICAL)
            params = {"op": op, "dtype": best.case.dtype, "precision": prec, "impl": best.case.impl,
                      "shape": best.case.shape, "tflops": best.tflops,
                      **({"peak_tflops": peak.value, "peak_pct": best.pct_theoretical} if peak else {})}
            out.append(Finding("finding.compute_best" if peak else "finding.compute_best_nopeak", params, "info",
                               (best.key,)))
    return out


def speedup_large(results: Sequence[CaseResult]) -> list[Finding]:
    """Per op, implementation and precision: the geometric-mean speedup over the large sizes."""
    out = []
    for op in _ops(results):
        impls = dict.fromkeys(r.case.impl for r in results if r.case.op == op and r.case.impl != r.spec.baseline)
        for impl in impls:
            rows = [r for r in _measured(results) if r.case.op == op and r.case.impl == impl
                    and r.category in LARGE and r.speedup is not None]
            for prec in dict.fromkeys(r.case.precision for r in rows):
                mine = [r for r in rows if r.case.precision == prec]
                g = geomean(r.speedup for r in mine if r.speedup)
                if g is None:
                    continue
                out.append(Finding("finding.speedup_large", {
                    "op": op, "impl": impl, "precision": prec, "speedup_x": g, "count": len(mine),
                    "min_x": min(r.speedup for r in mine if r.speedup),
                    "max_x": max(r.speedup for r in mine if r.speedup)}, "info", _keys(mine)))
    return out


def tf32(results: Sequence[CaseResult]) -> list[Finding]:
    """fp32 data multiplied in TF32: its largest error beside IEEE fp32 rows of the same op and shapes."""
    measured = _measured(results)
    rows = [r for r in measured if r.case.dtype == "fp32" and r.case.precision == "tf32"
            and r.case.accuracy is not None and r.status == "pass"]
    out = []
    for impl in dict.fromkeys(r.case.impl for r in rows):
        mine = [r for r in rows if r.case.impl == impl]
        worst = max(mine, key=lambda r: r.case.accuracy.rel_l2)  # type: ignore[union-attr]
        shapes = {(r.case.op, r.case.shape) for r in mine}
        ieee = [r for r in measured if r.case.dtype == "fp32" and r.case.precision == "fp32"
                and r.case.accuracy is not None and (r.case.op, r.case.shape) in shapes]
        params: dict[str, ParamValue] = {"impl": impl, "count": len(mine),
                                  "tf32_err": worst.case.accuracy.rel_l2,  # type: ignore[union-attr]
                                  "tf32_tol": worst.tolerance.rel_l2}
        if ieee:
            params["ieee_err"] = max(r.case.accuracy.rel_l2 for r in ieee)  # type: ignore[union-attr]
        out.append(Finding("finding.tf32" if ieee else "finding.tf32_noieee", params, "info", _keys(mine)))
    return out


def missing_ceilings(ceils: Ceilings) -> list[Finding]:
    """A theoretical limit that could not be known, said once with the reason: a missing % is never silent."""
    return [Finding("finding.ceiling_missing", {"name": m.name, "reason_key": m.key, **m.params}, "warn")
            for m in ceils.missing if m.kind == THEORETICAL]


def findings(bench: Bench, results: Sequence[CaseResult], ceils: Ceilings) -> tuple[Finding, ...]:
    """Every finding, most serious kinds first (the run's completeness, failures, then the measurements)."""
    def each(*rules: Callable[[Sequence[CaseResult]], list[Finding]]) -> list[Finding]:
        return [f for rule in rules for f in rule(results)]

    on_gpu = bench.device.backend == "cuda"  # a CPU baseline has no peak to hold FLOP/s against
    return (*stopped(bench), *each(failures, throttled, noisy, above_ceiling), *missing_ceilings(ceils),
            *each(launch_bound, launch_overhead, l2_resident, bandwidth_best),
            *(compute_best(results, ceils) if on_gpu else ()), *each(speedup_large, tf32))


def recommendations(found: Sequence[Finding]) -> tuple[Recommendation, ...]:
    """Actions that follow from the findings, one per kind of problem."""
    keys = {f.key for f in found}
    out: list[Recommendation] = []
    if any(k.startswith("finding.stopped.") for k in keys):
        out.append(Recommendation("rec.rerun_partial"))
    fails = [f for f in found if f.key in ("finding.failed", "finding.errored")]
    if fails:
        ops_failing = sorted({row[0] for f in fails for row in f.rows})
        out.append(Recommendation("rec.failures", {"ops": ",".join(ops_failing)}))
    if "finding.throttled" in keys:
        out.append(Recommendation("rec.throttled"))
    out += [Recommendation("rec.noisy.cpu" if f.params["host_clock"] else "rec.noisy")
            for f in found if f.key == "finding.noisy"]
    # PyTorch eager's limit: what users pay without Triton (Triton's own launcher stays launch-bound longer).
    torch_bound = [f for f in found if f.key == "finding.launch_bound" and f.params["impl"] == "torch"
                   and OPS.get(str(f.params["op"])) is not None
                   and OPS[str(f.params["op"])].family == "vector"]
    if torch_bound:
        out.append(Recommendation("rec.small_tensors",
                                  {"elements": max(math.prod(cast(Shape, f.params["top_shape"])) for f in torch_bound)}))
    for f in found:
        mp = f.params.get("measured_pct")
        if f.key == "finding.bandwidth_best" and isinstance(mp, (int, float)) and mp < LOW_BANDWIDTH_PCT:
            out.append(Recommendation("rec.low_bandwidth", {"op": f.params["op"], "measured_pct": mp}))
    if keys & {"finding.tf32", "finding.tf32_noieee"}:
        out.append(Recommendation("rec.tf32"))
    return tuple(out)


