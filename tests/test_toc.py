"""Long documents are navigable: a table of contents after the verdict, every entry a working anchor;
the per-op case tables of the HTML collapsed under their summary line."""

from __future__ import annotations

import re
from pathlib import Path

import compare_data
import node_reports
import pytest
from in_lang import render_diff, render_history, render_html, render_markdown

from envcheck.model import load
from envcheck.render.documents import slug

# The contents and anchors of the documents are checked, never their charts.
pytestmark = pytest.mark.usefixtures("charts_not_drawn")

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "evidence" / "2026-11-22_0104Z_vm_h200.json.gz"


def documents(lang: str) -> dict[str, tuple[str, str]]:
    run = load(RUN)
    node = node_reports.node_report(trouble=True)
    fleet = node_reports.fleet_report()
    d, h = compare_data.diff(), compare_data.history()
    return {"run": (render_markdown(run, lang), render_html(run, lang)),
            "node": (render_markdown(node, lang), render_html(node, lang)),
            "fleet": (render_markdown(fleet, lang), render_html(fleet, lang)),
            "diff": (render_diff(d, "md", lang), render_diff(d, "html", lang)),
            "history": (render_history(h, "md", lang), render_history(h, "html", lang))}


@pytest.fixture(scope="module", params=["en", "zh-CN"])
def docs(request):
    return request.param, documents(request.param)


@pytest.mark.parametrize("kind", ["run", "node", "fleet", "diff", "history"])
def test_html_contents_link_to_every_top_section(docs, kind):
    _, d = docs
    page = d[kind][1]
    nav = re.search(r'<nav class="toc"[^>]*>(.*?)</nav>', page, re.DOTALL)
    assert nav, "no table of contents"
    targets = re.findall(r'href="#([^"]+)"', nav.group(1))
    sections = re.findall(r'<section id="([^"]+)"[^>]*>\s*<h2', page)
    headed = re.findall(r'<h[23] id="([^"]+)"', page)
    assert len(targets) >= 3 and len(set(targets)) == len(targets)
    assert set(targets) <= set(sections) | set(headed)  # each entry opens a section or a heading
    assert set(sections) <= set(targets) or len([t for t in targets if t in sections]) >= 3
    # After the header and the verdict, before the first section.
    first = min(i for i in (page.find("<section "), page.find("<h2 id=")) if i >= 0)
    assert page.index('<nav class="toc"') < first
    if 'class="card"' in page[:first]:  # the page's verdict cards; a diff's headline cards open each comparison
        assert page.index('class="card"') < page.index('<nav class="toc"')


@pytest.mark.parametrize("kind", ["run", "node", "fleet", "diff", "history"])
def test_markdown_contents_link_to_every_heading(docs, kind):
    _, d = docs
    doc = d[kind][0]
    listed = re.findall(r"^ *- \[[^\]]*\]\(#([^)]+)\)$", doc, re.MULTILINE)
    body = doc[doc.index("## "):]
    headings = re.findall(r"^#{2,3} (.+?)\s*$", body, re.MULTILINE)
    seen: dict[str, int] = {}
    anchors = [slug(h, seen) for h in headings]
    assert len(listed) >= 3 and set(listed) <= set(anchors)
    top = [slug(h, {}) for h in re.findall(r"^## (.+?)\s*$", body, re.MULTILINE)]
    if len(top) >= 3:
        assert listed == top  # every section, in order
    assert doc.index(f"(#{listed[0]})") < doc.index("## ")


def test_a_heading_slug_is_githubs():
    seen: dict[str, int] = {}
    assert slug("Benchmark: vector\\_add", seen) == "benchmark-vector_add"
    assert slug("健康状况", seen) == "健康状况"
    assert slug("Benchmark: vector\\_add", seen) == "benchmark-vector_add-1"


def test_html_case_tables_are_collapsed_under_their_summary(docs):
    lang, d = docs
    page = d["run"][1]
    ops = re.findall(r'<section id="op-([^"]+)">', page)
    assert ops
    for op in ops:
        body = page[page.index(f'<section id="op-{op}">'):]
        body = body[:body.index("</section>")]
        assert re.search(r'<details class="cases"><summary>[^<]+</summary>\s*<div class="table-wrap"><table class="cases">',
                         body), op
        assert 'open' not in body[body.index('<details class="cases"'):][:30]
