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
from envcheck.render import charts as ch
from envcheck.render import compare_view as cv
from envcheck.render.escape import md_text
from envcheck.render.jinja import render
from envcheck.render.view import run_view

FORMATS: tuple[str, ...] = ("md", "html")


def _same(text: str) -> str:
    # HTML autoescaping covers each phrased sentence whole; escaping its parameters too would double it.
    return text


@dataclass(frozen=True)
class ChartLink:
    """A chart as the Markdown shows it: its title and the relative path of its SVG file."""

    title: str
    path: str


def report_charts(analysis: Analysis, lang: str) -> list[ch.Drawn]:
    return ch.run_charts(analysis.bench, lang) if analysis.bench else []


def render_markdown(report: Report, lang: str = "en", charts_dir: str = "charts",
                    analysis: Analysis | None = None, charts: Sequence[ch.Drawn] | None = None) -> str:
    """The Markdown text; charts are linked as ``<charts_dir>/<name>.svg`` (written beside it by ``writing``)."""
    analysis = analysis or analyse(report)
    drawn = report_charts(analysis, lang) if charts is None else charts
    links: dict[str | None, list[ChartLink]] = {}
    for c in drawn:
        links.setdefault(c.op, []).append(ChartLink(c.title, f"{charts_dir}/{c.name}.svg"))
    v = run_view(report, analysis, lang, md_text)
    return render("report.md.j2", lang=lang, v=v, b=v.bench, charts=links)


def render_html(report: Report, lang: str = "en", analysis: Analysis | None = None,
                charts: Sequence[ch.Drawn] | None = None) -> str:
    """The HTML text, charts inlined as SVG."""
    analysis = analysis or analyse(report)
    drawn = report_charts(analysis, lang) if charts is None else charts
    by_op: dict[str | None, list[ch.Drawn]] = {}
    for c in drawn:
        by_op.setdefault(c.op, []).append(c)
    v = run_view(report, analysis, lang, _same)
    return render("report.html.j2", lang=lang, v=v, b=v.bench, charts=by_op)


def render_diff(d: Any, fmt: str, lang: str = "en") -> str:
    """A diff (``compare.diff.Diff``) as ``md`` or ``html`` text; the HTML has one ratio chart per comparison."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown document format {fmt!r}")
    view = cv.diff_view(d, lang, md_text if fmt == "md" else _same)
    charts = [ch.ratio_chart(c, lang) if fmt == "html" else None for c in d.comparisons]
    return render(f"diff.{fmt}.j2", lang=lang, v=view, charts=charts)


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
        return "\n".join(render("history.md.j2", lang=lang, v=cv.history_view(h, lang, md_text), chart=None)
                         for h in hs)
    machines = [{"v": cv.history_view(h, lang, _same), "chart": ch.history_chart(h, lang)} for h in hs]
    return render("history.html.j2", lang=lang, machines=machines)
