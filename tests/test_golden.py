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
import node_reports
import pytest
from in_lang import print_fleet, print_run, render_html, render_markdown

from envcheck.analysis import analyse
from envcheck.model import dumps, load, loads
from envcheck.render.terminal.console import capture

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


def _fleet_terminal(r, lang="en"):
    return capture(lambda c: print_fleet(c, r, analyse(r), lang=lang), width=100)


CASES = [
    ("h200_small.md", "h200_small.json", lambda r: render_markdown(r, "en", "h200_small_charts")),
    ("h200_small.html", "h200_small.json", lambda r: render_html(r, "en")),
    ("h200_small.zh-CN.md", "h200_small.json", lambda r: render_markdown(r, "zh-CN", "h200_small.zh-CN_charts")),
    ("h200_small.txt", "h200_small.json", _terminal),
    ("cpu_small.md", "cpu_small.json", lambda r: render_markdown(r, "en", "cpu_small_charts")),
    ("cpu_small.txt", "cpu_small.json", _terminal),
    ("node_x2.md", "node_x2.json", lambda r: render_markdown(r, "en", "node_x2_charts")),
    ("node_x2.html", "node_x2.json", lambda r: render_html(r, "en")),
    ("node_x2.txt", "node_x2.json", _terminal),
    ("fleet_2x.md", "fleet_2x.json", lambda r: render_markdown(r, "en", "fleet_2x_charts")),
    ("fleet_2x.zh-CN.md", "fleet_2x.json", lambda r: render_markdown(r, "zh-CN", "fleet_2x.zh-CN_charts")),
    ("fleet_2x.html", "fleet_2x.json", lambda r: render_html(r, "en")),
    ("fleet_2x.txt", "fleet_2x.json", _fleet_terminal),
]

# Node and fleet reports built from the real 2 x H200 capture (tests/node_reports.py), regenerated with the goldens.
BUILT = {"node_x2.json": lambda: node_reports.node_report(trouble=True), "fleet_2x.json": node_reports.fleet_report}


def test_cpu_golden_json_is_the_cpu_factory():
    """The CPU golden report is what tests/factories_cpu.py builds (regenerated with the goldens)."""
    path = GOLDEN / "cpu_small.json"
    if UPDATE:
        path.write_text(dumps(factories_cpu.report()), encoding="utf-8")
    assert loads(path.read_text(encoding="utf-8")) == factories_cpu.report()


@pytest.mark.parametrize("name", sorted(BUILT))
def test_node_and_fleet_golden_json_is_the_builder(name):
    path = GOLDEN / name
    if UPDATE:
        path.write_text(dumps(BUILT[name]()), encoding="utf-8")
    assert loads(path.read_text(encoding="utf-8")) == BUILT[name]()


@pytest.mark.parametrize(("name", "source", "render"), CASES, ids=[c[0] for c in CASES])
def test_golden(name, source, render):
    actual = normalise(render(load(GOLDEN / source)))
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path.name} missing: run with ENVCHECK_UPDATE_GOLDEN=1"
    assert actual == path.read_text(encoding="utf-8")
