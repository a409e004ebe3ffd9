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
from envcheck.compare.node_diff import CollectiveDiff, CopyDiff, NodeComparison
from envcheck.compare.stats import NoiseFloor, RatioRow
from envcheck.model import Note
from envcheck.outside_json import Json

FORMAT = "envcheck-diff"
VERSION = 2


def _num(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _pick(obj: object, *fields: str | tuple[str, str]) -> dict[str, Json]:
    """``obj``'s fields in order, a non-finite float as null, a tuple as a list."""
    out: dict[str, Json] = {}
    for f in fields:
        key, attr = (f, f) if isinstance(f, str) else f
        v = getattr(obj, attr)
        out[key] = _num(v) if isinstance(v, float) else list(v) if isinstance(v, tuple) else v
    return out


def _sides(*names: str) -> tuple[tuple[str, str], ...]:
    """The baseline's and the other's value of each of ``names`` (``base_X`` shown as ``baseline_X``)."""
    return tuple(pair for n in names for pair in ((f"baseline_{n}", f"base_{n}"), (f"other_{n}", f"other_{n}")))


def _report(r: ReportInfo) -> dict[str, Json]:
    gpus: list[Json] = [_pick(g, "index", "model", "uuid", "serial") for g in (r.machine.gpus if r.machine else ())]
    return {**_pick(r, "label", "host", "created", "kind", "gpu_name", ("health", "verdict"), "cases"), "gpus": gpus}


def _group(g: GroupSummary) -> dict[str, Json]:
    return _pick(g, "name", "geomean", "low", "high", "count", "clusters", "verdict", "faster", "slower", "same",
                 "uncertain", "not_comparable", "not_judged")


def _floor(f: NoiseFloor | None) -> dict[str, Json] | None:
    return None if f is None else _pick(f, "log_sd", "pct", "source", "kind", "cases", "df")


def _notes(notes: tuple[Note, ...]) -> list[Json]:
    return [{"key": n.key, "params": {k: list(v) if isinstance(v, tuple) else v for k, v in n.params.items()}}
            for n in notes]


def _shipped(model: str | None, pairs: tuple[tuple[str, str], ...]) -> Json:
    return None if model is None else {"model": model, "pairs": [list(p) for p in pairs]}


def _ref(c: CaseRef | CaseDiff, status: str | None = None) -> dict[str, Json]:
    return {**_pick(c, "op", "impl", "dtype", "precision", "shape"),
            "status": status if status is not None else getattr(c, "status", None)}


def _case(c: CaseDiff) -> dict[str, Json]:
    n = c.numeric
    return {
        **_pick(c, "op", "impl", "dtype", "precision", "shape", "category", "verdict", "timing", "method",
                *_sides("us"), "ratio", "low", "high", ("n_baseline", "n_base"), "n_other", "within_log_se"),
        "floor": _floor(c.floor),
        **_pick(c, *_sides("gbps", "tflops"), ("baseline_pct_theoretical", "base_pct"),
                ("other_pct_theoretical", "other_pct"), *_sides("pct_measured", "flags"), "other_precision"),
        "reasons": _notes(c.reasons),
        "numeric": None if n is None else _pick(n, "kind", *_sides("rel_l2", "passed")),
    }


def _ratio(r: RatioRow) -> dict[str, Json]:
    return {**_pick(r, "verdict", "ratio", "low", "high", ("n_baseline", "n_base"), "n_other", "within_log_se"),
            "floor": _floor(r.floor), "reasons": _notes(r.reasons)}


def _node_test(r: CollectiveDiff | CopyDiff) -> str:
    if isinstance(r, CollectiveDiff):
        return f"{r.scope} {r.op} {r.size_bytes}"
    return f"{r.kind} {r.method} {r.src}->{r.dst} x{r.directions}"


def _node(n: NodeComparison | None, regression_pct: float) -> dict[str, Json] | None:
    if n is None:
        return None
    return {
        "collectives": [{**_pick(c, "scope", "op", "size_bytes", "ranks", "timing", *_sides("us"),
                                 ("baseline_busbw_gbps", "base_busbw"), ("other_busbw_gbps", "other_busbw"),
                                 *_sides("algo", "status")), **_ratio(c.change)} for c in n.collectives],
        "copies": [{**_pick(c, "kind", "method", "src", "dst", "directions", "host_link",
                            *_sides("gbps", "pct_expected")), **_ratio(c.change)} for c in n.copies],
        "counters": [_pick(c, "gpu", "name", *_sides("delta", "per_s", "boot_per_s", "over_limit"))
                     for c in n.counters],
        "changes": [_pick(c, "what", "gpus", "scope", "op", "size_bytes", "before", "after") for c in n.changes],
        "only_baseline": list(n.only_base), "only_other": list(n.only_other),
        "noise_floors": [_floor(f) for f in n.floors],
        "shipped_floors": _shipped(n.shipped_model, n.shipped_pairs),
        "regressions": [{"test": _node_test(r), "ratio": r.change.ratio, "low": r.change.low,
                         "high": r.change.high} for r in n.regressions(regression_pct)],
    }


def _comparison(cmp: Comparison, regression_pct: float) -> dict[str, Json]:
    return {
        "baseline": cmp.base.label, "other": cmp.other.label,
        "same_gpu_model": cmp.same_gpu, "same_machine": cmp.same_machine,
        "environment": [_pick(e, "key", "area", "label", "gpu", "before", "after") for e in cmp.env],
        "checks": [_pick(c, "id", "title", "kind", "before", "after") for c in cmp.checks],
        "overall": _group(cmp.overall), "ops": [_group(g) for g in cmp.ops],
        "cases": [_case(c) for c in cmp.cases],
        "only_baseline": [_ref(r) for r in cmp.only_base], "only_other": [_ref(r) for r in cmp.only_other],
        "ceilings": [_pick(c, "name", "kind", "unit", ("baseline", "base"), "other") for c in cmp.ceilings],
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
        "unmatched": [_pick(u, "label", "side", "host", ("gpus", "uuids"), "reason") for u in d.unmatched],
        "worlds": [{"baseline": w.base, "other": w.other, **(_node(w.node, threshold) or {})} for w in d.worlds],
    }


def to_json(d: Diff, regression_pct: float | None = None) -> str:
    # No indent: json then uses its C encoder, 10x faster on a large diff.
    return json.dumps(to_data(d, regression_pct), ensure_ascii=False, allow_nan=False) + "\n"
