"""The charts of a run, a diff and a history: axes that say what is plotted, nothing drawn with nothing to show."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import compare_data
import factories
import factories_cpu
import pytest

from envcheck.analysis import analyse
from envcheck.model import load
from envcheck.render import chart_spec as cs
from envcheck.render import charts as ch
from envcheck.render import fmt
from envcheck.render.chart_draw import INTERVAL, figure
from envcheck.render.i18n import translate

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "evidence" / "2026-11-22_0104Z_vm_h200.json.gz"


@pytest.fixture(scope="module")
def h200():
    a = analyse(load(H200))
    return a, ch.run_charts(a.bench, "en")


def test_every_axis_label_and_every_x_come_from_one_definition(h200):
    a, drawn = h200
    for d in drawn:
        for panel in d.spec.panels:
            assert panel.x.label == translate("en", d.x.label) and panel.y.label == translate("en", d.y.label)
        if d.op is None:
            continue
        assert d.x is ch.size_quantity(a.bench.bench.spec(d.op))
        expected = {d.x.value(r) for r in a.bench.results if r.case.op == d.op}
        xs = {p.x for panel in d.spec.panels for s in panel.series for p in s.points}
        assert xs <= expected, d.name


def test_matmul_is_plotted_at_flop_for_every_shape(h200):
    a, drawn = h200
    tflops = next(d for d in drawn if d.name == "matmul_tflops")
    xs = {p.x for panel in tflops.spec.panels for s in panel.series for p in s.points}
    assert 2.0 * 4096 * 11008 * 4096 in xs and 2.0 * 4096**3 in xs and 2.0 * 256**3 in xs
    assert 4096 not in xs and 256 not in xs  # never a matrix side on a FLOP axis
    assert tflops.spec.panels[0].x.label == "work per call (FLOP = 2·M·N·K)"


def test_throughput_charts_draw_both_ceilings_and_the_roofline_its_measured_roofs(h200):
    _, drawn = h200
    bw = next(d for d in drawn if d.name == "vector_add_bandwidth")
    assert {r.label for r in bw.spec.panels[0].refs} == {"theoretical 4814 GB/s", "measured 4253 GB/s"}
    roof = next(d for d in drawn if d.name == "roofline")
    roofs = roof.spec.panels[0].roofs
    assert any(isinstance(r, cs.MemoryRoof) and r.measured for r in roofs)
    assert any(isinstance(r, cs.ComputeRoof) and r.measured for r in roofs)
    assert roof.spec.panels[0].x.label == "arithmetic intensity (FLOP/byte)"


def test_no_chart_has_a_panel_with_fewer_than_two_sizes():
    for report in (factories.report(), factories_cpu.report(), load(H200)):
        for d in ch.run_charts(analyse(report).bench, "en"):
            for panel in d.spec.panels:
                assert len({p.x for s in panel.series for p in s.points}) >= 2, d.name


def test_a_cpu_run_draws_no_roofline_and_no_single_point_chart():
    names = {d.name for d in ch.run_charts(analyse(factories_cpu.report()).bench, "en")}
    assert "roofline" not in names and not any(n.startswith("matmul") for n in names)
    assert "vector_add_time" in names


def test_axes_cannot_exaggerate_a_tiny_difference():
    """The CPU report's matmul chart once showed 1.597x10^4 .. 1.5956x10^4: a 0.1% difference as a cliff."""
    pts = tuple(cs.Point(x, 15960 + (x % 3)) for x in (1 << 20, 1 << 22, 1 << 24))
    facet = ch.Facet("fp32", (cs.Series("torch", pts, ch.IMPL_COLORS["torch"]),))
    chart = ch.facet_chart("t", "d", [facet], ch.ELEMENTS, ch.TIME, "en")
    d = ch.draw("t", None, chart, ch.ELEMENTS, ch.TIME)
    assert d is not None and "1.597" not in d.svg and "×10" not in d.svg
    ax = figure(chart).axes[0]
    lo, hi = ax.get_ylim()
    assert hi / lo >= 10  # the axis spans a decade, the points sit on one line
    shown = {"".join(t.itertext()) for t in ET.fromstring(d.svg).iter("{http://www.w3.org/2000/svg}text")}
    assert "10k" in shown or "20k" in shown


def test_diff_and_history_charts_say_what_they_plot():
    d = compare_data.diff()
    ratio = ch.ratio_chart(d.comparisons[0], "en")
    assert ratio is not None and ratio.spec.panels[0].x.label == "baseline time per call (µs)"
    xs = {p.x for panel in ratio.spec.panels for s in panel.series for p in s.points}
    assert xs <= {c.base_us for c in d.comparisons[0].compared}
    hist = ch.history_chart(compare_data.history(), "en")
    assert hist is not None and hist.spec.panels[0].x.label == "days since the first report"
    assert {p.x for s in hist.spec.panels[0].series for p in s.points} == {0.0, 1.0, 2.0}


@pytest.mark.parametrize("label", ["$\\undefinedmacro$", "<script>alert(1)</script>", "a & b \u202e", "]]>"])
def test_chart_text_is_escaped(label):
    """Machine text in charts (report labels in a diff) is text: matplotlib's mathtext once crashed on $\\x$."""
    s = compare_data.Strings(base_label=label, other_label=label + "2", base_gpu=label)
    d = ch.ratio_chart(compare_data.diff(s).comparisons[0], "en")
    assert d is not None
    root = ET.fromstring(d.svg)  # well-formed XML
    text = "".join(root.itertext())
    assert "\u202e" not in d.svg and "<script>" not in d.svg
    assert label.replace("\u202e", "").strip() in text


def test_charts_in_chinese():
    drawn = ch.run_charts(analyse(factories.report()).bench, "zh-CN")
    assert len(drawn) == 10
    assert "每次调用时间（µs）" in drawn[0].svg and "规模（元素数）" in drawn[0].svg


def test_diff_ratio_chart_follows_its_data_and_draws_each_interval_and_the_practical_band():
    """The ratio charts once fixed y at 0.4 .. 2.5 with every point within ±10% and drew no interval. A row not
    judged (no noise floor: two GPU models) is drawn with no interval."""
    unjudged = compare_data.diff().comparisons[0]
    drawn = ch.ratio_chart(unjudged, "en", 2.0)
    assert drawn is not None and {c.verdict for c in unjudged.compared} == {"not judged"}
    assert all(p.low is None and p.high is None for panel in drawn.spec.panels for s in panel.series for p in s.points)
    assert not [c for ax in figure(drawn.spec).axes for c in ax.collections if c.get_gid() == INTERVAL]
    d = compare_data.judged()
    drawn = ch.ratio_chart(d.comparisons[0], "en", d.practical_pct)
    assert drawn is not None
    points = [p for panel in drawn.spec.panels for s in panel.series for p in s.points]
    assert points and all(p.low is not None and p.low <= p.y <= p.high for p in points)
    assert all(panel.band is not None and panel.band.high == pytest.approx(1 + d.practical_pct / 100)
               for panel in drawn.spec.panels)
    for ax, panel in zip(figure(drawn.spec).axes, drawn.spec.panels, strict=True):
        lo, hi = ax.get_ylim()
        pts = [p for s in panel.series for p in s.points]
        assert lo <= min(p.low for p in pts) and hi >= max(p.high for p in pts)
        assert lo > 0.5 and hi < 1.5  # scaled to the data, not a fixed 0.4 .. 2.5
        bars = sorted((seg[0][0], seg[0][1], seg[1][1]) for c in ax.collections if c.get_gid() == INTERVAL
                      for seg in c.get_segments())
        assert bars == sorted((p.x, p.low, p.high) for p in pts)  # one error bar per row, its interval
    assert "practical band (±" in drawn.svg


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_diff_page_has_a_headline_card(lang):
    from envcheck.render.documents import render_diff

    d = compare_data.diff()
    html = render_diff(d, "html", lang)
    g = d.comparisons[0].overall
    cards = re.search(r'<div class="cards">(.*?)</div>\n', html, flags=re.S)
    assert cards is not None
    text = re.sub(r"<[^>]+>", " ", cards.group(1))
    assert fmt.ratio(g.geomean) in text and fmt.interval(g.low, g.high) in text
    assert translate(lang, "diff.card.calls_value", slower=g.slower, faster=g.faster) in text
    assert translate(lang, "diff.card.testing_value", tested=d.comparisons[0].tested) in text
    assert html.index('<div class="cards">') < html.index("<svg")  # the verdict first, then the chart


def test_ceilings_that_differ_by_panel_name_their_panel_in_the_legend(h200):
    _, drawn = h200
    tflops = next(d for d in drawn if d.name == "matmul_tflops")
    labels = [r.label for panel in tflops.spec.panels for r in panel.refs]
    assert all(r.label.startswith(f"{panel.title}: ") for panel in tflops.spec.panels for r in panel.refs)
    assert len(set(labels)) == len(labels)  # one legend entry per panel's ceiling, none merged away
    bw = next(d for d in drawn if d.name == "vector_add_bandwidth")  # one pair of ceilings for every dtype
    assert {r.label for panel in bw.spec.panels for r in panel.refs} == {"theoretical 4814 GB/s", "measured 4253 GB/s"}
