"""Rendering runs nothing it finds on the disk and lets no file name steer the page (issue 46, items 2 and 11)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import jinja2
import jinja2.bccache
import pytest

from envcheck import cli

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "envcheck" / "templates"
REPORT = ROOT / "tests" / "golden" / "h200_small.json"


class _Payload:
    """Unpickled, it creates the file ``marker``: what any code planted in a cache could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_template_cache_planted_in_the_cache_folder_is_never_run(tmp_path: Path) -> None:
    """Jinja's bytecode cache unpickles what its folder holds: whoever can write ``$XDG_CACHE_HOME``
    (a shared or another user's folder) ran code as the user rendering."""
    marker = tmp_path / "ran"
    cache = tmp_path / "cache" / "envcheck" / f"jinja-{jinja2.__version__}"
    cache.mkdir(parents=True)
    payload = jinja2.bccache.bc_magic + pickle.dumps(_Payload(marker))
    key = jinja2.bccache.BytecodeCache().get_cache_key
    for template in TEMPLATES.glob("*.j2"):
        name = template.name
        (cache / f"__jinja2_{key(name, os.path.normpath(str(template)))}.cache").write_bytes(payload)
    (tmp_path / "r.json").write_bytes(REPORT.read_bytes())
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "envcheck", "render", str(tmp_path / "r.json"), "--format", "md,html"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r.html").exists() and not marker.exists()


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str | None]] = []
        self.tags: list[tuple[str, list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, [name for name, _ in attrs]))
        if tag == "img":
            self.images.append(dict(attrs))


@pytest.mark.parametrize("name", ["my report", 'r) onerror="alert(1)', 'r" onerror="alert(1)', "r<img src=x>",
                                  "r (1)", "r]](x)"])
def test_chart_links_from_a_file_name_resolve_and_inject_nothing(tmp_path: Path, name: str, capsys,
                                                                undrawn_charts) -> None:
    """A report's file name went raw into the Markdown's image targets: a space broke the image, a ``)``
    or ``"`` let ``onerror`` into the HTML made from the Markdown."""
    report = tmp_path / f"{name}.json"
    report.write_bytes(REPORT.read_bytes())
    with undrawn_charts():
        assert cli.main(["render", str(report), "--format", "md"]) == 0, capsys.readouterr().err
    page = _Images()
    markdown_it = pytest.importorskip("markdown_it")  # a test extra
    page.feed(markdown_it.MarkdownIt("commonmark").render((tmp_path / f"{name}.md").read_text()))
    assert page.images  # the report has charts
    for image in page.images:
        assert set(image) == {"src", "alt"}, image
        assert (tmp_path / unquote(image["src"] or "")).is_file(), image["src"]
    assert all(set(attrs) <= {"src", "alt", "href", "id", "class"} for _, attrs in page.tags), page.tags
