"""Markdown and self-contained HTML of a run report, a diff and a history: text, nothing written.

Each is a pure function of its input (a report and its analysis, or a comparison's data) and the
language: the same input gives the same bytes anywhere. Writing files is ``render.writing``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.analysis import Analysis, analyse
from envcheck.model import Report
from envcheck.render import FORMATS
from envcheck.render import charts as ch
from envcheck.render import compare_view as cv
from envcheck.render.code_spans import code_spans
from envcheck.render.escape import md_text
from envcheck.render.fleet_view import fleet_view
from envcheck.render.jinja import render
from envcheck.render.toc import html_toc as _toc
from envcheck.render.toc import markdown_toc
from envcheck.render.view import run_view


def html_toc(page: str, lang: str) -> str:
    """The finished HTML page: its table of contents, and the catalogue's `code` spans shown as code."""
    return code_spans(_toc(page, lang))


def _same(text: str) -> str:
    # HTML autoescaping covers each phrased sentence whole; escaping its parameters too would double it.
    return text


@dataclass(frozen=True)
class ChartLink:
    """A chart as the Markdown shows it: its title and the relative path of its SVG file."""

    title: str
    path: str


def report_charts(analysis: Analysis, lang: str) -> list[ch.Drawn]:
    """Every chart of a report, in reading order: each GPU's run charts (named by GPU on a node run), then
    a busbw chart per op of every collective sweep (a node's, a fleet's world and its nodes')."""
    from envcheck.render.node_view import sweep_sections
    from envcheck.render.view import bench_prefix

    out: list[ch.Drawn] = []
    for i, ba in enumerate(analysis.benches):
        out += ch.run_charts(ba, lang, bench_prefix(analysis, i))
    for section, sa in sweep_sections(analysis):
        out += [d for op in sa.ops if (d := ch.busbw_chart(sa, op, section, lang)) is not None]
    if analysis.burn is not None:
        from envcheck.render.burn_charts import burn_charts

        out += burn_charts(analysis.burn, lang)
    return out


def _burn(analysis: Analysis, lang: str, escape: Any) -> Any:
    """The burn section's view, or None (a report without a burn)."""
    if analysis.burn is None:
        return None
    from envcheck.render.burn_view import burn_view

    return burn_view(analysis.burn, lang, escape)


def _crosscheck(analysis: Analysis, lang: str, escape: Any) -> Any:
    """The cross-check section's view, or None (a run without ``--crosscheck``)."""
    if analysis.crosscheck is None:
        return None
    from envcheck.render.crosscheck_view import crosscheck_view

    return crosscheck_view(analysis.crosscheck, lang, escape)


def _fleet_crosschecks(analysis: Analysis, lang: str, escape: Any) -> list[tuple[str, Any]]:
    """Each fleet node's cross-check section: (its host, escaped; its view)."""
    from envcheck.render.crosscheck_view import crosscheck_view

    return [(escape(host), crosscheck_view(cross, lang, escape)) for host, cross in analysis.fleet_crosschecks]


def _burn_page(report: Report, analysis: Analysis, lang: str, escape: Any) -> dict[str, Any]:
    """What burn.md.j2 / burn.html.j2 read besides the charts: a burn report's header and footer."""
    from envcheck.render.i18n import translate

    names = [g.device.name for g in report.burn.gpus if g.device] if report.burn else []
    return {"title": translate(lang, "burn.title", gpu=escape(names[0]) if names else translate(lang, "no_gpu"),
                               host=escape(report.host), date=escape(report.created[:10])),
            "subtitle": translate(lang, "report.subtitle", kind=translate(lang, "kind.burn"),
                                  created=escape(report.created), version=escape(report.tool_version)),
            "footer": translate(lang, "report.footer", version=escape(report.tool_version),
                                schema=report.schema_version),
            "burn": _burn(analysis, lang, escape)}


def _by_place(items: Sequence[ch.Drawn], make: Any = None) -> dict[tuple[str, str | None], list[Any]]:
    """Charts by where a document places them: (section, op); ``make`` turns each into what the medium shows."""
    out: dict[tuple[str, str | None], list[Any]] = {}
    for c in items:
        out.setdefault((c.section, c.op), []).append(make(c) if make else c)
    return out


def render_markdown(report: Report, lang: str = "en", charts_dir: str = "charts",
                    analysis: Analysis | None = None, charts: Sequence[ch.Drawn] | None = None) -> str:
    """The Markdown text; charts are linked as ``<charts_dir>/<name>.svg`` (written beside it by ``writing``),
    URL-encoded: a report's file name with a space, ``)`` or ``"`` neither breaks an image nor adds markup."""
    from urllib.parse import quote

    analysis = analysis or analyse(report)
    drawn = report_charts(analysis, lang) if charts is None else charts
    links = _by_place(drawn, lambda c: ChartLink(
        c.title, quote(f"{charts_dir}/{c.name}.svg", errors="surrogateescape")))
    if report.fleet is not None:
        return markdown_toc(render("fleet.md.j2", lang=lang, v=fleet_view(report, analysis, lang, md_text),
                                   charts=links, crosschecks=_fleet_crosschecks(analysis, lang, md_text)), lang)
    if report.kind == "burn":
        return markdown_toc(render("burn.md.j2", lang=lang, charts=links, **_burn_page(report, analysis, lang, md_text)),
                            lang)
    v = run_view(report, analysis, lang, md_text)
    return markdown_toc(render("report.md.j2", lang=lang, v=v, b=v.bench, charts=links,
                               burn=_burn(analysis, lang, md_text),
                               crosscheck=_crosscheck(analysis, lang, md_text)), lang)


def render_html(report: Report, lang: str = "en", analysis: Analysis | None = None,
                charts: Sequence[ch.Drawn] | None = None) -> str:
    """The HTML text, charts inlined as SVG."""
    analysis = analysis or analyse(report)
    drawn = report_charts(analysis, lang) if charts is None else charts
    by_place = _by_place(drawn)
    if report.fleet is not None:
        return html_toc(render("fleet.html.j2", lang=lang, v=fleet_view(report, analysis, lang, _same),
                               charts=by_place, crosschecks=_fleet_crosschecks(analysis, lang, _same)), lang)
    if report.kind == "burn":
        return html_toc(render("burn.html.j2", lang=lang, charts=by_place, **_burn_page(report, analysis, lang, _same)),
                        lang)
    v = run_view(report, analysis, lang, _same)
    return html_toc(render("report.html.j2", lang=lang, v=v, b=v.bench, charts=by_place,
                           burn=_burn(analysis, lang, _same), crosscheck=_crosscheck(analysis, lang, _same)), lang)


def render_diff(d: Any, fmt: str, lang: str = "en") -> str:
    """A diff (``compare.diff.Diff``) as ``md`` or ``html`` text; the HTML has one ratio chart per comparison."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown document format {fmt!r}")
    view = cv.diff_view(d, lang, md_text if fmt == "md" else _same)
    charts = [ch.ratio_chart(c, lang, d.practical_pct) if fmt == "html" else None for c in d.comparisons]
    return _with_toc(render(f"diff.{fmt}.j2", lang=lang, v=view, charts=charts), fmt, lang)


def render_history(h: Any, fmt: str, lang: str = "en") -> str:
    """A history (``compare.history.History``) as ``md`` or ``html`` text; the HTML has the trend chart."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown document format {fmt!r}")
    return render_histories([h], fmt, lang)


def render_histories(hs: Any, fmt: str, lang: str = "en") -> str:
    """Several machines' histories (``compare.history.History`` each) as one ``md`` or ``html``
    document: a section per machine."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown document format {fmt!r}")
    if fmt == "md":
        return markdown_toc("\n".join(render("history.md.j2", lang=lang, v=cv.history_view(h, lang, md_text),
                                             chart=None) for h in hs), lang)
    machines = [{"v": cv.history_view(h, lang, _same), "chart": ch.history_chart(h, lang)} for h in hs]
    return html_toc(render("history.html.j2", lang=lang, machines=machines), lang)


def _with_toc(text: str, fmt: str, lang: str) -> str:
    return markdown_toc(text, lang) if fmt == "md" else html_toc(text, lang)
