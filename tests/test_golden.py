"""Golden files: committed report JSON renders to the committed documents and terminal text.

Regenerate after an intended change with ``ENVCHECK_UPDATE_GOLDEN=1 pytest tests/test_golden.py``
and review the diff. Inline chart SVGs are replaced by a placeholder before comparing (the chart
writer has its own tests, and their bytes are checked for determinism in test_render); times and
paths are normalised.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import factories_cpu
import pytest

from envcheck.analysis import analyse
from envcheck.model import dumps, load, loads
from envcheck.render.documents import render_html, render_markdown
from envcheck.render.terminal.console import capture
from envcheck.render.terminal.run import print_run

GOLDEN = Path(__file__).resolve().parent / "golden"
ROOT = GOLDEN.parent.parent
UPDATE = os.environ.get("ENVCHECK_UPDATE_GOLDEN") == "1"
CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def normalise(text: str) -> str:
    """Stable across machines: no timestamps, no local paths, no SVG bodies."""
    text = re.sub(r"<svg\b.*?</svg>", "<svg><!-- chart --></svg>", text, flags=re.DOTALL)
    text = CREATED.sub("YYYY-MM-DDTHH:MM:SSZ", text)
    return text.replace(str(ROOT), "<root>")


def _terminal(r, lang="en"):
    return capture(lambda c: print_run(c, r, analyse(r), lang=lang), width=100)


CASES = [
    ("h200_small.md", "h200_small.json", lambda r: render_markdown(r, "en", "h200_small_charts")),
    ("h200_small.html", "h200_small.json", lambda r: render_html(r, "en")),
    ("h200_small.zh-CN.md", "h200_small.json", lambda r: render_markdown(r, "zh-CN", "h200_small.zh-CN_charts")),
    ("h200_small.txt", "h200_small.json", _terminal),
    ("cpu_small.md", "cpu_small.json", lambda r: render_markdown(r, "en", "cpu_small_charts")),
    ("cpu_small.txt", "cpu_small.json", _terminal),
]


def test_cpu_golden_json_is_the_cpu_factory():
    """The CPU golden report is what tests/factories_cpu.py builds (regenerated with the goldens)."""
    path = GOLDEN / "cpu_small.json"
    if UPDATE:
        path.write_text(dumps(factories_cpu.report()), encoding="utf-8")
    assert loads(path.read_text(encoding="utf-8")) == factories_cpu.report()


@pytest.mark.parametrize(("name", "source", "render"), CASES, ids=[c[0] for c in CASES])
def test_golden(name, source, render):
    actual = normalise(render(load(GOLDEN / source)))
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path.name} missing: run with ENVCHECK_UPDATE_GOLDEN=1"
    assert actual == path.read_text(encoding="utf-8")
