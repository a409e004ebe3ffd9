"""What a fleet report shows, for every medium: the verdicts with their reasons, the ranks lost or slow, the
world collectives, each node as a node report shows it (``render.node_view``'s blocks), the rules and baseline."""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.analysis import Analysis
from envcheck.analysis import fleet as af
from envcheck.model import Report
from envcheck.model.fleet import Rule
from envcheck.render import fmt
from envcheck.render import node_view as nv
from envcheck.render.checktext import all_localized
from envcheck.render.i18n import esc, has, join, phrase, t, word
from envcheck.render.view import footer, subtitle


@dataclass(frozen=True)
class FleetView:
    title: str
    subtitle: str
    machine: str
    tiles: tuple[nv.Tile, ...]
    sections: tuple[nv.Section, ...]
    footer: str


def metric_label(name: str | None) -> str:
    if name is None:
        return fmt.DASH
    m = af.describe_metric(name)
    params = dict(m.params)
    raw = {}
    if "size_bytes" in params:
        raw["size"] = fmt.size_bytes(int(params["size_bytes"]))
    if "kind" in params:
        raw["kind"] = word("node.copy.kind.", params["kind"])
    key = f"fleet.metric.{m.key}" + (".sized" if m.key == "busbw" and "size_bytes" in params else "")
    return phrase(key, params, raw)


def _value(name: str | None, v: float | None) -> str:
    if v is None:
        return fmt.DASH
    unit = af.describe_metric(name).unit if name else ""
    if not unit and float(v).is_integer():
        return str(int(v))  # a count: wrong elements, failed checks
    return f"{fmt.num(v)} {unit}".rstrip()


def finding_text(f: af.Finding) -> str:
    if f.kind == "missing":
        # Why a metric has no value: the fleet's words for it, else a node test's error or skip reason.
        reason = t(f"fleet.missing.{f.reason}") if has(f"fleet.missing.{f.reason}") else nv.cause(f.reason)
    else:
        reason = esc(f.reason or "")  # algorithm_differs: the two NCCL algorithm/protocol names
    raw = {"metric": metric_label(f.metric), "value": _value(f.metric, f.value),
           "reference": _value(f.metric, f.reference), "source": word("fleet.source.", f.source),
           "margin": fmt.ratio_pct(f.margin), "shortfall": fmt.ratio_pct(f.shortfall),
           "ranks": ", ".join(map(str, f.ranks)), "direction": word("fleet.direction.", f.direction),
           "reason": reason, "phase": t(f"fleet.phase.{f.reason or 'suite'}") if f.kind == "rank_failed" else ""}
    key = f"fleet.finding.{f.kind}"
    if f.kind == "worse" and f.shortfall is None:
        key += ".from_zero"
    if f.kind == "missing" and f.reference is not None:
        key += ".with_reference"
    return phrase(key, {"count": len(f.ranks)}, raw)


def finding_line(f: af.Finding) -> nv.Line:
    return nv.Line(finding_text(f), "fail" if f.fails or f.kind == "missing" else "warn")


def _rule_label(r: Rule) -> str:
    """What a rule's metric stands for, or the prefix of the metrics it covers."""
    if af.describe_metric(r.metric).key != "other":
        return metric_label(r.metric)
    return t("fleet.rule.prefix", prefix=esc(r.metric))


def _not_applied(fa: af.FleetAnalysis) -> list[nv.Line]:
    """The rules of a CPU fleet no node was held to, each with why: never a rule shown as held that was not applied."""
    return [nv.Line(t("fleet.not_applied", rules=join([
        t("fleet.not_applied.item", rule=_rule_label(x.rule), reason=t(f"fleet.not_applied.{x.reason}"))
        for x in fa.not_applied])))] if fa.not_applied else []


def _verdict_section(fa: af.FleetAnalysis) -> nv.Section:
    rows = []
    nodes = {n.node.host: n for n in fa.nodes}
    for v in fa.verdicts:
        n = nodes.get(v.host)
        ranks = ", ".join(map(str, n.node.ranks)) if n else ", ".join(
            sorted({str(r) for f in v.findings for r in f.ranks}))
        status = {"pass": "pass", "fail": "fail", "incomplete": "warn"}.get(v.status, "")
        reasons = t("fleet.reasons", count=len(v.findings)) if v.findings else fmt.DASH
        rows.append((nv.Cell(esc(v.host)), nv.Cell(ranks),
                     nv.Cell(t(f"fleet.verdict.{v.status}"), status=status, badge=True), nv.Cell(reasons)))
    table = nv.Table("verdicts", *nv.heads("fleet.col.node", "node.col.ranks", "fleet.col.verdict",
                                           ">fleet.col.reasons"), tuple(rows))
    lines = [nv.Line(t("fleet.drain", hosts=esc(", ".join(v.host for v in fa.drain)), count=len(fa.drain)), "fail")
             if fa.drain else nv.Line(t("fleet.all_pass"), "pass"),
             nv.Line(t(f"fleet.judged.{fa.source}", count=len(fa.applied))), *_not_applied(fa)]
    parts = [nv.Part(f"verdict-{_slug(v.host)}", t("fleet.verdict.of", host=esc(v.host),
                                                   verdict=t(f"fleet.verdict.{v.status}")),
                     tuple(finding_line(f) for f in v.findings))
             for v in fa.verdicts if v.findings]
    return nv.Section("verdicts", t("fleet.section.verdicts"), tuple(lines),
                      (nv.Part("verdict-table", "", (), (table,)), *parts))


def _ranks_section(fa: af.FleetAnalysis) -> nv.Section:
    f = fa.fleet
    slow = {s.rank: s for s in fa.slow}
    lost = {x.rank: x for x in fa.lost}
    by_rank = {r.rank: r for r in f.ranks}
    rows = []
    for r in f.ranks:
        x = lost.get(r.rank)
        if x is None and r.rank not in slow:
            continue
        label, status = (t("fleet.rank.slow"), "warn") if x is None else (t(f"fleet.rank.{_rank_word(x)}"), "fail")
        rows.append((nv.Cell(str(r.rank)), nv.Cell(esc(r.host or "?")), nv.Cell(nv.gpu_label(r.gpu)),
                     nv.Cell(label, status=status, badge=True),
                     nv.Cell(fmt.seconds(r.elapsed_s)),
                     nv.Cell(fmt.seconds(x.given_s if x is not None else r.given_s))))
    lines = [nv.Line(t("fleet.ranks.summary", ok=f.world_size - len(fa.lost), count=f.world_size,
                         launcher=esc(f.launcher), nodes=t("fleet.count.nodes", count=f.nnodes)),
                     "pass" if not fa.lost else "fail")]
    if fa.interrupted:
        signal = f.settings.get("interrupted")  # True from code that did not name it: Ctrl-C
        lines.append(nv.Line(t("fleet.interrupted", signal=esc(signal if isinstance(signal, str) else "SIGINT")),
                             "fail"))
    lines += [nv.Line(t(f"fleet.rank.{_rank_word(x)}.line", rank=fmt.num(x.rank), phase=t(f"fleet.phase.{x.phase}"),
                        host=esc(x.host or (by_rank[x.rank].host if x.rank in by_rank else None) or "?"),
                        error=esc(fmt.first_line(x.error or "")), given=fmt.seconds(x.given_s)), "fail")
              for x in fa.lost]
    lines += [nv.Line(t("fleet.rank.slow.line", rank=fmt.num(s.rank), host=esc(s.host or "?"),
                        elapsed=fmt.seconds(s.elapsed_s), median=fmt.seconds(s.others_median_s)), "warn")
              for s in fa.slow]
    table = nv.Table("ranks", *nv.heads(">fleet.col.rank", "fleet.col.host", "node.col.gpu", "col.status",
                                        ">fleet.col.elapsed", ">fleet.col.given"), tuple(rows))
    return nv.Section("ranks", t("fleet.section.ranks"), tuple(lines), (nv.Part("ranks-table", "", (), (table,)),)
                      if rows else ())


def _rank_word(x: af.LostRank) -> str:
    """A lost rank's status, or ``lost``: a world collective's worker went silent after its rank had reported."""
    return "lost" if x.phase == "world" and x.status == "missing" else x.status


def _rules_section(fa: af.FleetAnalysis) -> nv.Section:
    f = fa.fleet
    rows = tuple((nv.Cell(esc(r.metric)), nv.Cell(_rule_label(r)),
                  nv.Cell(t(f"fleet.direction.{r.direction}")), nv.Cell(fmt.ratio_pct(r.margin))) for r in fa.applied)
    lines = [nv.Line(t("fleet.rules.given") if f.rules else t("fleet.rules.default"))]
    lines.append(nv.Line(t("fleet.baseline", source=esc(f.baseline.source), host=esc(f.baseline.host or "?"),
                           created=esc(f.baseline.created or fmt.DASH)) if f.baseline is not None
                         else t("fleet.no_baseline")))
    lines += _not_applied(fa)
    refs = tuple((nv.Cell(metric_label(r.metric)), nv.Cell(_value(r.metric, r.value)),
                  nv.Cell(esc(r.algo)) if r.algo else nv.DASH) for r in fa.references)
    tables = (nv.Table("rules", *nv.heads("fleet.col.rule", "fleet.col.means", "fleet.col.better",
                                          ">fleet.col.margin"), rows, t("fleet.rules.title")),
              nv.Table("references", *nv.heads("fleet.col.metric", f">fleet.col.reference.{fa.source}",
                                               "node.col.algo"), refs, t(f"fleet.references.{fa.source}")))
    return nv.Section("rules", t("fleet.section.rules"), tuple(lines), (nv.Part("rules-tables", "", (), tables),))


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text)[:40] or "x"


def fleet_view(report: Report, analysis: Analysis) -> FleetView:
    fa = analysis.fleet
    assert fa is not None
    f = fa.fleet
    sections = [_verdict_section(fa), _ranks_section(fa)]
    if fa.sweeps:
        sections.append(nv.Section("world", t("fleet.section.world"), (), tuple(
            nv.sweep_part(sa, f"world{i}", f"world{i}") for i, sa in enumerate(fa.sweeps))))
    for k, n in enumerate(fa.nodes):
        lines = [nv.Line(t("fleet.node.ranks", ranks=", ".join(map(str, n.node.ranks)) or fmt.DASH,
                             verdict=t(f"fleet.verdict.{n.verdict.status}"), count=len(n.node.ranks)),
                         {"pass": "pass", "fail": "fail"}.get(n.verdict.status, "warn"))]
        if failed := af.failed_checks(n.node):
            lines.append(nv.Line(t("fleet.node.checks_failed", count=len(failed),
                                     checks=esc("; ".join(f"{c.title}: {c.finding}" for c in all_localized(failed)))),
                                 "fail"))
        if n.node.node is None:
            lines.append(nv.Line(t("fleet.node.no_node_tests"), "warn"))
        elif n.verdict.status == "pass" or n.analysis.problems:
            lines += nv.verdict_lines(n.analysis)
        else:
            # The node tests found nothing, but the node does not pass: the verdict's reasons say why,
            # not "nothing keeps this node from passing".
            lines += [finding_line(x) for x in n.verdict.findings]
        sections.append(nv.Section(f"node-{_slug(n.node.host)}", t("fleet.section.node", host=esc(n.node.host)),
                                   tuple(lines), nv.node_parts(n.analysis, f"n{k}-", f"n{k}_"), n.verdict.status))
    sections.append(_rules_section(fa))
    drain = fa.drain
    tiles = [nv.Tile(t("fleet.card.nodes"), t("fleet.card.nodes_value", ok=len(fa.verdicts) - len(drain),
                                                 count=len(fa.verdicts)),
                     (t("fleet.card.drain", hosts=esc(", ".join(v.host for v in drain))),) if drain else (),
                     "fail" if drain else "pass"),
             nv.Tile(t("fleet.card.ranks"), t("fleet.card.ranks_value", ok=f.world_size - len(fa.lost),
                                                 count=f.world_size),
                     (t("fleet.card.slow", count=len(fa.slow)),) if fa.slow else (),
                     "fail" if fa.lost else None)]
    for sa in fa.sweeps:
        if (top := sa.largest()) is not None:
            r = top[0]
            lines_ = (t("fleet.card.world_line", op=esc(r.op), size=fmt.size_bytes(r.size_bytes)),)
            text = nv.conclusion_text(sa)
            tiles.append(nv.Tile(t("fleet.card.world"), f"{fmt.num(r.busbw_gbps)} GB/s",
                                 lines_ + ((text,) if text else ()),
                                 "fail" if sa.conclusion is not None and sa.conclusion.located else None))
            break
    return FleetView(
        title=t("fleet.title", nodes=t("fleet.count.nodes", count=f.nnodes),
                  ranks=t("fleet.count.ranks", count=f.world_size), date=esc(report.created[:10])),
        subtitle=subtitle(report),
        machine=t("fleet.machine", launcher=esc(f.launcher), took=fmt.seconds(f.duration_s),
                    hosts=esc(", ".join(n.node.host for n in fa.nodes))),
        tiles=tuple(tiles), sections=tuple(sections),
        footer=footer(report),
    )

