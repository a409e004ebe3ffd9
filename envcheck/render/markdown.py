"""The Markdown report: reads well on a code host, charts linked as SVG files beside it."""

from __future__ import annotations

from envcheck.model import Report
from envcheck.render import charts as ch
from envcheck.render import context
from envcheck.render.jinja import environment, md


def chart_links(report: Report, lang: str, charts_dir: str) -> dict[str | None, list[dict[str, str]]]:
    """Charts grouped by op (None: whole run), each with its title and relative link."""
    out: dict[str | None, list[dict[str, str]]] = {}
    for p in ch.plan(report):
        title = context.View(lang, md).t(f"chart.title.{p.kind}", op=md(p.op or ""))
        out.setdefault(p.op, []).append({"title": title, "path": f"{charts_dir}/{p.name}.svg"})
    return out


def render_markdown(report: Report, lang: str = "en", charts_dir: str = "charts") -> str:
    """The Markdown text; charts are referenced as ``<charts_dir>/<name>.svg`` (written by write_documents).

    ``charts_dir`` is a relative URL path, so the report and its chart folder can move together.
    """
    ctx = context.build(report, lang, md)
    ctx["charts_by_op"] = chart_links(report, lang, charts_dir) if report.bench else {}
    return environment().get_template("report.md.j2").render(ctx)
