"""A diff's and a history's sentences and labels, shared by every medium; the comparison's records are read
directly and nothing is derived here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from envcheck.compare.diff import CaseDiff, CaseRef, CeilingRow, Comparison, Diff, GroupSummary
from envcheck.compare.envdiff import STORY_AREAS, CheckChange, EnvChange
from envcheck.compare.history import History, OpPoint, Point, Step
from envcheck.compare.machine import MachineId
from envcheck.compare.match import SAMPLING
from envcheck.compare.node_diff import Change, CollectiveDiff, CopyDiff, NodeComparison
from envcheck.compare.stats import RatioRow
from envcheck.model import Note
from envcheck.render import fmt
from envcheck.render.checktext import localized
from envcheck.render.i18n import case_label, esc, has, join, phrase, t, word
from envcheck.render.node_view import Tile
from envcheck.render.view import ceiling_name


def verdict(value: str) -> str:
    return word("diff.verdict.", value)


def title(d: Diff) -> str:
    return t("diff.title", count=len(d.reports), baseline=esc(d.baseline.label))


def vs(cmp: Comparison) -> str:
    return t("diff.vs", other=esc(cmp.other.label), baseline=esc(cmp.base.label))


def gpus_differ(cmp: Comparison) -> str | None:
    return None if cmp.same_gpu else t("diff.different_gpus", baseline_gpu=esc(cmp.base.gpu_name or fmt.DASH),
                                       other_gpu=esc(cmp.other.gpu_name or fmt.DASH))


def case_name(c: CaseDiff | CaseRef | RatioRow) -> str:
    """One compared case, by the one label every view uses when the comparison carries its key."""
    key = getattr(c, "key", None)
    return case_label(key) if isinstance(key, tuple) and getattr(c, "other_precision", None) is None else str(c.name)


def significant(cmp: Comparison | NodeComparison) -> list[CaseDiff | CollectiveDiff | CopyDiff]:
    """The rows called slower or faster, the largest ratio first."""
    rows = [*cmp.collectives, *cmp.copies] if isinstance(cmp, NodeComparison) else cmp.cases
    return sorted((c for c in rows if getattr(c, "change", c).verdict in ("slower", "faster")),
                  key=lambda c: -(getattr(c, "change", c).ratio or 0))


def reasons_text(reasons: Sequence[Note | str]) -> str:
    """Why a pair was not compared: reasons given as keys are phrased, text is shown as given."""
    return "; ".join(phrase(r.key, r.params) if hasattr(r, "key") else esc(r) for r in reasons)


def env_label(c: EnvChange) -> str:
    key = getattr(c, "key", "")
    if key and has(f"fact.{key}"):
        return f"GPU {c.gpu} {t(f'fact.{key}')}" if c.gpu is not None else t(f"fact.{key}")
    if key.startswith("setting."):
        return t("fact.setting", name=key.removeprefix("setting."))
    return str(c.title)


def env_value(c: EnvChange, value: str) -> str:
    """A run setting's yes or no in the reader's words; every other value as recorded."""
    if str(getattr(c, "key", "")).startswith("setting.") and value in ("True", "False"):
        return t("yes") if value == "True" else t("no")
    return value


def check_said(c: CheckChange) -> tuple[str, str, str | None]:
    """A changed check's title, finding and fix (only when the newer report has one) in the reader's words."""
    said = localized(c.said) if c.said is not None else None
    title_, finding = (said.title, said.finding) if said else (c.title, c.finding)
    return title_, finding, (said.fix if said else c.fix) if c.fix else None


def status(value: str | None) -> str:
    return t(f"status.{value}") if value else fmt.DASH


def refs(items: Sequence[CaseRef]) -> list[str]:
    """Cases present on one side only, compacted per op, implementation and precision."""
    groups: dict[str, list[str]] = {}
    for r in items:
        shape = fmt.shape(r.shape) if isinstance(r.shape, tuple) else str(r.shape)
        groups.setdefault(f"{r.op} {r.impl} {fmt.precision_label(r.dtype, r.precision)}", []).append(shape)
    return [f"{k}: {', '.join(v)}" for k, v in groups.items()]


def numeric_label(c: CaseDiff) -> str:
    n = c.numeric
    if n.kind == "grew":
        return t("diff.numeric.grew", factor=f"{n.factor:.0f}×" if n.factor else "")
    return word("diff.numeric.", n.kind)


def ceiling_label(c: CeilingRow) -> str:
    kind = t(f"ceiling.{c.kind}") if c.kind in ("theoretical", "measured") else c.kind
    return f"{ceiling_name(c.name)} {kind} ({c.unit})"


def control_pairs(pairs: Sequence[tuple[str, str]]) -> str:
    """Committed control pairs as "baseline / other", listed in the language's way."""
    return join([f"{esc(a)} / {esc(b)}" for a, b in pairs])


def fdr(confidence: float) -> str:
    return fmt.general(round((1.0 - confidence) * 100, 6))


def noise(cmp: Comparison, confidence: float) -> str:
    """One sentence: each allowance source with its rows, then the family tested."""
    counts = dict(cmp.sources)
    pairs = control_pairs(cmp.shipped_pairs)
    parts = []
    if counts.get("repeats") and cmp.shipped_model:
        parts.append(t("diff.noise.repeats_run", model=esc(cmp.shipped_model), pairs=pairs, count=counts["repeats"]))
    elif counts.get("repeats"):
        parts.append(t("diff.noise.repeats", count=counts["repeats"]))
    if counts.get("shipped"):
        parts.append(t("diff.noise.shipped", model=esc(cmp.shipped_model or fmt.DASH), pairs=pairs,
                       count=counts["shipped"]))
    said = [t("diff.noise", sources=join(parts) if parts else t("diff.noise.none"), tested=cmp.tested,
              fdr=fdr(confidence))]
    # Each reason rows are not judged for, with its advice where following it helps.
    why = Counter(n.key for c in cmp.cases if c.verdict == "not judged" for n in c.reasons)
    return " ".join([*said, *(t(key, count=n) for key, n in why.items())])


def overall(g: GroupSummary) -> str:
    return t("diff.overall", ratio=fmt.ratio(g.geomean), interval=fmt.interval(g.low, g.high), count=g.count,
             verdict=verdict(g.verdict))


def split(g: GroupSummary) -> str:
    """How the rows' verdicts split, with the ratios not judged when there are any."""
    said = t("diff.split", slower=g.slower, faster=g.faster, same=g.same, uncertain=g.uncertain,
             not_comparable=g.not_comparable)
    return f"{said} {t('diff.split.not_judged', count=g.not_judged)}" if g.not_judged else said


def headline(cmp: Comparison, d: Diff) -> list[Tile]:
    """The comparison at a glance: the overall ratio with its interval and verdict, the rows called slower and
    faster, and the family the multiple-testing correction covered."""
    if not cmp.cases:
        return []
    g = cmp.overall
    rest = [t("diff.card.calls_rest", same=g.same, uncertain=g.uncertain, not_comparable=g.not_comparable)]
    rest += [t("diff.card.not_judged", count=g.not_judged)] if g.not_judged else []
    lines = [t("diff.card.testing_line", fdr=fdr(d.confidence))]
    lines += [t("diff.card.practical", pct=fmt.general(d.practical_pct))] if d.practical_pct is not None else []
    return [Tile(t("diff.card.overall"), fmt.ratio(g.geomean),
                 (t("diff.card.interval", confidence=fmt.general(d.confidence * 100),
                    interval=fmt.interval(g.low, g.high)), verdict(g.verdict)), "fail" if g.verdict == "slower" else None),
            Tile(t("diff.card.calls"), t("diff.card.calls_value", slower=g.slower, faster=g.faster), tuple(rest),
                 "fail" if g.slower else None),
            Tile(t("diff.card.testing"), t("diff.card.testing_value", tested=cmp.tested), tuple(lines))]


def settings_differ(cmp: Comparison) -> str | None:
    """"These runs sampled differently (quick False → True, ...)": the first thing a diff of such runs says."""
    if not (names := cmp.settings):
        return None
    shown = {c.key: c for c in cmp.env}
    parts = [f"{n} {shown[f'setting.{n}'].before} → {shown[f'setting.{n}'].after}" if f"setting.{n}" in shown else n
             for n in names]
    # Each setting is code (its name and values as the report records them), in every language.
    return t("diff.settings_differ", settings=join([f"`{esc(x)}`" for x in parts]), count=len(cmp.cases))


def method(d: Diff) -> str:
    return t("diff.method", confidence=fmt.general(d.confidence * 100), resamples=d.resamples,
             threshold=fmt.general(d.practical_pct), fdr=fdr(d.confidence))


def unmatched(d: Diff) -> list[str]:
    """Each fleet node without a partner: who it is and why it was not compared."""
    return [t("diff.unmatched.row", label=esc(u.label), host=esc(u.host), gpus=esc(", ".join(g[:12] for g in u.uuids)
                                                                                  or fmt.DASH),
              side=t(f"diff.side.{u.side}"), why=phrase(u.reason, {"side": "other" if u.side == "baseline" else
                                                                   "baseline"}))
            for u in d.unmatched]


# --------------------------------------------------------------------------- node tests


def node_row_name(r: CollectiveDiff | CopyDiff) -> str:
    """``all_reduce 1 GiB`` (``world all_reduce 1 GiB`` across a fleet), or ``d2d copy_engine GPU0->GPU1``
    (``<->`` both directions at once)."""
    if isinstance(r, CollectiveDiff):
        return f"{'' if r.scope == 'node' else f'{r.scope} '}{r.op} {fmt.size_bytes(r.size_bytes)}"
    src, dst = ("host" if g is None else f"GPU{g}" for g in (r.src, r.dst))
    return f"{r.kind} {r.method} {src}{'<->' if r.directions == 2 else '->'}{dst}"


def node_row(r: CollectiveDiff | CopyDiff) -> tuple[str, str, str, str, str]:
    """(name, baseline GB/s, other GB/s, bandwidth change, detail: NCCL's algorithms or the share of the link)."""
    if isinstance(r, CollectiveDiff):
        algo = r.base_algo if r.base_algo == r.other_algo else f"{r.base_algo or fmt.DASH} → {r.other_algo or fmt.DASH}"
        values, change, detail = (r.base_busbw, r.other_busbw), r.busbw_change_pct, esc(algo or fmt.DASH)
    else:
        values, change = (r.base_gbps, r.other_gbps), r.gbps_change_pct
        detail = f"{fmt.pct(r.base_pct_expected)} → {fmt.pct(r.other_pct_expected)}"
    return (esc(node_row_name(r)), fmt.num(values[0]), fmt.num(values[1]),
            fmt.DASH if change is None else f"{change:+.1f}%", detail)


def node_change(c: Change) -> str:
    """What changed in the wiring or NCCL ("algorithm all_reduce 1 GiB", "path 0-1")."""
    if c.what == "algorithm":
        subject = f"{c.op} {fmt.size_bytes(c.size_bytes)}" + ("" if c.scope == "node" else f" ({c.scope})")
    elif c.what == "path":
        subject = "-".join(map(str, c.gpus))
    elif c.what == "nvlinks":
        subject = str(c.gpus[0]) if c.gpus else fmt.DASH
    else:
        subject = c.scope or fmt.DASH
    return t(f"diff.node.change.{c.what}", subject=esc(subject))


def node_method(n: NodeComparison) -> str:
    """The method's sentence, and where the shipped node floors came from."""
    if n.shipped_model is None:
        return t("diff.node.method")
    return t("diff.node.method") + t("diff.node.floors", model=esc(n.shipped_model),
                                     pairs=control_pairs(n.shipped_pairs) or fmt.DASH)


# --------------------------------------------------------------------------- history


def short_uuid(uuid: str | None) -> str:
    """``GPU-1d0eb562``: the UUID's first group, enough to tell a machine's GPUs apart at a glance."""
    return uuid[:12] if uuid else fmt.DASH


def machine_name(m: MachineId | None) -> str:
    """A machine as the history heads name it: host, GPU count and model, short UUIDs."""
    if m is None:
        return fmt.DASH
    models = Counter(g.model or "GPU" for g in m.gpus)
    gpus = ", ".join(f"{n} × {model}" if n > 1 else model for model, n in models.items())
    ids = ", ".join(short_uuid(g.uuid) for g in m.gpus if g.uuid)
    return " · ".join(x for x in (m.host, gpus) if x) + (f" ({ids})" if ids else "")


def machine_names(hs: Sequence[History]) -> str:
    return "; ".join(esc(machine_name(h.machine)) for h in hs)


def history_title(h: History) -> str:
    return t("history.title.machine", machine=esc(machine_name(h.machine)), count=len(h.points),
             first=esc(h.points[0].info.created), last=esc(h.points[-1].info.created))


def warnings(h: History) -> list[str]:
    """Reports of several hosts, GPUs or sampling settings in one history, each group named."""
    names = [n for n in SAMPLING if len({getattr(s, n) for s, _ in h.settings}) > 1]
    settings = [(", ".join(f"`{n} {getattr(s, n)}`" for n in names), labels) for s, labels in h.settings]
    return [t(key, groups=esc("; ".join(f"{name}: {', '.join(labels)}" for name, labels in groups)))
            for key, groups in (("history.mixed_hosts", h.hosts), ("history.mixed_gpus", h.gpus),
                                ("history.mixed_settings", settings)) if groups]


def point_gpu(p: Point) -> str:
    gpu = p.info.gpu_name or fmt.DASH
    return f"{gpu} ({short_uuid(p.gpu_uuid)})" if p.gpu_uuid else gpu


def trend(h: History, p: Point) -> list[tuple[str, str] | None]:
    """Per op, (ratio, interval) to the first report; none where one report is all there is (a column of
    1.000× would read as a measured trend)."""
    return [(fmt.ratio(o.ratio), fmt.interval(o.low, o.high)) if (o := p.op(op)) and h.trend
            else None for op in h.ops]


def peak(o: OpPoint | None, unit: bool = True) -> str:
    if o is None or (o.peak_gbps is None and o.peak_tflops is None):
        return fmt.DASH
    value, name, share = ((o.peak_tflops, "TFLOP/s", o.peak_tflops_pct) if o.peak_tflops is not None
                          else (o.peak_gbps, "GB/s", o.peak_gbps_pct))
    return f"{fmt.num(value)}{' ' + name if unit else ''} ({fmt.pct(share)})"


def busbw_at(bw: float | None, size: int | None) -> str:
    return fmt.DASH if bw is None else f"{fmt.num(bw)} @ {fmt.size_bytes(size)}"


def step(s: Step) -> str:
    """"matmul triton bf16 got 7.0% faster at 2026-12-01 when driver 575.57 -> 580.159"."""
    when = esc(s.created[:10])
    if s.factor >= 2:  # "281× slower" reads better than "28024% slower"
        head = t(f"history.step.{s.direction}_x", group=esc(s.group), factor=fmt.num(s.factor), when=when)
    else:
        head = t(f"history.step.{s.direction}", group=esc(s.group), pct=f"{s.change_pct:.1f}", when=when)
    # What changed at the step ("driver 575.57 -> 580.159, PyTorch 2.10.0 -> 2.11.0").
    parts = [f"{env_label(c)} {c.before} -> {c.after}" for c in s.changes
             if c.area in STORY_AREAS or c.key == "envcheck.version"]
    settings = [c.key.removeprefix("setting.") for c in s.changes if c.key.startswith("setting.")]
    story = join(parts + ([t("history.step.settings", names=", ".join(settings))] if settings else []))
    return head + (t("history.step.when", changes=esc(story)) if story else t("history.step.nochange"))
