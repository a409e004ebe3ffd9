"""Presentation: everything envcheck shows, for the terminal, Markdown and HTML, of a run, a diff and a history.

Reads a report and its analysis (``envcheck.analysis``) or a comparison's data
(``envcheck.compare``); never probes, measures or derives a number. One of each:

* ``i18n`` and ``catalog/``: the message catalogue per language, and phrasing of keys from data;
* ``fmt``: numbers, sizes and labels as text; ``escape``: machine text made safe per medium;
* ``jinja`` and ``templates/``: the Jinja environment of every document;
* ``charts`` (what each chart shows) on ``chart_spec`` (the data), ``chart_style`` and ``chart_draw`` (matplotlib);
* ``view`` (a run) and ``compare_view`` (a diff, a history): what a document shows, phrased;
* ``documents``: Markdown and HTML text; ``writing``: a render's files written as one set;
* ``junit``, ``prometheus``, ``health``: the report for CI, node_exporter and schedulers;
* ``terminal``: the console policy and the terminal layouts.

The heavy modules load on first use, so ``envcheck.render.i18n`` stays cheap to import.
"""

from __future__ import annotations

from typing import Any

from envcheck.render.i18n import LANGS

FORMATS: tuple[str, ...] = ("md", "html")
# For the systems around a fleet (CI, node_exporter): written beside the documents when asked for.
MACHINE_FORMATS: tuple[str, ...] = ("junit", "prometheus")
# Each chart as an image to paste into an issue: <stem>_charts/<name>.png, beside the SVGs.
IMAGE_FORMATS: tuple[str, ...] = ("png",)

_LAZY = {
    "render_markdown": "envcheck.render.documents",
    "render_html": "envcheck.render.documents",
    "render_diff": "envcheck.render.documents",
    "render_history": "envcheck.render.documents",
    "write_documents": "envcheck.render.writing",
    "render_after_run": "envcheck.render.writing",
    "DocumentsOutcome": "envcheck.render.writing",
}

__all__ = ["FORMATS", "IMAGE_FORMATS", "LANGS", "MACHINE_FORMATS", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'envcheck.render' has no attribute {name!r}")
