"""Markdown and self-contained HTML of a report, a diff and a history: text, the same bytes for the same input. A
table of contents before a long document's first section is read from its own headings (HTML section ids, GitHub's
Markdown slugs), so every document gets one without its template knowing."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, NamedTuple

from envcheck.analysis import Analysis
from envcheck.model import Report
from envcheck.render import FORMATS
from envcheck.render import charts as ch
from envcheck.render.escape import code_spans, md_text
from envcheck.render.i18n import escaping, t
from envcheck.render.jinja import render

if TYPE_CHECKING:
    from envcheck.compare.diff import Diff
    from envcheck.compare.history import History

MIN_SECTIONS = 3
# A top-level section: <section id=...><h2>, or a heading that carries its own id (<h2 id=...>, <h3 id=...>).
_HTML_HEADING = re.compile(r'<section id="([^"]+)"[^>]*>\s*<h(2)[^>]*>(.*?)</h2>|<h([23]) id="([^"]+)"[^>]*>(.*?)</h\4>',
                           re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_BADGE = re.compile(r'<span class="badge[^"]*">.*?</span>', re.DOTALL)  # a status beside a heading: not its name
_MD_HEADING = re.compile(r"^(##|###) (.*\S)", re.MULTILINE)
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>])")


def _outline(found: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """The level-2 entries; the level-3 ones too where there are too few of those (a diff of two reports)."""
    top = [f for f in found if f[0] == 2]
    return top if len(top) >= MIN_SECTIONS else found


def html_toc(page: str) -> str:
    """``page`` with a ``<nav class="toc">`` before its first section."""
    found = [(2, m[0], m[2]) if m[0] else (int(m[3]), m[4], m[5]) for m in _HTML_HEADING.findall(page)]
    entries = _outline(found)
    if len(entries) < MIN_SECTIONS:
        return page
    title = html.escape(t("toc.title"))
    items = "".join(f'<li class="toc-{level}"><a href="#{sid}">{_TAG.sub("", _BADGE.sub("", text)).strip()}</a></li>'
                    for level, sid, text in entries)
    nav = f'<nav class="toc" aria-label="{title}"><div class="label">{title}</div><ol>{items}</ol></nav>\n'
    first = _HTML_HEADING.search(page)
    assert first is not None  # entries were found
    at = page.rfind("<section ", 0, first.start() + 1)
    at = first.start() if at < 0 or "</section>" in page[at:first.start()] else at
    return page[:at] + nav + page[at:]


def slug(heading: str, seen: dict[str, int]) -> str:
    """GitHub's anchor for a Markdown heading (lower case, punctuation dropped, spaces to hyphens; a
    repeated heading gets ``-1``, ``-2``), from the heading as written (escapes and links undone)."""
    text = _MD_ESCAPE.sub(r"\1", heading)
    text = re.sub(r"\[([^][]*)\]\([^()]*\)", r"\1", text).replace("`", "").replace("*", "")
    base = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


def markdown_toc(doc: str) -> str:
    """``doc`` with a linked list of its sections before the first of them."""
    # Headings inside fenced code are not headings.
    fences = [m.span() for m in re.finditer(r"^```.*?^```", doc, re.MULTILINE | re.DOTALL)]
    found = [m for m in _MD_HEADING.finditer(doc) if not any(a <= m.start() < b for a, b in fences)]
    seen: dict[str, int] = {}
    anchors = {m.start(): slug(m.group(2), seen) for m in found}  # every heading counts for GitHub's numbering
    entries = _outline([(len(m.group(1)), str(m.start()), m.group(2)) for m in found])
    if len(entries) < MIN_SECTIONS:
        return doc
    lines = [f"**{t('toc.title')}**", ""]
    lines += [f"{'  ' * (level - 2)}- [{text}](#{anchors[int(at)]})" for level, at, text in entries]
    at = found[0].start()
    return doc[:at] + "\n".join(lines) + "\n\n" + doc[at:]


class ChartLink(NamedTuple):
    """A chart as the Markdown shows it: its title and the relative path of its SVG file."""

    title: str
    path: str


Placed = dict[tuple[str, str | None], list[ch.Drawn | ChartLink]]  # charts by (section, op)


def report_charts(analysis: Analysis) -> list[ch.Drawn]:
    """Every chart of a report, in reading order: each GPU's run charts, then a busbw chart per op of every
    collective sweep (a node's, a fleet's world and its nodes'), then the burn's."""
    from envcheck.render.node_view import sweep_sections
    from envcheck.render.view import bench_prefix

    out: list[ch.Drawn] = []
    for i, ba in enumerate(analysis.benches):
        out += ch.run_charts(ba, bench_prefix(analysis, i))
    for section, sa in sweep_sections(analysis):
        out += [d for op in sa.ops if (d := ch.busbw_chart(sa, op, section)) is not None]
    if analysis.burn is not None:
        from envcheck.render.burn_charts import burn_charts

        out += burn_charts(analysis.burn)
    return out


def _medium(fmt: str) -> AbstractContextManager[None]:
    # HTML autoescaping covers each sentence whole: escaping its parameters too would double it.
    return escaping(md_text if fmt == "md" else str)


def _page(report: Report, analysis: Analysis, fmt: str, charts: Placed) -> str:
    with _medium(fmt):
        context: dict[str, object] = {"report": report, "a": analysis, "charts": charts}
        if report.fleet is not None:
            from envcheck.render.fleet_view import fleet_view

            return render(f"fleet.{fmt}.j2", page=fleet_view(report, analysis), **context)
        if report.kind == "burn":
            return render(f"burn.{fmt}.j2", **context)
        from envcheck.render.node_view import node_section, node_tiles

        node = analysis.node
        return render(f"report.{fmt}.j2", ba=analysis.bench, several=node is not None or len(analysis.benches) > 1,
                      verdict=report.verdict if report.checks else None, node=node and node_section(node),
                      node_tiles=node and node_tiles(node), **context)


def _by_place(items: Sequence[ch.Drawn], make: Callable[[ch.Drawn], ch.Drawn | ChartLink] | None = None) -> Placed:
    """Charts by where a document places them: (section, op); ``make`` turns each into what the medium shows."""
    out: Placed = {}
    for c in items:
        out.setdefault((c.section, c.op), []).append(make(c) if make else c)
    return out


def render_markdown(report: Report, analysis: Analysis, charts_dir: str = "charts",
                    charts: Sequence[ch.Drawn] | None = None) -> str:
    """The Markdown text; charts are linked as ``<charts_dir>/<name>.svg`` (written beside it by ``writing``),
    URL-encoded: a report's file name with a space, ``)`` or ``"`` neither breaks an image nor adds markup."""
    from urllib.parse import quote

    drawn = report_charts(analysis) if charts is None else charts
    links = _by_place(drawn, lambda c: ChartLink(c.title, quote(f"{charts_dir}/{c.name}.svg", errors="surrogateescape")))
    return markdown_toc(_page(report, analysis, "md", links))


def render_html(report: Report, analysis: Analysis, charts: Sequence[ch.Drawn] | None = None) -> str:
    """The HTML text, charts inlined as SVG."""
    drawn = report_charts(analysis) if charts is None else charts
    return code_spans(html_toc(_page(report, analysis, "html", _by_place(drawn))))


def _check(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown document format {fmt!r}")


def render_diff(d: Diff, fmt: str) -> str:
    """A diff (``compare.diff.Diff``) as ``md`` or ``html`` text; the HTML has one ratio chart per comparison."""
    _check(fmt)
    with _medium(fmt):
        charts = [ch.ratio_chart(c, d.practical_pct) if fmt == "html" else None for c in d.comparisons]
        text = render(f"diff.{fmt}.j2", d=d, charts=charts)
    return markdown_toc(text) if fmt == "md" else code_spans(html_toc(text))


def render_histories(hs: Sequence[History], fmt: str) -> str:
    """Machines' histories (``compare.history.History`` each) as one ``md`` or ``html`` document, a section each."""
    _check(fmt)
    with _medium(fmt):
        if fmt == "md":
            return markdown_toc("\n".join(render("history.md.j2", h=h) for h in hs))
        return code_spans(html_toc(render("history.html.j2", machines=[(h, ch.history_chart(h)) for h in hs])))
