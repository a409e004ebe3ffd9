"""The SVG chart writer: deterministic bytes, valid and inert XML, honest axes, nothing overlapping."""

from __future__ import annotations

import itertools
import math
import os
import random
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path

import pytest

from envcheck.render import axes
from envcheck.render import svgchart as sc

NS = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parent.parent
SIZES = [2**k for k in range(10, 29, 2)]  # 1K .. 256M elements


def time_chart() -> sc.Chart:
    """A 3-panel time chart like vector_add's: torch / triton / compile over 2^10 .. 2^28 elements."""
    impls = (("torch", sc.BLUE, "circle"), ("triton", sc.VERMILLION, "square"), ("compile", sc.BLUISH_GREEN, "triangle"))
    panels = []
    for d, dtype in enumerate(("fp32", "fp16", "bf16")):
        series = []
        for i, (impl, color, marker) in enumerate(impls):
            pts = tuple(sc.Point(n, 1.1 + n * (4 - d) / 4e6 * (1 + 0.03 * i), f"{n} elements: {1.1 + n / 4e6:.3g} µs")
                        for n in SIZES[i % 2:])
            series.append(sc.Series(f"{impl} GPU time", pts, color, marker))
        panels.append(sc.Panel(dtype, sc.Axis("size (elements)", "log2"), sc.Axis("time per call (µs)", "log10"),
                               tuple(series)))
    return sc.Chart("vector_add: time per call", tuple(panels), "GPU time per call against size, per dtype.")


def bandwidth_chart() -> sc.Chart:
    """Two close ceilings near the top and data reaching them: the hard case for ceiling labels."""
    gbps = (10, 90, 600, 2600, 3600, 4100, 4300, 4376, 4380, 4390)
    series = (sc.Series("triton", tuple(sc.Point(n, g) for n, g in zip(SIZES, gbps, strict=True)), sc.VERMILLION,
                        "square"),
              sc.Series("torch", tuple(sc.Point(n, g * 0.98) for n, g in zip(SIZES, gbps, strict=True)), sc.BLUE))
    refs = (sc.RefLine(4814.3, "theoretical 4814 GB/s"),
            sc.RefLine(4253.3, "copy bandwidth (measured) 4253 GB/s", sc.REDDISH_PURPLE, dashed=True))
    panels = tuple(sc.Panel(d, sc.Axis("size (elements)", "log2"), sc.Axis("bandwidth (GB/s)", "linear"), series, refs)
                   for d in ("fp32", "fp16"))
    return sc.Chart("vector_add: achieved memory bandwidth", panels, "Bandwidth against two ceilings.")


def roofline_chart() -> sc.Chart:
    pts = tuple(sc.Point(ai, min(ai * 4.2, 600) * f) for ai, f in
                ((0.083, 0.9), (0.125, 0.85), (0.25, 0.7), (1.25, 0.8), (85, 0.6), (341, 0.7), (1365, 0.66)))
    roofs = (sc.MemoryRoof(4.8143, "memory roof 4814 GB/s"),
             sc.MemoryRoof(4.2533, "measured copy 4253 GB/s", sc.REDDISH_PURPLE, measured=True),
             sc.ComputeRoof(989.4, "fp16/bf16 peak 989 TFLOP/s"), sc.ComputeRoof(494.7, "tf32 peak 495 TFLOP/s"),
             sc.ComputeRoof(66.9, "fp32 peak 67 TFLOP/s"),
             sc.ComputeRoof(684.2, "bf16 measured 684 TFLOP/s", sc.REDDISH_PURPLE, measured=True),
             sc.ComputeRoof(650.1, "fp16 measured 650 TFLOP/s", sc.REDDISH_PURPLE, measured=True),
             sc.ComputeRoof(391.8, "tf32 measured 392 TFLOP/s", sc.REDDISH_PURPLE, measured=True))
    panel = sc.Panel("", sc.Axis("arithmetic intensity (FLOP/byte)"), sc.Axis("TFLOP/s"),
                     (sc.Series("triton", pts, sc.VERMILLION, "square", connect=False),), roofs=roofs)
    return sc.Chart("Roofline", (panel,), "Cases under the roofs.")


def chinese_chart() -> sc.Chart:
    s = sc.Series("triton GPU 时间", tuple(sc.Point(n, n / 1e6 + 1) for n in SIZES), sc.VERMILLION, "square")
    panel = sc.Panel("fp32", sc.Axis("规模（元素数）", "log2"), sc.Axis("每次调用时间（µs）"), (s,),
                     (sc.RefLine(50, "参考线 50 µs（理论）"),))
    return sc.Chart("vector_add：每次调用时间，一个很长的中文标题用来测试自动换行是否正确处理汉字之间的断行，再长一点",
                    (panel,), "中文描述")


CHARTS = {"time": time_chart, "bandwidth": bandwidth_chart, "roofline": roofline_chart, "chinese": chinese_chart}


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def texts(root: ET.Element) -> list[str]:
    """The visible text of every <text>, without its tooltip."""
    return ["".join(t.itertext()) if t.find(f"{NS}title") is None else (t.find(f"{NS}title").tail or "")
            for t in root.iter(f"{NS}text")]


# --------------------------------------------------------------------------- bytes


@pytest.mark.parametrize("name", sorted(CHARTS))
def test_same_spec_same_bytes_and_valid_xml(name):
    chart = CHARTS[name]()
    svg = sc.to_svg(chart)
    assert svg == sc.to_svg(CHARTS[name]())
    root = parse(svg)
    assert root.tag == f"{NS}svg" and root.get("role") == "img" and root.get("aria-label")
    assert root.find(f"{NS}title").text == chart.title and root.find(f"{NS}desc").text == chart.description
    assert re.fullmatch(r"0 0 740 \d+", root.get("viewBox"))
    # No ids (several charts share one HTML page), nothing fetched, no script.
    assert " id=" not in svg and "href" not in svg and "<script" not in svg
    assert svg.startswith("<svg") and "<?xml" not in svg


def test_bytes_do_not_depend_on_the_process():
    # Another interpreter with another hash seed: no set or hash order leaks into the output.
    code = ("import sys; sys.path.insert(0, 'tests'); import test_svgchart as t; from envcheck.render import svgchart;"
            "sys.stdout.write(svgchart.to_svg(t.time_chart()) + svgchart.to_svg(t.roofline_chart()))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout == sc.to_svg(time_chart()) + sc.to_svg(roofline_chart())


def test_coordinates_are_short():
    svg = sc.to_svg(time_chart())
    numbers = re.findall(r"-?\d+\.\d+", re.sub(r"<title>.*?</title>", "", svg))
    assert numbers and all(len(n.split(".")[1]) == 1 for n in numbers)


def test_typical_three_panel_chart_is_small():
    chart = time_chart()
    assert sum(len(s.points) for p in chart.panels for s in p.series) >= 40
    assert len(sc.to_svg(chart).encode()) < 25_000


# --------------------------------------------------------------------------- escaping

HOSTILE = ['<script>alert("x")</script>', "$\\undefinedmacro$", "a & b 'q' \"dq\"", "rtl \u202eevil\u202c end",
           "bell\x07\x1b[31m", "]]><!--", "tab\tand\nnewline"]


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_strings_come_out_as_inert_text(bad):
    series = sc.Series(bad, (sc.Point(1, 2, bad), sc.Point(10, 30)), sc.BLUE)
    chart = sc.Chart(bad, (sc.Panel(bad, sc.Axis(bad), sc.Axis(bad), (series,), (sc.RefLine(20, bad),)),), bad)
    svg = sc.to_svg(chart)
    root = parse(svg)  # valid XML whatever the label
    assert {el.tag for el in root.iter()} <= {f"{NS}{t}" for t in ("svg", "title", "desc", "rect", "path", "g", "text",
                                                                   "circle")}
    shown = sc.clean(bad)
    assert "\u202e" not in shown and "\x07" not in shown and "\x1b" not in shown
    assert root.find(f"{NS}title").text == shown and root.find(f"{NS}desc").text == shown
    assert root.get("aria-label") == f"{shown}. {shown}"
    tips = [t.text for t in root.iter(f"{NS}title")]
    assert shown in tips[1:]  # the point's tooltip
    assert shown in texts(root)  # the legend entry, at least


def test_chart_labels_lose_every_bidi_and_invisible_character_the_escape_module_names():
    from envcheck.render.escape import BIDI, INVISIBLE

    label = "gpu\u202e0\u200b-\u200ematmul\u2060\ufeff"
    series = sc.Series(label, (sc.Point(1, 2, label), sc.Point(10, 30)), sc.BLUE)
    svg = sc.to_svg(sc.Chart(label, (sc.Panel(label, sc.Axis("x"), sc.Axis("y"), (series,)),), label))
    assert not set(BIDI + INVISIBLE) & set(svg)
    assert parse(svg).find(f"{NS}title").text == "gpu0-matmul"


def test_clean_keeps_tab_newline_and_cjk():
    assert sc.clean("a\tb\nc 中文 µs") == "a\tb\nc 中文 µs"
    assert sc.clean("\x00a\x7f\x85\u2066b\ud800") == "ab"


# --------------------------------------------------------------------------- axes


def _random_ranges():
    rng = random.Random(7)
    out = []
    for _ in range(300):
        e = rng.uniform(-6, 12)
        lo = 10**e
        out.append((lo, lo * 10 ** rng.uniform(0, 9)))
    return out


@pytest.mark.parametrize("scale", ["linear", "log10", "log2"])
def test_ticks_are_nice_monotonic_bounded_and_cover_the_data(scale):
    for lo, hi in _random_ranges():
        for max_ticks in (8, 5, 3):
            plan = axes.plan_axis([lo, hi], scale, max_ticks=max_ticks)
            t = plan.ticks
            assert 2 <= len(t) <= max_ticks, (lo, hi, plan)
            assert all(a < b for a, b in itertools.pairwise(t))
            assert plan.lo <= lo and hi <= plan.hi
            assert all(plan.lo <= v <= plan.hi for v in t)
            assert len(set(plan.labels)) == len(t)
            if scale == "linear":
                steps = {Decimal(repr(b)) - Decimal(repr(a)) for a, b in itertools.pairwise(t)}
                assert len(steps) == 1
                (step,) = steps
                assert step.scaleb(-step.adjusted()).normalize() in {1, 2, Decimal("2.5"), 5}
            elif scale == "log2":
                assert all(math.log2(v) == round(math.log2(v)) for v in t)
            else:
                mantissas = {Decimal(repr(v)).scaleb(-Decimal(repr(v)).adjusted()).normalize() for v in t}
                assert mantissas <= {1, 2, 3, 5}


def test_tick_labels_use_one_notation():
    assert axes.plan_axis([2**10, 2**28], "log2").labels == ("4K", "64K", "1M", "16M", "256M")
    assert axes.plan_axis([1.2, 5e4], "log10").labels == ("1", "10", "100", "1k", "10k")
    assert axes.plan_axis([10, 4814], "linear").labels == ("0", "1000", "2000", "3000", "4000", "5000")
    assert axes.plan_axis([1e-7, 1e-3], "log10").labels[0] == "10⁻⁷"
    assert axes.plan_axis([-3, 7], "linear").labels[:2] == ("−4", "−2")


def test_auto_scale_goes_log_past_one_and_a_half_decades():
    assert axes.resolve_scale("auto", [1, 30]) == "linear"
    assert axes.resolve_scale("auto", [1, 40]) == "log10"
    assert axes.resolve_scale("auto", [0, 1e6]) == "linear"  # zero cannot go on a log axis


def test_linear_axis_includes_zero_or_a_wide_span():
    plan = axes.plan_axis([15956, 15970])
    assert plan.lo == 0 and not plan.broken
    narrow = axes.plan_axis([15956, 15970], zero=False)
    assert narrow.broken and narrow.hi - narrow.lo >= 0.2 * 15970
    # 0.1% apart stays a sliver of the height, not a cliff
    assert narrow.frac(15970) - narrow.frac(15956) < 0.01
    # widened towards zero it stops there: no negative ticks for a positive quantity
    assert axes.plan_axis([0.5, 0.55], zero=False).lo >= 0


def test_log_axis_spans_a_decade_at_least():
    plan = axes.plan_axis([15956, 15970], "log10")
    assert plan.hi / plan.lo >= 10
    assert plan.frac(15970) - plan.frac(15956) < 0.01


@pytest.mark.parametrize("scale", ["log2", "log10"])
def test_log_positions_are_monotonic_and_logarithmic(scale):
    plan = axes.plan_axis([1e-3, 1e9], scale)
    vs = [10**k for k in range(-3, 10)]
    fr = [plan.frac(v) for v in vs]
    assert all(a < b for a, b in itertools.pairwise(fr))
    gaps = [b - a for a, b in itertools.pairwise(fr)]
    assert max(gaps) - min(gaps) < 1e-9  # equal ratios, equal distances


def test_log_axis_refuses_non_positive_values():
    with pytest.raises(ValueError, match="positive"):
        axes.plan_axis([0, 10], "log10")
    with pytest.raises(ValueError, match="cannot show 0"):
        sc.Panel("p", sc.Axis("x", "log2"), sc.Axis("y"), (sc.Series("s", (sc.Point(0, 1),), sc.BLUE),))


# --------------------------------------------------------------------------- layout


def _svg_size(svg: str) -> tuple[float, float]:
    root = parse(svg)
    _, _, w, h = map(float, root.get("viewBox").split())
    return w, h


@pytest.mark.parametrize("name", sorted(CHARTS))
@pytest.mark.parametrize("width", [740, 500, 390])
def test_no_text_overlaps_and_all_text_is_inside(name, width):
    chart = CHARTS[name]()
    labels = sc.placed_labels(chart, width=width)
    w, h = _svg_size(sc.to_svg(chart, width=width))
    for lab in labels:
        x0, y0, x1, y1 = lab.box()
        assert 0 <= x0 and x1 <= w and 0 <= y0 and y1 <= h, lab
    for a, b in itertools.combinations(labels, 2):
        assert not sc.overlap(a, b), (a, b)
    assert all(lab.size >= 11 for lab in labels)


def test_tick_labels_are_thinned_until_they_clear():
    # seven decades of wide labels (0.0001 .. 1000) cannot all stand side by side in a narrow plot
    s = sc.Series("s", (sc.Point(1.5e-4, 1.5e-4), sc.Point(900, 900)), sc.BLUE)
    chart = sc.Chart("t", (sc.Panel("", sc.Axis("x", "log10"), sc.Axis("y", "log10"), (s,)),), "d")
    for width in (740, 400, 300):
        ticks = [lab for lab in sc.placed_labels(chart, width=width) if lab.role == "tick"]
        xs = [lab for lab in ticks if lab.anchor == "middle"]
        assert 2 <= len(xs) <= 8
        for a, b in itertools.combinations(ticks, 2):
            assert not sc.overlap(a, b, 6.0 if a.anchor == b.anchor else 2.0), (width, a, b)
    assert len(xs) < 7  # at 300 px some had to go


def test_ceiling_labels_stay_off_markers():
    chart = bandwidth_chart()
    svg = sc.to_svg(chart)
    refs = [lab for lab in sc.placed_labels(chart) if lab.role == "ref"]
    assert {lab.color for lab in refs} == {sc.GREY, sc.REDDISH_PURPLE}
    markers = [(float(m.group(1)), float(m.group(2))) for m in re.finditer(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg)]
    for lab in refs:
        x0, y0, x1, y1 = lab.box()
        assert not any(x0 - 3 < x < x1 + 3 and y0 - 3 < y < y1 + 3 for x, y in markers), lab


def test_ceiling_labels_sit_by_their_lines_inside_the_plots():
    # Two ceilings 12% apart in two narrow facets: the labels still fit inside, each by its own line, the
    # highest above it (the axis leaves room there), none pushed out to a margin column.
    chart = bandwidth_chart()
    svg = sc.to_svg(chart)
    rects = _plot_rects(svg)
    y_theo, y_meas = sorted({float(y) for y in re.findall(r'<path d="M[\d.]+ ([\d.]+)H[\d.]+" stroke="#', svg)})
    for lab in (lab for lab in sc.placed_labels(chart) if lab.role == "ref"):
        x0, y0, x1, y1 = lab.box()
        assert any(rx0 <= x0 and x1 <= rx1 and ry0 <= y0 and y1 <= ry1 for rx0, ry0, rx1, ry1 in rects), lab
        # no label is crossed by a ceiling line
        assert not any(y0 < y < y1 for y in (y_theo, y_meas)), lab
        if lab.text.startswith("theoretical"):
            assert y_theo - 8 < y1 < y_theo
        else:  # by its own line, or stacked over the theoretical label in the room kept above the top line
            assert y_theo < y0 < y_meas + 40 or y1 < y_theo - 10, lab


def test_crowded_ceilings_move_to_a_spread_column():
    labels = sc.placed_labels(roofline_chart())
    roofs = [lab for lab in labels if lab.role == "ref" and not lab.angle]
    assert len(roofs) == 6
    assert len({round(lab.x) for lab in roofs}) == 1  # one column
    ys = [lab.y for lab in roofs]
    peaks = [989.4, 684.2, 650.1, 494.7, 391.8, 66.9]  # top to bottom, the order of their lines
    assert [lab.text.split()[-2] for lab in sorted(roofs, key=lambda lab: lab.y)] == [f"{p:.0f}" for p in peaks]
    assert all(b - a >= sc.REF_SIZE * (sc.ASCENT + sc.DESCENT) for a, b in itertools.pairwise(sorted(ys)))


def test_same_x_points_are_not_joined_by_a_vertical_line():
    # 16384x8192 and 4096x32768 have the same element count
    pts = (sc.Point(2**22, 10), sc.Point(2**25, 20), sc.Point(2**27, 40, "16384×8192"), sc.Point(2**27, 90, "4096×32768"))
    panel = sc.Panel("", sc.Axis("elements", "log2"), sc.Axis("µs", "log10"), (sc.Series("torch", pts, sc.BLUE),))
    svg = sc.to_svg(sc.Chart("t", (panel,), "d"))
    (line,) = [d for d in re.findall(r'<path d="([^"]+)" fill="none" stroke="#0072B2" stroke-width="1.8"', svg)]
    for sub in line.split("M")[1:]:
        xs = [float(p.split()[0]) for p in sub.split("L")]
        assert len(xs) == len(set(xs))
    assert line.count("L") == 1  # only 2^22 -> 2^25 is joined
    assert svg.count("<title>16384×8192</title>") == 1 and svg.count("<title>4096×32768</title>") == 1
    assert '<g fill="#fff" stroke="#0072B2"' in svg  # the second point at 2^27 is drawn hollow


def _plot_rects(svg: str) -> list[tuple[float, float, float, float]]:
    frames = re.findall(r'<path d="M([\d.]+) ([\d.]+)V([\d.]+)H([\d.]+)', svg)
    return [(float(x0), float(y0), float(x1), float(y1)) for x0, y0, y1, x1 in frames]


@pytest.mark.parametrize("name", ["time", "bandwidth", "roofline"])
def test_legend_has_one_entry_per_name_outside_the_plots(name):
    chart = CHARTS[name]()
    svg = sc.to_svg(chart)
    rects = _plot_rects(svg)
    assert len(rects) == len(chart.panels)
    legend = [lab for lab in sc.placed_labels(chart) if lab.role == "legend"]
    names = list(dict.fromkeys(s.name for p in chart.panels for s in p.series))
    assert [lab.text for lab in legend] == names
    for lab in legend:
        x0, y0, x1, y1 = lab.box()
        for rx0, ry0, rx1, ry1 in rects:
            assert x1 < rx0 or x0 > rx1 or y1 < ry0 or y0 > ry1, (lab, (rx0, ry0, rx1, ry1))


def test_chinese_text_is_text_and_wraps_between_characters():
    chart = chinese_chart()
    svg = sc.to_svg(chart)
    shown = texts(parse(svg))
    assert "规模（元素数）" in shown and "triton GPU 时间" in shown
    title_lines = [lab.text for lab in sc.placed_labels(chart) if lab.role == "title"]
    assert len(title_lines) == 2 and "".join(title_lines) == chart.title


def test_text_width_is_wider_for_cjk_and_fit_respects_the_width():
    assert sc.text_width("中文", 12) > sc.text_width("ab", 12)
    assert sc.text_width("W", 12, bold=True) > sc.text_width("W", 12)
    cut = sc.fit("a long label that will not fit", 12, 80)
    assert cut.endswith("…") and sc.text_width(cut, 12) <= 80
    for line in sc.wrap("copy bandwidth (measured) 4253 GB/s", 11.5, 100):
        assert sc.text_width(line, 11.5) <= 100


# --------------------------------------------------------------------------- roofs and the rest


def test_memory_roof_meets_each_compute_roof_at_the_ridge():
    mem = sc.MemoryRoof(4.8, "memory")
    fp16, fp32 = sc.ComputeRoof(989.4, "fp16"), sc.ComputeRoof(66.9, "fp32")
    assert sc.ridge(mem, fp16) == pytest.approx(989.4 / 4.8)
    segs = {r.label: (a, b) for r, a, b in sc.roof_segments((mem, fp16, fp32), 0.01, 1e4)}
    assert segs["memory"] == (0.01, pytest.approx(989.4 / 4.8))
    assert segs["fp16"] == (pytest.approx(989.4 / 4.8), 1e4) and segs["fp32"][0] == pytest.approx(66.9 / 4.8)
    # and in the drawing: the slope ends exactly where the top roof starts
    panel = sc.Panel("", sc.Axis("AI"), sc.Axis("TFLOP/s"),
                     (sc.Series("s", (sc.Point(0.1, 0.3), sc.Point(500, 600)), sc.BLUE, connect=False),),
                     roofs=(sc.MemoryRoof(4.8, "memory", "#111111"), sc.ComputeRoof(989.4, "fp16", "#222222")))
    svg = sc.to_svg(sc.Chart("r", (panel,), "d"))
    mx0, my0, mx1, my1 = map(float, re.search(r'd="M([\d.]+) ([\d.]+)L([\d.]+) ([\d.]+)" stroke="#111111"', svg).groups())
    cx0, cy0, cx1, cy1 = map(float, re.search(r'd="M([\d.]+) ([\d.]+)L([\d.]+) ([\d.]+)" stroke="#222222"', svg).groups())
    assert (mx1, my1) == (cx0, cy0) and cy0 == cy1 and my0 > my1 and mx0 < mx1


def test_measured_roofs_pair_with_the_measured_memory_roof_and_are_dashed():
    roofs = (sc.MemoryRoof(4.8, "t"), sc.MemoryRoof(4.2, "m", measured=True),
             sc.ComputeRoof(650, "cm", measured=True), sc.ComputeRoof(989, "ct"))
    segs = {r.label: (a, b) for r, a, b in sc.roof_segments(roofs, 0.1, 1e4)}
    assert segs["cm"][0] == pytest.approx(650 / 4.2) and segs["ct"][0] == pytest.approx(989 / 4.8)
    assert segs["m"][1] == pytest.approx(650 / 4.2)
    panel = sc.Panel("", sc.Axis("AI"), sc.Axis("y"), (), roofs=roofs)
    svg = sc.to_svg(sc.Chart("r", (panel,), "d"))
    assert svg.count('stroke-dasharray') == 2


def test_roofline_needs_log_axes():
    with pytest.raises(ValueError, match="log axes"):
        sc.Panel("", sc.Axis("AI", "linear"), sc.Axis("y"), (), roofs=(sc.ComputeRoof(1, "c"),))


@pytest.mark.parametrize("series, expected", [
    ((), False),
    ((sc.Series("a", (), sc.BLUE),), False),
    ((sc.Series("a", (sc.Point(1, 1),), sc.BLUE),), False),
    ((sc.Series("a", (sc.Point(1, 1),), sc.BLUE), sc.Series("b", (sc.Point(1, 2),), sc.ORANGE)), False),
    ((sc.Series("a", (sc.Point(1, 1), sc.Point(2, 1)), sc.BLUE),), True),
])
def test_worth_drawing(series, expected):
    assert sc.worth_drawing(sc.Panel("", sc.Axis("x"), sc.Axis("y"), series)) is expected


def test_spec_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="not finite"):
        sc.Point(float("nan"), 1)
    with pytest.raises(ValueError, match="colour"):
        sc.Series("s", (), 'red" onload="x')
    with pytest.raises(ValueError, match="marker"):
        sc.Series("s", (), sc.BLUE, "star")
    with pytest.raises(ValueError, match="scale"):
        sc.Axis("x", "log3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no panels"):
        sc.Chart("t", (), "d")


def test_palette_is_okabe_ito():
    assert sc.PALETTE[:3] == ("#0072B2", "#D55E00", "#009E73")
    assert len(set(sc.PALETTE)) == 8


def test_every_marker_draws():
    series = tuple(sc.Series(m, (sc.Point(1, i + 1), sc.Point(2, i + 2)), sc.PALETTE[i], m)
                   for i, m in enumerate(sc.MARKERS))
    svg = sc.to_svg(sc.Chart("m", (sc.Panel("", sc.Axis("x"), sc.Axis("y"), series),), "d"))
    root = parse(svg)
    assert len([t for t in root.iter(f"{NS}title")]) == 1 + 2 * len(sc.MARKERS)
    assert [lab.text for lab in sc.placed_labels(sc.Chart("m", (sc.Panel("", sc.Axis("x"), sc.Axis("y"), series),),
                                                          "d")) if lab.role == "legend"] == list(sc.MARKERS)
