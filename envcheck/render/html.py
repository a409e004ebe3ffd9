"""The HTML report: one self-contained file (inline CSS, inline SVG charts, no scripts, no URLs)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from envcheck.model import Report
from envcheck.render import charts as ch
from envcheck.render import context
from envcheck.render.jinja import environment


def _same(text: str) -> str:
    # HTML autoescaping covers every phrased sentence whole; escaping the parameters too would double it.
    return text


_ID_REF = re.compile(r'(\bid="|href="#|url\(#)([^")]+)')


def scope_ids(svg: str, prefix: str) -> str:
    """Prefix every id in one SVG (and the references to them) with ``prefix``.

    matplotlib names glyphs, markers and clip paths the same way in every figure
    (``DejaVuSans-30``); several charts inlined in one page would repeat those ids,
    which HTML forbids and which makes each ``<use>`` resolve to the first chart's copy.
    """
    return _ID_REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", svg)


def render_html(report: Report, lang: str = "en", charts: Sequence[ch.Chart] | None = None) -> str:
    """The HTML text. ``charts``: already drawn charts to inline (drawn here when not given)."""
    if charts is None:
        charts = ch.draw_all(report, lang) if report.bench else []
    by_op: dict[str | None, list[ch.Chart]] = {}
    for c in charts:
        by_op.setdefault(c.plan.op, []).append(dataclasses.replace(c, svg=scope_ids(c.svg, c.plan.name)))
    ctx = context.build(report, lang, _same)
    ctx["charts_by_op"] = by_op
    # Charts carry their own titles; a caption repeats it only when the chart text had to stay English.
    ctx["chart_captions"] = ch.CHART_LANG.get(lang, "en") != lang
    return environment().get_template("report.html.j2").render(ctx)
