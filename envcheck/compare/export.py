"""``envcheck diff --format json``: the comparison as stable, versioned JSON for CI pipelines, built field by field
(not dumped), so renaming a field inside envcheck never changes it. Fields are only added within a version; a
version changes when one is removed or changes meaning. The layout: docs/compare.md ("diff --format json").

Version history:
  1 - first format; later added: each comparison's ``node``, the document's ``unmatched`` and ``worlds``.
  2 - ``controls`` and ``control`` removed (a floor never comes from the pair judged); floor sources are
      ``repeats`` or ``shipped``; a row no floor covers is ``not judged``, its ``reasons`` saying why.
"""

from __future__ import annotations

import json
import math

from envcheck.compare.diff import CaseDiff, CaseRef, Comparison, Diff, GroupSummary, ReportInfo
from envcheck.compare.match import Unmatched
from envcheck.compare.node_diff import CollectiveDiff, CopyDiff, NodeComparison, RatioRow
from envcheck.compare.stats import NoiseFloor
from envcheck.model import Note
from envcheck.outside_json import Json

FORMAT = "envcheck-diff"
VERSION = 2


def _num(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _report(r: ReportInfo) -> dict[str, Json]:
    gpus = [{"index": g.index, "model": g.model, "uuid": g.uuid, "serial": g.serial}
            for g in (r.machine.gpus if r.machine else ())]
    return {"label": r.label, "host": r.host, "created": r.created, "kind": r.kind, "gpu_name": r.gpu_name,
            "health": r.verdict, "cases": r.cases, "gpus": gpus}


def _group(g: GroupSummary) -> dict[str, Json]:
    return {"name": g.name, "geomean": _num(g.geomean), "low": _num(g.low), "high": _num(g.high), "count": g.count,
            "clusters": g.clusters, "verdict": g.verdict, "faster": g.faster, "slower": g.slower, "same": g.same,
            "uncertain": g.uncertain, "not_comparable": g.not_comparable, "not_judged": g.not_judged}


def _floor(f: NoiseFloor | None) -> dict[str, Json] | None:
    if f is None:
        return None
    return {"log_sd": f.log_sd, "pct": f.pct, "source": f.source, "kind": list(f.kind), "cases": f.cases,
            "df": f.df}


def _notes(notes: tuple[Note, ...]) -> list[Json]:
    return [{"key": n.key, "params": {k: list(v) if isinstance(v, tuple) else v for k, v in n.params.items()}}
            for n in notes]


def _shipped(model: str | None, pairs: tuple[tuple[str, str], ...]) -> Json:
    return None if model is None else {"model": model, "pairs": [list(p) for p in pairs]}


def _ref(c: CaseRef | CaseDiff, status: str | None = None) -> dict[str, Json]:
    return {"op": c.op, "impl": c.impl, "dtype": c.dtype, "precision": c.precision, "shape": list(c.shape),
            "status": status if status is not None else getattr(c, "status", None)}


def _case(c: CaseDiff) -> dict[str, Json]:
    n = c.numeric
    return {
        "op": c.op, "impl": c.impl, "dtype": c.dtype, "precision": c.precision, "shape": list(c.shape),
        "category": c.category, "verdict": c.verdict, "timing": c.timing, "method": c.method,
        "baseline_us": _num(c.base_us), "other_us": _num(c.other_us), "ratio": _num(c.ratio), "low": _num(c.low),
        "high": _num(c.high), "n_baseline": c.n_base, "n_other": c.n_other, "within_log_se": _num(c.within_log_se),
        "floor": _floor(c.floor),
        "baseline_gbps": _num(c.base_gbps), "other_gbps": _num(c.other_gbps),
        "baseline_tflops": _num(c.base_tflops), "other_tflops": _num(c.other_tflops),
        "baseline_pct_theoretical": _num(c.base_pct), "other_pct_theoretical": _num(c.other_pct),
        "baseline_pct_measured": _num(c.base_pct_measured), "other_pct_measured": _num(c.other_pct_measured),
        "baseline_flags": list(c.base_flags), "other_flags": list(c.other_flags),
        "other_precision": c.other_precision,
        "reasons": _notes(c.reasons),
        "numeric": None if n is None else {"kind": n.kind, "baseline_rel_l2": n.base_rel_l2,
                                           "other_rel_l2": n.other_rel_l2, "baseline_passed": n.base_passed,
                                           "other_passed": n.other_passed},
    }


def _ratio(r: RatioRow) -> dict[str, Json]:
    return {"verdict": r.verdict, "ratio": _num(r.ratio), "low": _num(r.low), "high": _num(r.high),
            "n_baseline": r.n_base, "n_other": r.n_other, "within_log_se": _num(r.within_log_se),
            "floor": _floor(r.floor), "reasons": _notes(r.reasons)}


def _node_test(r: CollectiveDiff | CopyDiff) -> str:
    if isinstance(r, CollectiveDiff):
        return f"{r.scope} {r.op} {r.size_bytes}"
    return f"{r.kind} {r.method} {r.src}->{r.dst} x{r.directions}"


def _node(n: NodeComparison | None, regression_pct: float) -> dict[str, Json] | None:
    if n is None:
        return None
    return {
        "collectives": [{"scope": c.scope, "op": c.op, "size_bytes": c.size_bytes, "ranks": c.ranks,
                         "timing": c.timing, "baseline_us": _num(c.base_us), "other_us": _num(c.other_us),
                         "baseline_busbw_gbps": _num(c.base_busbw), "other_busbw_gbps": _num(c.other_busbw),
                         "baseline_algo": c.base_algo, "other_algo": c.other_algo,
                         "baseline_status": c.base_status, "other_status": c.other_status, **_ratio(c.change)}
                        for c in n.collectives],
        "copies": [{"kind": c.kind, "method": c.method, "src": c.src, "dst": c.dst, "directions": c.directions,
                    "host_link": c.host_link, "baseline_gbps": _num(c.base_gbps), "other_gbps": _num(c.other_gbps),
                    "baseline_pct_expected": _num(c.base_pct_expected),
                    "other_pct_expected": _num(c.other_pct_expected), **_ratio(c.change)} for c in n.copies],
        "counters": [{"gpu": c.gpu, "name": c.name, "baseline_delta": c.base_delta, "other_delta": c.other_delta,
                      "baseline_per_s": _num(c.base_per_s), "other_per_s": _num(c.other_per_s),
                      "baseline_boot_per_s": _num(c.base_boot_per_s), "other_boot_per_s": _num(c.other_boot_per_s),
                      "baseline_over_limit": c.base_over_limit, "other_over_limit": c.other_over_limit}
                     for c in n.counters],
        "changes": [{"what": c.what, "gpus": list(c.gpus), "scope": c.scope, "op": c.op, "size_bytes": c.size_bytes,
                     "before": c.before, "after": c.after} for c in n.changes],
        "only_baseline": list(n.only_base), "only_other": list(n.only_other),
        "noise_floors": [_floor(f) for f in n.floors],
        "shipped_floors": _shipped(n.shipped_model, n.shipped_pairs),
        "regressions": [{"test": _node_test(r), "ratio": r.change.ratio, "low": r.change.low,
                         "high": r.change.high} for r in n.regressions(regression_pct)],
    }


def _unmatched(u: Unmatched) -> dict[str, Json]:
    return {"label": u.label, "side": u.side, "host": u.host, "gpus": list(u.uuids), "reason": u.reason}


def _comparison(cmp: Comparison, regression_pct: float) -> dict[str, Json]:
    return {
        "baseline": cmp.base.label, "other": cmp.other.label,
        "same_gpu_model": cmp.same_gpu, "same_machine": cmp.same_machine,
        "environment": [{"key": e.key, "area": e.area, "label": e.label, "gpu": e.gpu, "before": e.before,
                         "after": e.after} for e in cmp.env],
        "checks": [{"id": c.id, "title": c.title, "kind": c.kind, "before": c.before, "after": c.after}
                   for c in cmp.checks],
        "overall": _group(cmp.overall), "ops": [_group(g) for g in cmp.ops],
        "cases": [_case(c) for c in cmp.cases],
        "only_baseline": [_ref(r) for r in cmp.only_base], "only_other": [_ref(r) for r in cmp.only_other],
        "ceilings": [{"name": c.name, "kind": c.kind, "unit": c.unit, "baseline": _num(c.base),
                      "other": _num(c.other)} for c in cmp.ceilings],
        "noise_floors": [_floor(f) for f in cmp.floors],
        "tested": cmp.tested, "correction": cmp.correction, "allowance_sources": dict(cmp.sources),
        "shipped_floors": _shipped(cmp.shipped_model, cmp.shipped_pairs),
        "regressions": [{**_ref(c, "slower"), "ratio": c.ratio, "low": c.low, "high": c.high}
                        for c in cmp.regressions(regression_pct)],
        "node": _node(cmp.node, regression_pct),
    }


def to_data(d: Diff, regression_pct: float | None = None) -> dict[str, Json]:
    """The document as plain data (see the module docstring)."""
    threshold = d.practical_pct if regression_pct is None else regression_pct
    return {
        "format": FORMAT, "version": VERSION, "confidence": d.confidence, "practical_pct": d.practical_pct,
        "resamples": d.resamples, "regression_pct": regression_pct,
        "reports": [_report(r) for r in d.reports],
        "comparisons": [_comparison(c, threshold) for c in d.comparisons],
        "unmatched": [_unmatched(u) for u in d.unmatched],
        "worlds": [{"baseline": w.base, "other": w.other, **(_node(w.node, threshold) or {})} for w in d.worlds],
    }


def to_json(d: Diff, regression_pct: float | None = None) -> str:
    # No indent: json then uses its C encoder, 10x faster on a large diff.
    return json.dumps(to_data(d, regression_pct), ensure_ascii=False, allow_nan=False) + "\n"
