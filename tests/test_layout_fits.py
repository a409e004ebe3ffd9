"""Pages that fit a phone and a laptop (issue 38, item 10), checked in-process; the browser test measures them.

Charts: one panel wide (panels stacked), legends inside the figure by matplotlib's own measure, a time's
interquartile range drawn, a line broken where its series skipped sizes, a burn phase on its own time axis
with GPUs told apart. Pages: passing checks folded into one line; the catalogue's `code` shown as code.
"""

from __future__ import annotations

import re
from pathlib import Path

import node_reports
import pytest
from in_lang import render_html

from envcheck.analysis import analyse
from envcheck.model import load
from envcheck.render import chart_style as st
from envcheck.render.burn_charts import burn_charts
from envcheck.render.chart_draw import figure, split_missing
from envcheck.render.chart_spec import Point
from envcheck.render.charts import run_charts
from envcheck.render.escape import code_spans, fix

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "evidence" / "2026-11-22_0104Z_vm_h200.json.gz"
BURN = ROOT / "evidence" / "2026-11-28_1737Z_vm_2x-h200_burn_healthy.json.gz"


@pytest.fixture(scope="module")
def h200_charts():
    return run_charts(analyse(load(H200)).benches[0])


def test_every_chart_is_one_panel_wide_so_a_phone_shows_it_whole(h200_charts):
    several = [d for d in h200_charts if len(d.spec.panels) > 1]
    assert several, "the H200 run has charts of several panels (one per precision)"
    for d in several:
        fig = figure(d.spec)
        assert fig.get_figwidth() * 72 <= st.PANEL_W + 0.5, d.name  # 480 px, scaled down to 370 px: never scrolls


def _legends_inside(chart) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = figure(chart)
    canvas = FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    width = fig.get_figwidth() * fig.dpi
    assert fig.legends
    for leg in fig.legends:
        box = leg.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= width, (box.x1, width, [t.get_text() for t in leg.get_texts()])


def test_a_legend_never_runs_past_its_figure():
    node = analyse(node_reports.node_report(trouble=True))
    for ba in node.benches:
        for d in run_charts(ba):
            if d.name.endswith(("bandwidth", "tflops")):
                _legends_inside(d.spec)
                return
    pytest.fail("no throughput chart")


def test_a_time_chart_draws_each_times_interquartile_range(h200_charts):
    time = next(d for d in h200_charts if d.name == "vector_add_time")
    pts = [p for panel in time.spec.panels for s in panel.series for p in s.points]
    assert pts and all(p.low is not None and p.low <= p.y <= p.high for p in pts)
    assert any(p.low < p.y < p.high for p in pts)


def test_a_line_breaks_where_its_series_skipped_a_size():
    pts = [Point(x, 1.0) for x in (1024.0, 4096.0, 65536.0)]
    # the panel's other series ran at 16384: this one did not, so no line joins 4096 and 65536
    runs = split_missing([pts], [1024.0, 4096.0, 16384.0, 65536.0])
    assert [[p.x for p in r] for r in runs] == [[1024.0, 4096.0], [65536.0]]
    assert split_missing([pts], [1024.0, 4096.0, 65536.0]) == [pts]  # nothing skipped: one line
    assert split_missing([pts], [1024.0, 4096.0, 4097.0, 65536.0]) == [pts]  # a ragged size is the same size


def test_a_burn_phase_chart_starts_at_the_phase_and_tells_the_gpus_apart():
    charts = {d.name: d for d in burn_charts(analyse(load(BURN)).burn)}
    gbps = charts["burn_gbps"].spec
    series = gbps.panels[0].series
    assert len(series) == 2
    assert min(p.x for s in series for p in s.points) < 5.0  # not a band at 190-235 s of a 0-240 s axis
    assert len({(s.marker, s.dashed) for s in series}) == 2
    assert "phase" in gbps.panels[0].x.label


def test_passing_checks_are_folded_into_one_line_and_problems_stay_in_view():
    page = render_html(load(ROOT / "evidence" / "2026-11-22_0104Z_vm_h200_check.json.gz"))
    health = page[page.index('<section id="health">'):]
    health = health[:health.index("</section>")]
    folded = re.search(r'<details class="passed-checks"><summary>(\d+) checks passed</summary>(.*?)</details>',
                       health, re.DOTALL)
    assert folded, "the passing checks are one line"
    assert int(folded.group(1)) > 20 and "status-pass" in folded.group(2)
    assert "status-warn" not in folded.group(2) and "status-fail" not in folded.group(2)
    before = health[:folded.start()]
    assert "status-pass" not in before.replace('class="verdict status-pass"', "")


def test_code_spans_become_code_in_text_only():
    page = '<p title="a `b` c">run `envcheck check` now</p><code class="fix">x `y`</code><svg><text>`z`</text></svg>'
    out = code_spans(page)
    assert '<p title="a `b` c">run <code>envcheck check</code> now</p>' in out
    assert '<code class="fix">x `y`</code>' in out and "<text>`z`</text>" in out


def test_a_fix_in_words_shows_its_commands_as_code_and_no_backticks():
    shown = str(fix("install it (Ubuntu: `sudo ubuntu-drivers install`, then reboot); `lspci | grep -i nvidia`"))
    assert "`" not in shown
    assert shown.startswith("install it (Ubuntu: <code class=\"fix\">")
    assert shown.count('<code class="fix">') == 2 and "&lt;" not in shown
    assert str(fix("nvidia-smi -q")).startswith('<code class="fix">')  # a fix that is a command: code, whole
