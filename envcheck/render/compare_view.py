"""What a diff and a history show, phrased once for the terminal, Markdown and HTML.

Reads the comparison data of ``envcheck.compare`` (``Diff``, ``History``) as it is; derives no
ratio, interval or verdict (``compare`` did). ``escape`` is applied to machine-supplied strings
placed inside catalogue sentences, as in ``render.view``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.compare.envdiff import STORY_AREAS, CheckChange, EnvChange
from envcheck.compare.match import SAMPLING
from envcheck.render import fmt
from envcheck.render.checktext import localized
from envcheck.render.i18n import case_label, catalog, phrase, translate
from envcheck.render.node_compare_view import NodeCompareView, control_pairs, node_compare_view, unmatched_lines
from envcheck.render.tiles import Tile
from envcheck.render.view import ceiling_name

Escape = Callable[[str], str]


@dataclass(frozen=True)
class ReportRow:
    label: str
    host: str
    created: str
    gpu: str
    kind: str
    verdict: str  # pass | warn | fail
    cases: int
    baseline: bool


@dataclass(frozen=True)
class GroupRow:
    name: str
    ratio: str
    interval: str
    count: int
    slower: int
    faster: int
    same: int
    not_comparable: int
    verdict: str  # the raw verdict (a CSS class, a colour)
    verdict_text: str


@dataclass(frozen=True)
class CaseRow:
    name: str
    timing: str
    base: str
    other: str
    ratio: str
    interval: str
    base_pct: str
    other_pct: str
    verdict: str
    verdict_text: str


@dataclass(frozen=True)
class EnvRow:
    what: str
    before: str
    after: str


@dataclass(frozen=True)
class CheckRow:
    kind: str
    kind_text: str
    title: str
    before: str
    after: str
    finding: str
    fix: str | None


@dataclass(frozen=True)
class NumericRow:
    name: str
    base: str
    other: str
    change: str


@dataclass(frozen=True)
class CeilingRow:
    name: str
    base: str
    other: str
    source: str


@dataclass(frozen=True)
class ComparisonView:
    title: str
    base_label: str
    other_label: str
    gpus_differ: str | None
    env: tuple[EnvRow, ...]
    checks: tuple[CheckRow, ...]
    has_cases: bool
    overall: str
    overall_verdict: str
    split: str
    noise: str  # where the run-to-run allowance came from, and the multiple-testing correction
    ops: tuple[GroupRow, ...]
    significant: tuple[CaseRow, ...]
    compared: tuple[CaseRow, ...]
    numeric: tuple[NumericRow, ...]
    not_comparable: tuple[tuple[str, str], ...]  # (case, why: a sentence escaped for the medium)
    only_base: tuple[str, ...]
    only_other: tuple[str, ...]
    only_base_title: str
    only_other_title: str
    ceilings: tuple[CeilingRow, ...]
    node: NodeCompareView | None = None  # the node tests, when both reports ran them
    headline: tuple[Tile, ...] = ()  # the cards at the head of a comparison: overall ratio, calls, testing
    settings_differ: str | None = None  # the runs sampled differently: said first, no row compared


@dataclass(frozen=True)
class DiffView:
    lang: str
    title: str
    reports: tuple[ReportRow, ...]
    comparisons: tuple[ComparisonView, ...]
    method: str
    significant_none: str
    unmatched: tuple[str, ...] = ()  # fleet nodes without a partner, and why
    node_significant_none: str = ""
    worlds: tuple[tuple[str, NodeCompareView], ...] = ()  # (title, the fleets' collectives across nodes)


def _t(lang: str) -> Callable[..., str]:
    def t(key: str, **params: Any) -> str:
        return translate(lang, key, **params)

    return t


def word(lang: str, prefix: str, value: str) -> str:
    """A value of a small vocabulary the comparison hands over (a verdict, a kind of change), in
    ``lang``; a value this version has no word for is shown as it is."""
    key = f"{prefix}{value}"
    return translate(lang, key) if key in catalog(lang) else value


def verdict_text(lang: str, verdict: str) -> str:
    return word(lang, "diff.verdict.", verdict)


def _info_row(i: Any, baseline: bool, lang: str) -> ReportRow:
    kind = word(lang, "kind.", i.kind)
    return ReportRow(i.label, i.host, i.created, i.gpu_name or fmt.DASH, kind, i.verdict, i.cases, baseline)


def _group_row(g: Any, lang: str) -> GroupRow:
    return GroupRow(g.name, fmt.ratio(g.geomean), fmt.interval(g.low, g.high), g.count, g.slower, g.faster, g.same,
                    g.not_comparable, g.verdict, verdict_text(lang, g.verdict))


def _case_row(c: Any, lang: str) -> CaseRow:
    return CaseRow(case_name(c, lang), c.timing or fmt.DASH, fmt.duration_us(c.base_us), fmt.duration_us(c.other_us),
                   fmt.ratio(c.ratio), fmt.interval(c.low, c.high), fmt.pct(c.base_pct), fmt.pct(c.other_pct),
                   c.verdict, verdict_text(lang, c.verdict))


def _shape(shape: Any) -> str:
    """A size as every table shows it; text as the comparison gave it where it is text already."""
    return fmt.shape(shape) if isinstance(shape, tuple) else str(shape)


def case_name(c: Any, lang: str) -> str:
    """One compared case, with the one label every view uses when the comparison carries its key."""
    key = getattr(c, "key", None)
    if isinstance(key, tuple) and getattr(c, "other_precision", None) is None:
        return case_label(lang, key)
    return str(c.name)


def reasons_text(reasons: Sequence[Any], lang: str, escape: Escape) -> str:
    """Why a pair was not compared: reasons given as keys are phrased, text is shown as given."""
    parts = [phrase(lang, r.key, r.params, escape) if hasattr(r, "key") else escape(str(r)) for r in reasons]
    return "; ".join(parts)


def _env_label(c: Any, lang: str) -> str:
    key = getattr(c, "key", "")
    label_key = f"fact.{key}"
    if key and label_key in catalog(lang):
        label = translate(lang, label_key)
        return f"GPU {c.gpu} {label}" if c.gpu is not None else label
    if key.startswith("setting."):
        return translate(lang, "fact.setting", name=key.removeprefix("setting."))
    return str(c.title)


def _env_value(c: Any, value: str, lang: str) -> str:
    """A run setting's yes or no in the reader's words; every other value as recorded."""
    if str(getattr(c, "key", "")).startswith("setting.") and value in ("True", "False"):
        return translate(lang, "yes" if value == "True" else "no")
    return value


def _check_row(c: CheckChange, lang: str) -> CheckRow:
    """One changed check, its title, finding and fix phrased in ``lang`` (the fix only when the newer report has one)."""
    said = localized(c.said, lang) if c.said is not None else None
    title, finding = (said.title, said.finding) if said else (c.title, c.finding)
    fix = (said.fix if said else c.fix) if c.fix else None
    before = translate(lang, f"status.{c.before}") if c.before else fmt.DASH
    after = translate(lang, f"status.{c.after}") if c.after else fmt.DASH
    return CheckRow(c.kind, word(lang, "diff.health.", c.kind), title, before, after, finding, fix)


def _refs(refs: Sequence[Any]) -> tuple[str, ...]:
    """Cases present on one side only, compacted per op, implementation and precision."""
    groups: dict[str, list[str]] = {}
    for r in refs:
        groups.setdefault(f"{r.op} {r.impl} {fmt.precision_label(r.dtype, r.precision)}", []).append(_shape(r.shape))
    return tuple(f"{k}: {', '.join(v)}" for k, v in groups.items())


def numeric_label(c: Any, lang: str) -> str:
    n = c.numeric
    if n is None:
        return ""
    if n.kind == "grew":
        return translate(lang, "diff.numeric.grew", factor=f"{n.factor:.0f}×" if n.factor else "")
    return word(lang, "diff.numeric.", n.kind)


def _kind(kind: str, lang: str) -> str:
    return translate(lang, f"ceiling.{kind}") if kind in ("theoretical", "measured") else kind


def _source(source: Any, lang: str, escape: Escape) -> str:
    """A ceiling's source: an analysis ``Source`` phrased, or the text an older comparison carried."""
    if source is None:
        return fmt.DASH
    if hasattr(source, "kind") and hasattr(source, "params"):
        text = phrase(lang, f"peak_source.{source.kind}", source.params, escape)
        if not getattr(source, "verified", True):
            text += translate(lang, "list.sep") + translate(lang, "peak_source.unverified")
        return text
    return escape(str(source))


def _noise(cmp: Any, lang: str, escape: Escape, fdr: str) -> str:
    """One sentence: each allowance source with its rows, then the family tested."""
    t = _t(lang)
    counts = dict(cmp.sources)
    parts = []
    pairs = control_pairs(cmp.shipped_pairs, lang, escape)
    if counts.get("repeats") and cmp.shipped_model:
        parts.append(t("diff.noise.repeats_run", model=escape(cmp.shipped_model), pairs=pairs, count=counts["repeats"]))
    elif counts.get("repeats"):
        parts.append(t("diff.noise.repeats", count=counts["repeats"]))
    if counts.get("shipped"):
        parts.append(t("diff.noise.shipped", model=escape(cmp.shipped_model or fmt.DASH), pairs=pairs,
                       count=counts["shipped"]))
    sources = translate(lang, "list.sep").join(parts) if parts else t("diff.noise.none")
    said = [t("diff.noise", sources=sources, tested=cmp.tested, fdr=fdr)]
    why: dict[str, int] = {}  # each reason rows are not judged for, with its advice where following it helps
    for c in cmp.cases:
        for n in c.reasons if c.verdict == "not judged" else ():
            why[n.key] = why.get(n.key, 0) + 1
    return " ".join([*said, *(t(key, count=n) for key, n in why.items())])


def _split(g: Any, lang: str) -> str:
    """How the rows' verdicts split, with the ratios not judged when there are any."""
    t = _t(lang)
    said = t("diff.split", slower=g.slower, faster=g.faster, same=g.same, uncertain=g.uncertain,
             not_comparable=g.not_comparable)
    unjudged = getattr(g, "not_judged", 0)
    return f"{said} {t('diff.split.not_judged', count=unjudged)}" if unjudged else said


def _fdr(confidence: float) -> str:
    return fmt.general(round((1.0 - confidence) * 100, 6))


def _headline(cmp: Any, lang: str, confidence: float, practical_pct: float | None) -> tuple[Tile, ...]:
    """The comparison at a glance, like a run's tiles: the overall ratio with its interval and verdict, the rows
    called slower and faster, and the family the multiple-testing correction covered."""
    if not cmp.cases:
        return ()
    t = _t(lang)
    g = cmp.overall
    overall = Tile(t("diff.card.overall"), fmt.ratio(g.geomean),
                   (t("diff.card.interval", confidence=fmt.general(confidence * 100), interval=fmt.interval(g.low, g.high)),
                    verdict_text(lang, g.verdict)), "fail" if g.verdict == "slower" else None)
    rest = [t("diff.card.calls_rest", same=g.same, uncertain=g.uncertain, not_comparable=g.not_comparable)]
    if getattr(g, "not_judged", 0):
        rest.append(t("diff.card.not_judged", count=g.not_judged))
    calls = Tile(t("diff.card.calls"), t("diff.card.calls_value", slower=g.slower, faster=g.faster), tuple(rest),
                 "fail" if g.slower else None)
    lines = [t("diff.card.testing_line", fdr=_fdr(confidence))]
    if practical_pct is not None:
        lines.append(t("diff.card.practical", pct=fmt.general(practical_pct)))
    testing = Tile(t("diff.card.testing"), t("diff.card.testing_value", tested=cmp.tested), tuple(lines))
    return overall, calls, testing


def _settings_differ(cmp: Any, lang: str, escape: Escape) -> str | None:
    """"These runs sampled differently (quick False → True, ...)": the first thing a diff of such runs says."""
    names = getattr(cmp, "settings", ())
    if not names:
        return None
    shown = {c.key: c for c in cmp.env}
    parts = [f"{n} {shown[f'setting.{n}'].before} → {shown[f'setting.{n}'].after}" if f"setting.{n}" in shown else n
             for n in names]
    # Each setting is code (its name and values as the report records them), in every language.
    return _t(lang)("diff.settings_differ", settings=translate(lang, "list.sep").join(f"`{escape(x)}`" for x in parts),
                    count=len(cmp.cases))


def comparison_view(cmp: Any, lang: str, escape: Escape, confidence: float = 0.95,
                    practical_pct: float | None = None) -> ComparisonView:
    t = _t(lang)
    g = cmp.overall
    sig = sorted((c for c in cmp.cases if c.verdict in ("slower", "faster")), key=lambda c: -(c.ratio or 0))
    return ComparisonView(
        title=t("diff.vs", other=escape(cmp.other.label), baseline=escape(cmp.base.label)),
        base_label=cmp.base.label, other_label=cmp.other.label,
        gpus_differ=None if cmp.same_gpu else t("diff.different_gpus",
                                                baseline_gpu=escape(cmp.base.gpu_name or fmt.DASH),
                                                other_gpu=escape(cmp.other.gpu_name or fmt.DASH)),
        env=tuple(EnvRow(_env_label(c, lang), _env_value(c, c.before, lang), _env_value(c, c.after, lang))
                  for c in cmp.env),
        checks=tuple(_check_row(c, lang) for c in cmp.checks),
        has_cases=bool(cmp.cases),
        overall=t("diff.overall", ratio=fmt.ratio(g.geomean), interval=fmt.interval(g.low, g.high), count=g.count,
                  verdict=verdict_text(lang, g.verdict)),
        overall_verdict=g.verdict,
        split=_split(g, lang),
        noise=_noise(cmp, lang, escape, _fdr(confidence)),
        ops=tuple(_group_row(o, lang) for o in cmp.ops),
        significant=tuple(_case_row(c, lang) for c in sig),
        compared=tuple(_case_row(c, lang) for c in cmp.compared),
        numeric=tuple(NumericRow(case_name(c, lang), fmt.sci(c.numeric.base_rel_l2), fmt.sci(c.numeric.other_rel_l2),
                                 numeric_label(c, lang)) for c in cmp.numeric_changes if c.numeric),
        not_comparable=tuple((case_name(c, lang), reasons_text(c.reasons, lang, escape)) for c in cmp.not_comparable),
        only_base=_refs(cmp.only_base), only_other=_refs(cmp.only_other),
        only_base_title=t("diff.only_base", count=len(cmp.only_base)),
        only_other_title=t("diff.only_other", label=escape(cmp.other.label), count=len(cmp.only_other)),
        ceilings=tuple(CeilingRow(f"{ceiling_name(lang, c.name)} {_kind(c.kind, lang)} ({c.unit})", fmt.num(c.base), fmt.num(c.other),
                                  _source(c.other_source or c.base_source, lang, escape)) for c in cmp.ceilings),
        node=node_compare_view(cmp.node, lang, escape) if getattr(cmp, "node", None) is not None else None,
        headline=_headline(cmp, lang, confidence, practical_pct),
        settings_differ=_settings_differ(cmp, lang, escape),
    )


def diff_view(d: Any, lang: str, escape: Escape) -> DiffView:
    t = _t(lang)
    return DiffView(
        lang=lang,
        title=t("diff.title", count=len(d.reports), baseline=escape(d.baseline.label)),
        reports=tuple(_info_row(i, n == 0, lang) for n, i in enumerate(d.reports)),
        comparisons=tuple(comparison_view(c, lang, escape, d.confidence, d.practical_pct) for c in d.comparisons),
        method=t("diff.method", confidence=fmt.general(d.confidence * 100), resamples=d.resamples,
                 threshold=fmt.general(d.practical_pct), fdr=_fdr(d.confidence)),
        significant_none=t("diff.significant.none", threshold=fmt.general(d.practical_pct)),
        unmatched=unmatched_lines(getattr(d, "unmatched", ()), lang, escape),
        node_significant_none=t("diff.node.significant.none", threshold=fmt.general(d.practical_pct)),
        worlds=tuple((t("diff.world", other=escape(w.other), baseline=escape(w.base)),
                      node_compare_view(w.node, lang, escape)) for w in getattr(d, "worlds", ())),
    )


# --------------------------------------------------------------------------- history


@dataclass(frozen=True)
class TrendCell:
    ratio: str
    interval: str


@dataclass(frozen=True)
class HistoryRow:
    label: str
    created: str
    host: str
    gpu: str
    verdict: str
    cases: int
    trend: tuple[TrendCell | None, ...]  # per op
    peaks: tuple[str, ...]  # per op: "4376 GB/s (91%)"
    peaks_short: tuple[str, ...]  # per op, without the unit: "4376 (91%)"
    copy_gbps: str


@dataclass(frozen=True)
class StepRow:
    direction: str
    text: str


@dataclass(frozen=True)
class NodeSeriesRow:
    """One report's node numbers: all_reduce busbw at the smallest and largest size ("14.6 at 1 MiB"),
    the slowest pair's one-way peer copy."""

    label: str
    small: str
    large: str
    p2p: str


@dataclass(frozen=True)
class HistoryView:
    lang: str
    title: str
    warnings: tuple[str, ...]
    ops: tuple[str, ...]
    rows: tuple[HistoryRow, ...]
    steps: tuple[StepRow, ...]
    steps_none: str
    method: str
    machine: str = ""  # "vm · 2 × NVIDIA H200 (GPU-1d0eb562, GPU-5ce748fb)"
    single: str | None = None  # one report: why there is no trend
    node: tuple[NodeSeriesRow, ...] = ()  # empty: no report of this machine ran node tests


def _story(changes: Sequence[EnvChange], lang: str) -> str:
    """What changed at a step, in ``lang`` ("driver 575.57 -> 580.159, PyTorch 2.10.0 -> 2.11.0")."""
    keep = [c for c in changes if c.area in STORY_AREAS or c.key == "envcheck.version"]
    parts = [f"{_env_label(c, lang)} {c.before} -> {c.after}" for c in keep]
    settings = [c.key.removeprefix("setting.") for c in changes if c.key.startswith("setting.")]
    if settings:
        parts.append(translate(lang, "history.step.settings", names=", ".join(settings)))
    return translate(lang, "list.sep").join(parts)


def step_sentence(s: Any, lang: str, escape: Escape) -> str:
    """"matmul triton bf16 got 7.0% faster at 2026-12-01 when driver 575.57 -> 580.159"."""
    t = _t(lang)
    when = escape(s.created[:10])
    if s.factor >= 2:  # "281× slower" reads better than "28024% slower"
        head = t(f"history.step.{s.direction}_x", group=escape(s.group), factor=fmt.num(s.factor), when=when)
    else:
        head = t(f"history.step.{s.direction}", group=escape(s.group), pct=f"{s.change_pct:.1f}", when=when)
    story = _story(list(s.changes), lang)
    return head + (t("history.step.when", changes=escape(story)) if story else t("history.step.nochange"))


def _peak(o: Any, unit: bool = True) -> str:
    if o is None or (o.peak_gbps is None and o.peak_tflops is None):
        return fmt.DASH
    if o.peak_tflops is not None:
        value, name, share = o.peak_tflops, "TFLOP/s", o.peak_tflops_pct
    else:
        value, name, share = o.peak_gbps, "GB/s", o.peak_gbps_pct
    return f"{fmt.num(value)}{' ' + name if unit else ''} ({fmt.pct(share)})"


def short_uuid(uuid: str | None) -> str:
    """``GPU-1d0eb562``: the UUID's first group, enough to tell a machine's GPUs apart at a glance."""
    return uuid[:12] if uuid else fmt.DASH


def machine_name(m: Any) -> str:
    """A machine as the history heads name it: host, GPU count and model, short UUIDs."""
    if m is None:
        return fmt.DASH
    models: dict[str, int] = {}
    for g in m.gpus:
        models[g.model or "GPU"] = models.get(g.model or "GPU", 0) + 1
    gpus = ", ".join(f"{n} × {model}" if n > 1 else model for model, n in models.items())
    ids = ", ".join(short_uuid(g.uuid) for g in m.gpus if g.uuid)
    return " · ".join(x for x in (m.host, gpus) if x) + (f" ({ids})" if ids else "")


def _node_series(p: Any) -> NodeSeriesRow | None:
    n = p.node
    if n is None:
        return None

    def at(bw: float | None, size: int | None) -> str:
        return fmt.DASH if bw is None else f"{fmt.num(bw)} @ {fmt.size_bytes(size)}"

    return NodeSeriesRow(p.info.label, at(n.small_busbw, n.small_bytes), at(n.large_busbw, n.large_bytes),
                         fmt.num(n.p2p_gbps))


def _settings_groups(groups: Sequence[tuple[Any, Sequence[str]]]) -> list[tuple[str, Sequence[str]]]:
    """Each group of reports sampled alike, named by the settings that tell the groups apart ("quick True, rep_ms 40")."""
    names = [n for n in SAMPLING if len({getattr(s, n) for s, _ in groups}) > 1]
    return [(", ".join(f"`{n} {getattr(s, n)}`" for n in names), labels) for s, labels in groups]


def history_view(h: Any, lang: str, escape: Escape) -> HistoryView:
    t = _t(lang)
    warnings = []
    for key, groups in (("history.mixed_hosts", h.hosts), ("history.mixed_gpus", h.gpus),
                        ("history.mixed_settings", _settings_groups(getattr(h, "settings", ())))):
        if groups:
            text = "; ".join(f"{name}: {', '.join(labels)}" for name, labels in groups)
            warnings.append(t(key, groups=escape(text)))
    rows = []
    trend_known = getattr(h, "trend", True)
    for p in h.points:
        trend = []
        for op in h.ops:
            o = p.op(op)
            # One report is a starting point: a column of 1.000× would read as a measured trend.
            trend.append(TrendCell(fmt.ratio(o.ratio), fmt.interval(o.low, o.high)) if o and trend_known else None)
        gpu = p.info.gpu_name or fmt.DASH
        if getattr(p, "gpu_uuid", None):
            gpu = f"{gpu} ({short_uuid(p.gpu_uuid)})"
        rows.append(HistoryRow(p.info.label, p.info.created, p.info.host, gpu,
                               p.info.verdict, p.info.cases, tuple(trend), tuple(_peak(p.op(op)) for op in h.ops),
                               tuple(_peak(p.op(op), unit=False) for op in h.ops), fmt.num(p.copy_gbps)))
    machine = escape(machine_name(getattr(h, "machine", None)))
    node = tuple(r for r in (_node_series(p) for p in h.points if getattr(p, "node", None) is not None) if r)
    return HistoryView(
        lang=lang,
        title=t("history.title.machine", machine=machine, count=len(h.points), first=escape(h.points[0].info.created),
                last=escape(h.points[-1].info.created)),
        machine=machine, single=None if trend_known else t("history.single"), node=node,
        warnings=tuple(warnings), ops=tuple(h.ops), rows=tuple(rows),
        steps=tuple(StepRow(s.direction, step_sentence(s, lang, escape)) for s in h.steps),
        steps_none=t("history.steps.none", threshold=fmt.general(h.practical_pct)),
        method=t("history.method", threshold=fmt.general(h.practical_pct)),
    )
