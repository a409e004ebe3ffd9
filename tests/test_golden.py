"""Golden files: the committed report JSON under tests/golden renders to the committed documents.

Regenerate after an intended change with ``ENVCHECK_UPDATE_GOLDEN=1 pytest tests/test_golden.py``
and review the diff. Inline chart SVGs are replaced by a placeholder before comparing: their
bytes belong to matplotlib's version, and their determinism is tested on its own below.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from envcheck.model import load
from envcheck.render import render_html, render_markdown, write_documents

GOLDEN = Path(__file__).resolve().parent / "golden"
ROOT = GOLDEN.parent.parent
UPDATE = os.environ.get("ENVCHECK_UPDATE_GOLDEN") == "1"
CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def normalise(text: str) -> str:
    """Stable across machines and library versions: no timestamps, no local paths, no SVG bodies."""
    text = re.sub(r"<svg\b.*?</svg>", "<svg><!-- chart --></svg>", text, flags=re.DOTALL)
    text = CREATED.sub("YYYY-MM-DDTHH:MM:SSZ", text)
    return text.replace(str(ROOT), "<root>")


CASES = [
    ("h200_small.md", lambda r: render_markdown(r, "en", "h200_small_charts")),
    ("h200_small.html", lambda r: render_html(r, "en")),
    ("h200_small.zh-CN.md", lambda r: render_markdown(r, "zh-CN", "h200_small.zh-CN_charts")),
]


@pytest.mark.parametrize(("name", "render"), CASES, ids=[c[0] for c in CASES])
def test_golden(name, render):
    actual = normalise(render(load(GOLDEN / "h200_small.json")))
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path.name} missing: run with ENVCHECK_UPDATE_GOLDEN=1"
    assert actual == path.read_text(encoding="utf-8")


def test_rendering_twice_gives_identical_bytes(tmp_path):
    """Every written file, SVG charts included, is the same on a second render."""
    report = load(GOLDEN / "h200_small.json")
    first = write_documents(report, tmp_path / "a" / "r.json", ["md", "html"])
    second = write_documents(report, tmp_path / "b" / "r.json", ["md", "html"])
    assert len(first) == len(second) > 3
    for a, b in zip(first, second, strict=True):
        assert a.name == b.name
        assert a.read_bytes() == b.read_bytes(), a.name
