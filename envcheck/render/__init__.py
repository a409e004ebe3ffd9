"""Presentation: everything envcheck shows (terminal, Markdown, HTML, charts, JUnit, Prometheus, the health line),
from a report's analysis or a comparison's data, deriving nothing. ``i18n``: the language; ``fmt`` and ``escape``:
values as text, safe per medium; ``*_view``: what takes more than a lookup to say; ``charts``: what each chart shows;
``terminal``: the console layouts. Heavy modules load on first use, so ``envcheck.render.i18n`` stays cheap."""

from __future__ import annotations

from typing import Any

from envcheck.render.i18n import LANGS

FORMATS: tuple[str, ...] = ("md", "html")
# For the systems around a fleet (CI, node_exporter): written beside the documents when asked for.
MACHINE_FORMATS: tuple[str, ...] = ("junit", "prometheus")
# Each chart as an image to paste into an issue: <stem>_charts/<name>.png, beside the SVGs.
IMAGE_FORMATS: tuple[str, ...] = ("png",)

_LAZY = {**dict.fromkeys(("render_markdown", "render_html", "render_diff", "render_histories"), "envcheck.render.documents"),
         **dict.fromkeys(("write_documents", "render_after_run", "DocumentsOutcome"), "envcheck.render.writing")}

__all__ = ["FORMATS", "IMAGE_FORMATS", "LANGS", "MACHINE_FORMATS", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'envcheck.render' has no attribute {name!r}")
