"""The HTML reports in a real browser: headless Chromium lays them out at a laptop's 1400 px and a phone's 390 px.

Run, node, burn, diff, history and fleet pages, from the committed evidence and in both languages. At 1400 px no
table may be wider than its container (everything important visible without scrolling sideways); at 390 px the page
itself must not scroll sideways, and only the per-case tables and the GPU x GPU matrices of a node report (their first
column pinned) may scroll inside their frame; at both nothing reaches past the page's sides, no heading is cut, the
verdict and the first thing it says failed are in the first screen, and no page is endlessly tall. The report is laid
out in an iframe of the wanted width, so the measurement does not depend on the smallest window Chromium allows, and a
script in the test's wrapper page (never in the report, which has none) writes what it measured into the DOM that
``--dump-dom`` prints.

Skipped where no Chromium is installed (``apt-get install -y chromium``; ``fonts-noto-cjk`` lays Chinese out as a
reader sees it).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import compare_data
import factories_cpu
import node_reports
import pytest
from in_lang import render_diff, render_histories, render_html

from envcheck.model import load

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "dev" / "screenshot_report.sh"
BROWSER = os.environ.get("CHROMIUM") or next(
    (b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(BROWSER is None, reason="no Chromium on PATH (apt-get install -y chromium)"),
    pytest.mark.xdist_group("browser"),  # one pytest-xdist worker: the documents (charts drawn) are rendered once
]

MEASURE = """<!DOCTYPE html><html><head><script>
function measure(frame, i) {{
  // Measured once the frame's fonts are loaded, a (virtual) 100 ms later: measured at
  // onload, a CJK fallback font could still be on its way, and widths depended on how busy the machine was.
  frame.contentDocument.fonts.ready.then(function () {{ setTimeout(function () {{ settled(frame, i); }}, 100); }});
}}
function settled(frame, i) {{
  var d = frame.contentDocument, win = frame.contentWindow, out = [];
  d.querySelectorAll('.table-wrap').forEach(function (w) {{
    if (w.scrollWidth > w.clientWidth + 1)
      out.push(w.querySelector('table').className + ' ' + w.scrollWidth + '>' + w.clientWidth);
  }});
  d.querySelectorAll('figure').forEach(function (f, i) {{
    // A chart never scrolls sideways, and no text of it (a legend) runs past its own drawing.
    if (f.scrollWidth > f.clientWidth + 1) out.push('figure ' + i + ' ' + f.scrollWidth + '>' + f.clientWidth);
    var svg = f.querySelector('svg');
    if (!svg || !svg.viewBox || !svg.viewBox.baseVal) return;
    var w = svg.viewBox.baseVal.width;
    svg.querySelectorAll('text').forEach(function (t) {{
      var b = t.getBBox();
      if (b.x + b.width > w + 1) out.push('chart-text ' + i + ' ' + t.textContent.slice(0, 40) + ' ' + Math.round(b.x + b.width) + '>' + w);
    }});
  }});
  d.querySelectorAll('table').forEach(function (t) {{
    // A column is clipped where a cell's content is wider than the cell.
    t.querySelectorAll('td, th').forEach(function (c) {{
      if (c.scrollWidth > c.clientWidth + 1 && getComputedStyle(c).overflowX !== 'auto')
        out.push('cell ' + t.className + ' ' + c.textContent.slice(0, 30) + ' ' + c.scrollWidth + '>' + c.clientWidth);
    }});
  }});
  var vw = win.innerWidth;
  d.querySelectorAll('body *').forEach(function (e) {{
    // Nothing reaches past the page's sides but inside a frame of its own that scrolls (counted above).
    if (e.namespaceURI !== 'http://www.w3.org/1999/xhtml' && e.tagName !== 'svg') return;
    var b = e.getBoundingClientRect();
    if (!b.width || (b.right <= vw + 1 && b.left >= -1)) return;
    for (var p = e.parentElement; p && p !== d.body; p = p.parentElement)
      if (getComputedStyle(p).overflowX !== 'visible') return;
    out.push('wide ' + e.tagName + '.' + (e.getAttribute('class') || '') + ' ' + Math.round(b.right) + '>' + vw);
  }});
  d.querySelectorAll('h1, h2, h3, h4, summary, .verdict').forEach(function (h) {{
    if (h.scrollWidth > h.clientWidth + 1) out.push('heading ' + h.textContent.slice(0, 40) + ' ' + h.scrollWidth + '>' + h.clientWidth);
  }});
  // Where the first screen ends: the bottom of the page's verdict and of the first thing it says failed.
  var v = d.querySelector('.glance .verdict'), f = d.querySelector('.glance li');
  function bottom(e) {{ return e ? Math.round(e.getBoundingClientRect().bottom + win.scrollY) : -1; }}
  var r = document.createElement('div');
  r.id = 'r' + i;
  r.setAttribute('data-page', d.documentElement.scrollWidth + '/' + vw + '/' + d.documentElement.scrollHeight + '/' + bottom(v) + '/' + bottom(f));
  r.setAttribute('data-overflow', out.join('|'));
  document.body.appendChild(r);
}}
</script></head><body style="margin:0">
{frames}
</body></html>"""
FRAME = '<iframe style="border:0;display:block" width="{width}" height="900" onload="measure(this, {i})" srcdoc="{doc}"></iframe>'


class Measured(NamedTuple):
    page: int  # the page's width
    viewport: int
    height: int  # the page's height
    verdict: int  # the bottom of the page's verdict (-1: none), of the first thing it says failed or warns
    finding: int
    overflow: list[str]  # what is wider than its frame, as "what scrollWidth>clientWidth"


def measure(docs: list[str], width: int, tmp_path: Path) -> list[Measured]:
    """Each document laid out at ``width`` px, each in an iframe of its own in one page (one Chromium for all)."""
    page = tmp_path / f"measure_{width}.html"
    frames = "\n".join(FRAME.format(width=width, i=i, doc=html.escape(doc, quote=True)) for i, doc in enumerate(docs))
    page.write_text(MEASURE.format(frames=frames), encoding="utf-8")
    profile = tmp_path / f"profile_{width}"
    res = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--no-first-run",
                          f"--user-data-dir={profile}", "--window-size=1600,1000", "--virtual-time-budget=15000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=600)
    found = {int(m.group(1)): m for m in re.finditer(r'<div id="r(\d+)" data-page="([\d/-]+)" data-overflow="([^"]*)">',
                                                      res.stdout)}
    assert sorted(found) == list(range(len(docs))), res.stderr[-2000:]
    return [Measured(*map(int, m.group(2).split("/")), [x for x in html.unescape(m.group(3)).split("|") if x])
            for _, m in sorted(found.items())]


def evidence(*names: str) -> list[str]:
    return [str(ROOT / "evidence" / f"{n}.json.gz") for n in names]


def documents() -> dict[str, str]:
    """A page of each kind (run, node, burn, diff, history, fleet) from the committed evidence, and the synthetic
    node and fleet reports in trouble, in both languages."""
    from envcheck.commands.diff import load_files
    from envcheck.commands.history import collect
    from envcheck.compare.diff import diff_analysed
    from envcheck.compare.history import histories

    files = load_files(evidence("2026-11-26_0431Z_vm_h100_controls_baseline", "2026-11-26_0431Z_vm_h100_controls_control"))
    diff = diff_analysed([(n.label, a) for nodes, _ in files for n, a in nodes])
    # Two machines, one with step changes (the positive control's slower vector_add).
    history = histories(*collect(evidence(*(f"2026-11-26_0431Z_vm_h100_controls_{x}" for x in ("baseline", "control",
                                                                                               "rerun")),
                                          "2026-11-26_0449Z_vm_h100", "2026-11-26_0452Z_vm_h100"))).machines
    reports = {
        "h200": load(ROOT / "evidence" / "2026-11-22_0104Z_vm_h200.json.gz"),
        "cpu": factories_cpu.report(),
        "userbench": load(ROOT / "evidence" / "2026-11-26_0225Z_vm_h200_userbench_softmax-wsum.json.gz"),
        "burn": load(ROOT / "evidence" / "2026-11-28_1737Z_vm_2x-h200_burn_healthy.json.gz"),
        "burn.failed": load(ROOT / "evidence" / "2026-11-28_1732Z_vm_4x-h200_burn_control-slow_gemm-gpu2.json.gz"),
        "node.real": load(ROOT / "evidence" / "2026-11-22_2326Z_vm_2x-h200_node.json.gz"),
        "node.4x": load(ROOT / "evidence" / "2026-11-26_1524Z_vm_4x-h100_node.json.gz"),
        "node": node_reports.node_report(trouble=True),
        "fleet.real": load(ROOT / "evidence" / "2026-11-22_2330Z_fleet-2x_vm-0.json.gz"),
        "fleet": node_reports.fleet_report(),
    }
    out = {}
    for lang, suffix in (("en", ""), ("zh-CN", ".zh-CN")):
        out |= {name + suffix: render_html(r, lang) for name, r in reports.items()}
        out["diff" + suffix] = render_diff(diff, "html", lang)
        out["diff.names" + suffix] = render_diff(compare_data.diff(), "html", lang)
        out["history" + suffix] = render_histories(history, "html", lang)
    return out


@pytest.fixture(scope="module")
def docs():
    return documents()


ALL = [name + suffix for suffix in ("", ".zh-CN") for name in (
    "h200", "cpu", "userbench", "burn", "burn.failed", "node.real", "node.4x", "node", "fleet.real", "fleet", "diff",
    "diff.names", "history")]
# The first screen of a phone (390 x 844, less the browser's bars) and of a laptop (1400 x 900, less the same), and
# the tallest page (a node report of 2 GPUs was 28,800 px at 1400 px and 44,800 px at 390 px, its charts one per row).
FIRST_SCREEN = {390: 660, 1400: 760}
TALLEST = {390: 30_000, 1400: 15_000}


@pytest.fixture(scope="module")
def measured(docs, tmp_path_factory) -> dict[tuple[str, int], Measured]:
    """Every document of ALL measured at a laptop's and a phone's width: one Chromium per width (each a
    second or two to start; one per document and width was most of this module's time)."""
    where = tmp_path_factory.mktemp("measure")
    return {(name, width): got for width in (1400, 390)
            for name, got in zip(ALL, measure([docs[n] for n in ALL], width, where), strict=True)}


@pytest.mark.parametrize("name", ALL)
def test_nothing_is_wider_than_its_container_at_1400_px(measured, name):
    m = measured[name, 1400]
    assert m.viewport == 1400 and m.page <= m.viewport
    assert not m.overflow, m.overflow


@pytest.mark.parametrize("name", ALL)
def test_at_phone_width_only_the_case_tables_scroll_inside_their_frame(measured, name):
    m = measured[name, 390]
    assert m.viewport == 390 and m.page <= m.viewport, "the page scrolls sideways"
    # The per-case tables and the GPU x GPU matrices keep their grid (first column pinned); nothing else is
    # wider than the page, and no heading is cut.
    assert all(o.startswith(("cases ", "matrix ")) for o in m.overflow), m.overflow


@pytest.mark.parametrize("width", [390, 1400])
@pytest.mark.parametrize("name", ALL)
def test_the_verdict_and_what_failed_are_in_the_first_screen(measured, name, width):
    m = measured[name, width]
    assert 0 < m.verdict <= FIRST_SCREEN[width], m
    assert m.finding <= FIRST_SCREEN[width], m
    assert m.height <= TALLEST[width], m


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def test_screenshots_at_laptop_and_phone_width(docs, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(docs["h200"], encoding="utf-8")
    res = subprocess.run(["bash", str(SCRIPT), str(page), str(tmp_path / "shots")], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    desktop, phone = tmp_path / "shots" / "report.desktop.png", tmp_path / "shots" / "report.phone.png"
    assert png_size(desktop) == (1400, 2400)
    assert png_size(phone) == (390, 2400)
    # a blank page compresses to almost nothing; a rendered report does not
    assert desktop.stat().st_size > 50_000 and phone.stat().st_size > 30_000


def test_script_usage_errors(tmp_path):
    res = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "missing.html")], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 2 and "no such file" in res.stderr


TOKENS = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" style="border:0" width="{width}" height="900" srcdoc="{doc}"></iframe>
<script>
document.getElementById('f').onload = function () {{
  var d = this.contentDocument, split = [], seen = 0;
  d.querySelectorAll('code.fix').forEach(function (code) {{
    // A token: a run of a command's characters between spaces (CJK text may break anywhere).
    var text = code.textContent, re = /[^\\s\\u3000-\\u303f\\u4e00-\\u9fff\\uff00-\\uffef]+/g, m;
    var walker = d.createTreeWalker(code, NodeFilter.SHOW_TEXT), nodes = [], n, at = 0;
    while ((n = walker.nextNode())) {{ nodes.push([n, at]); at += n.textContent.length; }}
    function point(i) {{ for (var k = nodes.length - 1; k >= 0; k--) if (nodes[k][1] <= i) return [nodes[k][0], i - nodes[k][1]]; }}
    while ((m = re.exec(text)) !== null) {{
      var a = point(m.index), b = point(m.index + m[0].length - 1);
      var r = d.createRange(); r.setStart(a[0], a[1]); r.setEnd(b[0], b[1] + 1);
      var tops = {{}}; Array.prototype.forEach.call(r.getClientRects(), function (c) {{ tops[Math.round(c.top)] = 1; }});
      seen += 1;
      if (Object.keys(tops).length > 1) split.push(m[0]);
    }}
  }});
  document.body.setAttribute('data-tokens', seen + '');
  document.body.setAttribute('data-split', split.join(' '));
}};
</script></body></html>"""


def split_tokens(doc: str, width: int, tmp_path: Path) -> tuple[int, list[str]]:
    """(tokens of fix commands laid out, those drawn over more than one line) at ``width`` px."""
    page = tmp_path / f"tokens_{width}.html"
    page.write_text(TOKENS.format(width=width, doc=html.escape(doc, quote=True)), encoding="utf-8")
    res = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile_tokens'}", "--window-size=1600,1000",
                          "--virtual-time-budget=15000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=300)
    m = re.search(r'data-tokens="(\d+)" data-split="([^"]*)"', res.stdout)
    assert m, res.stderr[-2000:]
    return int(m.group(1)), [x for x in html.unescape(m.group(2)).split(" ") if x]


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_fix_commands_wrap_only_between_tokens_at_phone_width(lang, tmp_path):
    """A fix with a long flag and URL (the CPU-only torch on a GPU machine) is pasted whole: at 390 px it
    wraps at its spaces, and neither ``--index-url`` nor ``https://download.pytorch.org/...`` is split."""
    from envcheck import snapshot
    from envcheck.checks import evaluate
    from envcheck.model import Report
    from envcheck.probes.collect import collect

    host, nvml = snapshot.replay(snapshot.load(ROOT / "tests/fixtures/snapshots/corpus/wsl-cpu-torch-wheel.json"))
    env = collect(host=host, nvml=nvml, runtime=True, timeout=60)
    report = Report(tool_version="0", created="2026-11-25T00:00:00Z", host="h", kind="check", environment=env,
                    checks=evaluate(env))
    assert any("https://download.pytorch.org" in (c.fix or "") for c in report.checks)
    seen, split = split_tokens(render_html(report, lang), 390, tmp_path)
    assert seen > 20
    assert not split, split
