"""What a fleet report shows, decided once for every medium: verdicts with their reasons, the ranks
lost with the phase they were lost in, or slow, the world collectives and where their slowness comes
from, each node shaped like a node report (``render.node_view``'s blocks and parts), the rules and
the baseline. Every number and verdict was derived by ``analysis.fleet``; this module phrases them.
"""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.analysis import Analysis
from envcheck.analysis import fleet as af
from envcheck.model import Report
from envcheck.model.fleet import Rule
from envcheck.render import fmt
from envcheck.render.checktext import all_localized
from envcheck.render.node_view import (
    _P,
    DASH,
    Cell,
    Escape,
    Line,
    Part,
    Section,
    Table,
    _gpu,
    conclusion_text,
    node_parts,
    sweep_part,
    verdict_lines,
)
from envcheck.render.tiles import Tile


@dataclass(frozen=True)
class FleetView:
    lang: str
    title: str
    subtitle: str
    machine: str
    tiles: tuple[Tile, ...]
    sections: tuple[Section, ...]
    footer: str


def metric_label(name: str | None, p: _P) -> str:
    if name is None:
        return fmt.DASH
    m = af.describe_metric(name)
    params = dict(m.params)
    raw = {}
    if "size_bytes" in params:
        raw["size"] = fmt.size_bytes(int(params["size_bytes"]))
    if "kind" in params:
        raw["kind"] = p.word("node.copy.kind.", params["kind"])
    key = f"fleet.metric.{m.key}" + (".sized" if m.key == "busbw" and "size_bytes" in params else "")
    return p.key(key, params, raw)


def _value(name: str | None, v: float | None) -> str:
    if v is None:
        return fmt.DASH
    unit = af.describe_metric(name).unit if name else ""
    if not unit and float(v).is_integer():
        return str(int(v))  # a count: wrong elements, failed checks
    return f"{fmt.num(v)} {unit}".rstrip()


def finding_text(f: af.Finding, p: _P) -> str:
    if f.kind == "missing":
        # Why a metric has no value: the fleet's words for it, else a node test's error or skip reason.
        reason = p.t(f"fleet.missing.{f.reason}") if p.has(f"fleet.missing.{f.reason}") else p.reason(f.reason)
    else:
        reason = p.escape(f.reason or "")  # algorithm_differs: the two NCCL algorithm/protocol names
    raw = {"metric": metric_label(f.metric, p), "value": _value(f.metric, f.value),
           "reference": _value(f.metric, f.reference), "source": p.word("fleet.source.", f.source),
           "margin": fmt.ratio_pct(f.margin), "shortfall": fmt.ratio_pct(f.shortfall),
           "ranks": ", ".join(map(str, f.ranks)), "direction": p.word("fleet.direction.", f.direction),
           "reason": reason, "phase": p.t(f"fleet.phase.{f.reason or 'suite'}") if f.kind == "rank_failed" else ""}
    key = f"fleet.finding.{f.kind}"
    if f.kind == "worse" and f.shortfall is None:
        key += ".from_zero"
    if f.kind == "missing" and f.reference is not None:
        key += ".with_reference"
    return p.key(key, {"count": len(f.ranks)}, raw)


def _rule_label(r: Rule, p: _P) -> str:
    """What a rule's metric stands for, or the prefix of the metrics it covers."""
    if af.describe_metric(r.metric).key != "other":
        return metric_label(r.metric, p)
    return p.t("fleet.rule.prefix", prefix=p.escape(r.metric))


def not_applied_text(fa: af.FleetAnalysis, p: _P) -> str:
    """The rules of a CPU fleet no node was held to, each with why."""
    return p.t("fleet.not_applied", rules=p.join([
        p.t("fleet.not_applied.item", rule=_rule_label(x.rule, p), reason=p.t(f"fleet.not_applied.{x.reason}"))
        for x in fa.not_applied]))


def _verdict_section(fa: af.FleetAnalysis, p: _P) -> Section:
    rows = []
    lines = []
    nodes = {n.node.host: n for n in fa.nodes}
    for v in fa.verdicts:
        n = nodes.get(v.host)
        ranks = ", ".join(map(str, n.node.ranks)) if n else ", ".join(
            sorted({str(r) for f in v.findings for r in f.ranks}))
        status = {"pass": "pass", "fail": "fail", "incomplete": "warn"}.get(v.status, "")
        reasons = p.t("fleet.reasons", count=len(v.findings)) if v.findings else fmt.DASH
        rows.append((Cell(p.escape(v.host)), Cell(ranks),
                     Cell(p.t(f"fleet.verdict.{v.status}"), status=status, badge=True), Cell(reasons)))
    cols = (p.t("fleet.col.node"), p.t("node.col.ranks"), p.t("fleet.col.verdict"), p.t("fleet.col.reasons"))
    table = Table("verdicts", cols, (False, False, False, True), tuple(rows))
    if fa.drain:
        lines.append(Line(p.t("fleet.drain", hosts=p.escape(", ".join(v.host for v in fa.drain)),
                              count=len(fa.drain)), "fail"))
    else:
        lines.append(Line(p.t("fleet.all_pass"), "pass"))
    lines.append(Line(p.t(f"fleet.judged.{fa.source}", count=len(fa.applied))))
    if fa.not_applied:  # never a rule shown as held that was not applied
        lines.append(Line(not_applied_text(fa, p)))
    parts = []
    for v in fa.verdicts:
        if v.findings:
            parts.append(Part(f"verdict-{_slug(v.host)}", p.t("fleet.verdict.of", host=p.escape(v.host),
                                                              verdict=p.t(f"fleet.verdict.{v.status}")),
                              tuple(Line(finding_text(f, p), "fail" if f.fails or f.kind == "missing"
                                         else "warn") for f in v.findings)))
    return Section("verdicts", p.t("fleet.section.verdicts"), (*lines,), (Part("verdict-table", "", (), (table,)),
                                                                          *parts))


def _ranks_section(fa: af.FleetAnalysis, p: _P) -> Section:
    f = fa.fleet
    slow = {s.rank: s for s in fa.slow}
    lost = {x.rank: x for x in fa.lost}
    by_rank = {r.rank: r for r in f.ranks}
    rows = []
    for r in f.ranks:
        x = lost.get(r.rank)
        if x is None and r.rank not in slow:
            continue
        if x is None:
            label, status = p.t("fleet.rank.slow"), "warn"
        else:
            label, status = p.t(f"fleet.rank.{_rank_word(x)}"), "fail"
        rows.append((Cell(str(r.rank)), Cell(p.escape(r.host or "?")), Cell(_gpu(r.gpu)),
                     Cell(label, status=status, badge=True),
                     Cell(fmt.seconds(r.elapsed_s)), Cell(fmt.seconds(x.given_s if x is not None else r.given_s))))
    lines = [Line(p.t("fleet.ranks.summary", ok=f.world_size - len(fa.lost), count=f.world_size,
                      launcher=p.escape(f.launcher), nodes=p.t("fleet.count.nodes", count=f.nnodes)),
                  "pass" if not fa.lost else "fail")]
    if fa.interrupted:
        lines.append(Line(p.t("fleet.interrupted", signal=p.escape(_signal_name(f.settings.get("interrupted")))),
                          "fail"))
    for x in fa.lost:
        host = p.escape(x.host or (by_rank[x.rank].host if x.rank in by_rank else None) or "?")
        phase = p.t(f"fleet.phase.{x.phase}")
        word = _rank_word(x)
        if word == "error":
            lines.append(Line(p.t("fleet.rank.error.line", rank=fmt.num(x.rank), host=host, phase=phase,
                                  error=p.escape(fmt.first_line(x.error or ""))), "fail"))
        elif word == "timeout":
            lines.append(Line(p.t("fleet.rank.timeout.line", rank=fmt.num(x.rank), host=host, phase=phase,
                                  given=fmt.seconds(x.given_s)), "fail"))
        elif word == "missing":
            lines.append(Line(p.t("fleet.rank.missing.line", rank=fmt.num(x.rank), given=fmt.seconds(x.given_s)),
                              "fail"))
        else:
            lines.append(Line(p.t("fleet.rank.lost.line", rank=fmt.num(x.rank), host=host, phase=phase), "fail"))
    for s in fa.slow:
        lines.append(Line(p.t("fleet.rank.slow.line", rank=fmt.num(s.rank), host=p.escape(s.host or "?"),
                              elapsed=fmt.seconds(s.elapsed_s), median=fmt.seconds(s.others_median_s)), "warn"))
    tables = ()
    if rows:
        cols = (p.t("fleet.col.rank"), p.t("fleet.col.host"), p.t("node.col.gpu"), p.t("col.status"),
                p.t("fleet.col.elapsed"), p.t("fleet.col.given"))
        tables = (Table("ranks", cols, (True, False, False, False, True, True), tuple(rows)),)
    return Section("ranks", p.t("fleet.section.ranks"), tuple(lines), (Part("ranks-table", "", (), tables),)
                   if tables else ())


def _signal_name(value: object) -> str:
    """The signal that stopped the run, as recorded (``True`` from code that did not name it: Ctrl-C)."""
    return value if isinstance(value, str) else "SIGINT"


def _rank_word(x: af.LostRank) -> str:
    """How a lost rank is named: its own status, or ``lost`` for a worker of the collectives across
    nodes that went silent (its fleet rank had reported)."""
    if x.phase == "world" and x.status == "missing":
        return "lost"
    return x.status


def _rules_section(fa: af.FleetAnalysis, p: _P) -> Section:
    f = fa.fleet
    rows = tuple((Cell(p.escape(r.metric)), Cell(_rule_label(r, p)),
                  Cell(p.t(f"fleet.direction.{r.direction}")), Cell(fmt.ratio_pct(r.margin))) for r in fa.applied)
    cols = (p.t("fleet.col.rule"), p.t("fleet.col.means"), p.t("fleet.col.better"), p.t("fleet.col.margin"))
    lines = [Line(p.t("fleet.rules.default" if not f.rules else "fleet.rules.given"))]
    if f.baseline is not None:
        lines.append(Line(p.t("fleet.baseline", source=p.escape(f.baseline.source), host=p.escape(f.baseline.host or "?"),
                              created=p.escape(f.baseline.created or fmt.DASH))))
    else:
        lines.append(Line(p.t("fleet.no_baseline")))
    if fa.not_applied:
        lines.append(Line(not_applied_text(fa, p)))
    refs = tuple((Cell(metric_label(r.metric, p)), Cell(_value(r.metric, r.value)),
                  Cell(p.escape(r.algo)) if r.algo else DASH) for r in fa.references)
    ref_cols = (p.t("fleet.col.metric"), p.t(f"fleet.col.reference.{fa.source}"), p.t("node.col.algo"))
    tables = (Table("rules", cols, (False, False, False, True), rows, p.t("fleet.rules.title")),
              Table("references", ref_cols, (False, True, False), refs, p.t(f"fleet.references.{fa.source}")))
    return Section("rules", p.t("fleet.section.rules"), tuple(lines), (Part("rules-tables", "", (), tables),))


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text)[:40] or "x"


def fleet_view(report: Report, analysis: Analysis, lang: str, escape: Escape) -> FleetView:
    fa = analysis.fleet
    assert fa is not None
    f = fa.fleet
    p = _P(lang, escape)
    sections = [_verdict_section(fa, p), _ranks_section(fa, p)]
    if fa.sweeps:
        parts = []
        for i, sa in enumerate(fa.sweeps):
            parts.append(sweep_part(sa, p, f"world{i}", f"world{i}"))
        sections.append(Section("world", p.t("fleet.section.world"), (), tuple(parts)))
    for k, n in enumerate(fa.nodes):
        prefix = f"n{k}-"
        lines = [Line(p.t("fleet.node.ranks", ranks=", ".join(map(str, n.node.ranks)) or fmt.DASH,
                          verdict=p.t(f"fleet.verdict.{n.verdict.status}"), count=len(n.node.ranks)),
                      {"pass": "pass", "fail": "fail"}.get(n.verdict.status, "warn"))]
        failed = af.failed_checks(n.node)
        if failed:
            lines.append(Line(p.t("fleet.node.checks_failed", count=len(failed),
                                  checks=p.escape("; ".join(f"{c.title}: {c.finding}" for c in all_localized(failed, p.lang)))),
                              "fail"))
        if n.node.node is None:
            lines.append(Line(p.t("fleet.node.no_node_tests"), "warn"))
        elif n.verdict.status == "pass" or n.analysis.problems:
            lines += verdict_lines(n.analysis, p)
        else:
            # The node tests found nothing, but the node does not pass: the verdict's reasons say why,
            # not "nothing keeps this node from passing".
            lines += [Line(finding_text(x, p), "fail" if x.fails or x.kind == "missing" else "warn")
                      for x in n.verdict.findings]
        sections.append(Section(f"node-{_slug(n.node.host)}", p.t("fleet.section.node", host=p.escape(n.node.host)),
                                tuple(lines), node_parts(n.analysis, p, prefix, f"n{k}_"), n.verdict.status))
    sections.append(_rules_section(fa, p))
    drain = fa.drain
    tiles = [Tile(p.t("fleet.card.nodes"), p.t("fleet.card.nodes_value", ok=len(fa.verdicts) - len(drain),
                                              count=len(fa.verdicts)),
                  (p.t("fleet.card.drain", hosts=escape(", ".join(v.host for v in drain))),) if drain else (),
                  "fail" if drain else "pass"),
             Tile(p.t("fleet.card.ranks"), p.t("fleet.card.ranks_value", ok=f.world_size - len(fa.lost),
                                              count=f.world_size),
                  (p.t("fleet.card.slow", count=len(fa.slow)),) if fa.slow else (),
                  "fail" if fa.lost else None)]
    for sa in fa.sweeps:
        ok = [r for r in sa.rows if r.busbw_gbps is not None and r.status == "ok"]
        if ok:
            r = max(ok, key=lambda x: x.size_bytes)
            lines_ = (p.t("fleet.card.world_line", op=escape(r.op), size=fmt.size_bytes(r.size_bytes)),)
            text = conclusion_text(sa, p)
            tiles.append(Tile(p.t("fleet.card.world"), f"{fmt.num(r.busbw_gbps)} GB/s",
                              lines_ + ((text,) if text else ()),
                              "fail" if sa.conclusion is not None and sa.conclusion.located else None))
            break
    return FleetView(
        lang=lang,
        title=p.t("fleet.title", nodes=p.t("fleet.count.nodes", count=f.nnodes),
                  ranks=p.t("fleet.count.ranks", count=f.world_size), date=escape(report.created[:10])),
        subtitle=p.t("report.subtitle", kind=p.t("kind.fleet"), created=escape(report.created),
                     version=escape(report.tool_version)),
        machine=p.t("fleet.machine", launcher=escape(f.launcher), took=fmt.seconds(f.duration_s),
                    hosts=escape(", ".join(n.node.host for n in fa.nodes))),
        tiles=tuple(tiles), sections=tuple(sections),
        footer=p.t("report.footer", version=escape(report.tool_version), schema=report.schema_version),
    )


__all__ = ["FleetView", "fleet_view"]
