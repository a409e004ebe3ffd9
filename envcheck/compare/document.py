"""Markdown and self-contained HTML documents of a diff or a history.

Rendered with the shared Jinja environment (``envcheck.render.jinja``): HTML
templates extend ``base.html.j2`` and are autoescaped, Markdown templates pass
every machine string through the ``md`` filter. ``t`` in these templates is the
comparison catalogue (``render/catalog_compare``), bound to the language.
"""

from __future__ import annotations

from typing import Any

from envcheck.compare import i18n
from envcheck.compare.diff import Diff
from envcheck.compare.history import History

FORMATS = ("md", "html")


def _context(lang: str) -> dict[str, Any]:
    t = i18n.translator(lang)
    return {
        "lang": lang,
        "t": t,
        "ratio": i18n.ratio,
        "g": i18n.general,
        "interval": i18n.interval,
        "numeric_label": lambda c: i18n.numeric_label(c, t),
        "step_sentence": lambda s: i18n.step_sentence(s, t),
    }


def _render(name: str, lang: str, **data: Any) -> str:
    from envcheck.render.jinja import environment

    return environment().get_template(name).render(**_context(lang), **data)


def render_diff(d: Diff, fmt: str, lang: str = "en") -> str:
    """The diff as ``md`` or ``html`` text (HTML embeds one ratio chart per comparison)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown document format {fmt!r}")
    charts: list[str | None] = []
    if fmt == "html":
        from envcheck.compare.charts import ratio_chart

        charts = [ratio_chart(c) for c in d.comparisons]
    else:
        charts = [None] * len(d.comparisons)
    return _render(f"diff.{fmt}.j2", lang, diff=d, comparisons=list(zip(d.comparisons, charts, strict=True)))


def render_history(h: History, fmt: str, lang: str = "en") -> str:
    """The history as ``md`` or ``html`` text (HTML embeds the trend chart)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown document format {fmt!r}")
    chart = None
    if fmt == "html":
        from envcheck.compare.charts import history_chart

        chart = history_chart(h)
    groups = {
        "hosts": "; ".join(f"{name}: {', '.join(labels)}" for name, labels in h.hosts),
        "gpus": "; ".join(f"{name}: {', '.join(labels)}" for name, labels in h.gpus),
    }
    return _render(f"history.{fmt}.j2", lang, history=h, chart=chart, groups=groups)
