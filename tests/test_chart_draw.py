"""Charts drawn with matplotlib: deterministic bytes, text kept as (escaped) text, ragged sizes never joined into
cliffs, axes that follow the data without exaggerating it, intervals drawn, PNG for pasting."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from envcheck.render import chart_draw as cd
from envcheck.render import chart_spec as cs
from envcheck.render import chart_style as st

NS = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parent.parent
SIZES = [2**k for k in range(10, 29, 3)]  # 1K .. 256M elements


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{NS}text")]


def time_chart() -> cs.Chart:
    panels = []
    for d, dtype in enumerate(("fp32", "fp16")):
        series = tuple(cs.Series(f"{impl} GPU time", tuple(cs.Point(n, 1.1 + n * (3 - d) / 4e6 * (1 + 0.03 * i))
                                                            for n in SIZES), color, marker)
                       for i, (impl, color, marker) in enumerate((("torch", st.BLUE, "circle"),
                                                                  ("triton", st.VERMILLION, "square"))))
        panels.append(cs.Panel(dtype, cs.Axis("size (elements)", "log2"), cs.Axis("time per call (µs)", "log10"),
                               series, (cs.RefLine(50, "reference 50 µs"),)))
    return cs.Chart("vector_add: time per call", tuple(panels), "GPU time per call against size, per dtype.")


def roofline_chart() -> cs.Chart:
    pts = tuple(cs.Point(ai, min(ai * 4.2, 600) * 0.8) for ai in (0.08, 0.25, 1, 16, 128, 1365))
    roofs = (cs.MemoryRoof(4.8143, "memory roof 4814 GB/s"),
             cs.MemoryRoof(4.2533, "measured copy 4253 GB/s", st.REDDISH_PURPLE, measured=True),
             cs.ComputeRoof(989.4, "fp16/bf16 peak 989 TFLOP/s"), cs.ComputeRoof(66.9, "fp32 peak 67 TFLOP/s"),
             cs.ComputeRoof(684.2, "bf16 measured 684 TFLOP/s", st.REDDISH_PURPLE, measured=True))
    panel = cs.Panel("", cs.Axis("arithmetic intensity (FLOP/byte)"), cs.Axis("TFLOP/s"),
                     (cs.Series("triton", pts, st.VERMILLION, "square", connect=False),), roofs=roofs)
    return cs.Chart("Roofline", (panel,), "Cases under the roofs.")


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("make", [time_chart, roofline_chart])
def test_same_chart_same_bytes_and_valid_xml(make):
    svg = cd.to_svg(make(), "c")
    assert svg == cd.to_svg(make(), "c")
    root = parse(svg)
    assert root.tag == f"{NS}svg" and root.get("role") == "img"
    assert "<?xml" not in svg and "<metadata" not in svg and "Matplotlib" not in svg  # no creator, no date
    assert "<style" not in svg  # matplotlib's page-wide "*{...}" rule would restyle the page it is inlined in


def test_bytes_do_not_depend_on_the_process():
    """A fresh interpreter (another hash seed) writes the same bytes: ids are salted hashes, never random."""
    code = ("import sys; sys.path.insert(0, 'tests'); import test_chart_draw as t; from envcheck.render import "
            "chart_draw as cd; sys.stdout.write(cd.to_svg(t.time_chart(), 'c') + cd.to_svg(t.roofline_chart(), 'r'))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600, check=True)
    assert out.stdout == cd.to_svg(time_chart(), "c") + cd.to_svg(roofline_chart(), "r")


def test_only_referenced_ids_are_kept_and_two_charts_share_none():
    a, b = cd.to_svg(time_chart(), "vector_add_time"), cd.to_svg(time_chart(), "relu_time")
    ids_a, ids_b = set(re.findall(r' id="([^"]+)"', a)), set(re.findall(r' id="([^"]+)"', b))
    assert ids_a and ids_a == set(re.findall(r'(?:url\(#|href="#)([^)"]+)', a))
    assert not ids_a & ids_b  # both inlined in one page: no id clash


# --------------------------------------------------------------------------- text


def test_labels_are_text_in_the_svg():
    root = parse(cd.to_svg(time_chart()))
    shown = texts(root)
    for label in ("vector_add: time per call", "fp32", "fp16", "size (elements)", "time per call (µs)",
                  "torch GPU time", "triton GPU time", "reference 50 µs"):
        assert label in shown, label
    assert root.find(f"{NS}title").text == "vector_add: time per call"
    assert root.find(f"{NS}desc").text == "GPU time per call against size, per dtype."
    assert root.get("style").count("font-family:'DejaVu Sans','Noto Sans CJK SC'") == 1  # CJK fonts reachable
    assert "font-family" not in cd.to_svg(time_chart()).split(">", 1)[1]  # once, on the root


def test_chinese_labels_are_text():
    s = cs.Series("triton GPU 时间", tuple(cs.Point(n, n / 1e6 + 1) for n in SIZES), st.VERMILLION, "square")
    panel = cs.Panel("fp32", cs.Axis("规模（元素数）", "log2"), cs.Axis("每次调用时间（µs）"), (s,),
                     (cs.RefLine(50, "参考线 50 µs（理论）"),))
    shown = texts(parse(cd.to_svg(cs.Chart("vector_add：每次调用时间", (panel,), "说明"))))
    for label in ("vector_add：每次调用时间", "规模（元素数）", "每次调用时间（µs）", "triton GPU 时间", "参考线 50 µs（理论）"):
        assert label in shown, label


HOSTILE = ['<script>alert("x")</script>', "$\\undefinedmacro$", "a & b 'q' \"dq\"", "rtl \u202eevil\u202c end",
           "bell\x07\x1b[31m", "]]><!--"]


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_strings_come_out_as_inert_text(bad):
    series = cs.Series(bad, (cs.Point(1, 2, bad), cs.Point(10, 30)), st.BLUE)
    chart = cs.Chart(bad, (cs.Panel(bad, cs.Axis(bad), cs.Axis(bad), (series,), (cs.RefLine(20, bad),)),), bad)
    svg = cd.to_svg(chart)
    root = parse(svg)  # valid XML whatever the label
    assert not any(el.tag.endswith(("script", "foreignObject")) for el in root.iter())
    shown = cs.clean(bad)
    assert "\u202e" not in svg and "\x07" not in svg and "\x1b" not in svg
    assert root.find(f"{NS}title").text == shown and root.find(f"{NS}desc").text == shown
    assert root.get("aria-label") == f"{shown}. {shown}"
    assert shown in texts(root)  # the legend entry at least, as itself (no mathtext)


def test_chart_labels_show_every_bidi_and_invisible_character_as_an_escape():
    label = "gpu\u202e0\u200b-\u200ematmul\u2060\ufeff"
    series = cs.Series(label, (cs.Point(1, 2, label), cs.Point(10, 30)), st.BLUE)
    svg = cd.to_svg(cs.Chart(label, (cs.Panel(label, cs.Axis("x"), cs.Axis("y"), (series,)),), label))
    assert not set("\u202e\u200b\u200e\u2060\ufeff") & set(svg)
    assert parse(svg).find(f"{NS}title").text == "gpu\\u{202e}0\\u{200b}-\\u{200e}matmul\\u{2060}\\u{feff}"


def test_clean_keeps_tab_newline_and_cjk():
    assert cs.clean("a\tb\nc 中文 µs") == "a\tb\nc 中文 µs"
    assert cs.clean("\x00a\x7f\x85\u2066b\ud800") == "\\u{0000}a\\u{007f}\\u{0085}\\u{2066}b\\u{d800}"


# --------------------------------------------------------------------------- ragged sizes


def _lines(fig):
    return [ln for ax in fig.axes for ln in ax.get_lines()]


def test_ragged_sizes_are_points_not_a_cliff():
    """1000003 elements next to 2^20 and 1000x1001x999 next to 1024^3: never joined by a near-vertical line."""
    xs = [1 << 18, 1 << 20, 1000003, 1 << 22, 2.0 * 1000 * 1001 * 999, 2.0 * 1024**3, 1 << 32]
    pts = tuple(cs.Point(x, 10.0 + i * (5 if x in (1000003, 2.0 * 1000 * 1001 * 999) else 1))
                for i, x in enumerate(xs))
    runs, alone = cd.split_ragged(pts)
    assert [p.x for p in alone] == [1000003, 2.0 * 1000 * 1001 * 999]
    assert [[p.x for p in r] for r in runs] == [[x for x in xs if x not in (1000003, 2.0 * 1000 * 1001 * 999)]]
    panel = cs.Panel("", cs.Axis("x", "log2"), cs.Axis("y"), (cs.Series("s", pts, st.BLUE),))
    fig = cd.figure(cs.Chart("t", (panel,), "d"))
    for ln in _lines(fig):
        x = list(ln.get_xdata())
        if ln.get_linestyle() not in ("None", "none", ""):
            # every joined step moves right by more than the ragged factor: no vertical cliffs
            assert all(b > a * cd.RAGGED for a, b in zip(x, x[1:], strict=False)), x
            assert 1000003 not in x and 2.0 * 1000 * 1001 * 999 not in x
    alone_drawn = [list(ln.get_xdata()) for ln in _lines(fig) if ln.get_linestyle() in ("None", "none", "")]
    assert [1000003, 2.0 * 1000 * 1001 * 999] in alone_drawn


def test_points_at_one_x_without_a_power_of_two_break_the_line():
    pts = tuple(cs.Point(x, y) for x, y in ((1000, 1), (3000, 2), (3000, 5), (9000, 3), (27000, 4)))
    runs, alone = cd.split_ragged(pts)
    assert [p.x for p in alone] == [3000, 3000]
    assert [[p.x for p in r] for r in runs] == [[1000], [9000, 27000]]


def test_the_legend_says_what_a_point_off_the_line_is_only_where_one_is_drawn():
    from envcheck.render.i18n import language, t

    """1000003 elements beside 2^20 is drawn alone, in the opposite fill: the legend's key says what it is."""
    grid = tuple(cs.Point(1 << k, k) for k in range(10, 22, 2))

    def chart(pts):
        return cs.Chart("t", (cs.Panel("", cs.Axis("x", "log2"), cs.Axis("y"), (cs.Series("s", pts, st.BLUE),)),), "d")

    assert [k.label for k in cd.legend_keys(chart(grid))] == ["s"]
    for lang in ("en", "zh-CN"):
        with language(lang):
            keys = cd.legend_keys(chart((*grid, cs.Point(1000003, 3.0))))
            assert [k.label for k in keys] == ["s", t("chart.key.off_grid")]
    assert keys[-1].hollow and not keys[-1].line


# --------------------------------------------------------------------------- axes


def _axes(chart):
    return cd.figure(chart).axes


def test_ratio_axis_follows_the_data_and_draws_every_interval():
    pts = tuple(cs.Point(t, r, None, r - 0.01, r + 0.012) for t, r in ((1.2, 0.97), (10, 1.03), (300, 1.0), (900, 0.99)))
    band = cs.Band(1 / 1.02, 1.02, "practical band (±2%)")
    panel = cs.Panel("op", cs.Axis("baseline time (µs)", "log10"), cs.Axis("ratio", "auto", zero=False, include=(1.0,)),
                     (cs.Series("triton", pts, st.VERMILLION, "square", connect=False),),
                     (cs.RefLine(1.0, "same"),), band=band)
    ax = _axes(cs.Chart("t", (panel,), "d"))[0]
    lo, hi = ax.get_ylim()
    assert 0.8 <= lo < 0.96 and 1.042 < hi <= 1.2  # scaled to the data: not a fixed 0.4 .. 2.5
    assert ax.get_yscale() == "linear"
    bars = [c for c in ax.collections if c.get_gid() == cd.INTERVAL]
    segs = [s for c in bars for s in c.get_segments()]
    assert len(segs) == 4 and all(abs(s[0][1] - (p.low or 0)) < 1e-9 and abs(s[1][1] - (p.high or 0)) < 1e-9
                                  for s, p in zip(segs, pts, strict=True))
    spans = [p for p in ax.patches if p.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
    assert spans  # the practical band
    assert "practical band (±2%)" in texts(parse(cd.to_svg(cs.Chart("t", (panel,), "d"))))


def test_axes_cannot_exaggerate_a_tiny_difference():
    """A 0.1% difference must not fill the plot: a log axis spans a decade at least, a linear one ±10%."""
    pts = tuple(cs.Point(x, 15960 + (x % 3)) for x in (1 << 20, 1 << 22, 1 << 24))
    log = _axes(cs.Chart("t", (cs.Panel("", cs.Axis("x", "log2"), cs.Axis("y", "log10"),
                                        (cs.Series("s", pts, st.BLUE),)),), "d"))[0]
    lo, hi = log.get_ylim()
    assert hi / lo >= 10
    lin = _axes(cs.Chart("t", (cs.Panel("", cs.Axis("x", "log2"), cs.Axis("y", "linear", zero=False),
                                        (cs.Series("s", pts, st.BLUE),)),), "d"))[0]
    lo, hi = lin.get_ylim()
    assert hi - lo >= 0.2 * 15962


@pytest.mark.parametrize("v, expected", [(1024, "1K"), (1 << 20, "1M"), (256 << 20, "256M"), (0.125, "2⁻³"), (1, "1")])
def test_binary_ticks_use_the_project_notation(v, expected):
    assert cd._binary(v) == expected


@pytest.mark.parametrize("v, si, expected", [(0.01, False, "0.01"), (250, False, "250"), (4000, False, "4000"),
                                              (10000, True, "10k"), (1e6, True, "1M"), (2.5e4, True, "25k"),
                                              (1e-6, False, "10⁻⁶"), (0, True, "0")])
def test_decimal_ticks_use_the_project_notation(v, si, expected):
    assert cd._decimal(v, si) == expected


def test_log2_ticks_are_powers_of_two_written_with_binary_prefixes():
    labels = [t for t in texts(parse(cd.to_svg(time_chart()))) if re.fullmatch(r"\d+[KMG]?", t)]
    values = {"1K": 1 << 10, "8K": 1 << 13, "64K": 1 << 16, "512K": 1 << 19, "4M": 1 << 22, "32M": 1 << 25,
              "256M": 1 << 28}
    xs = [lab for lab in labels if lab.endswith(("K", "M", "G"))]
    assert xs and all(cd._power_of_two(values.get(lab, 3)) for lab in xs), xs
    assert len(set(xs)) <= cd.MAX_TICKS + 1


# --------------------------------------------------------------------------- roofs, spec, style


def test_memory_roof_meets_each_compute_roof_at_the_ridge():
    mem = cs.MemoryRoof(4.8, "memory")
    fp16, fp32 = cs.ComputeRoof(989.4, "fp16"), cs.ComputeRoof(66.9, "fp32")
    assert cs.ridge(mem, fp16) == pytest.approx(989.4 / 4.8)
    segs = {r.label: (a, b) for r, a, b in cs.roof_segments((mem, fp16, fp32), 0.01, 1e4)}
    assert segs["memory"] == (0.01, pytest.approx(989.4 / 4.8))
    assert segs["fp16"] == (pytest.approx(989.4 / 4.8), 1e4) and segs["fp32"][0] == pytest.approx(66.9 / 4.8)
    ax = _axes(roofline_chart())[0]
    lines = {(ln.get_color(), ln.get_linestyle()): ln for ln in ax.get_lines()}
    assert any(ls == "--" for _, ls in lines)  # measured roofs dashed
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_measured_roofs_pair_with_the_measured_memory_roof():
    roofs = (cs.MemoryRoof(4.8, "t"), cs.MemoryRoof(4.2, "m", measured=True),
             cs.ComputeRoof(650, "cm", measured=True), cs.ComputeRoof(989, "ct"))
    segs = {r.label: (a, b) for r, a, b in cs.roof_segments(roofs, 0.1, 1e4)}
    assert segs["cm"][0] == pytest.approx(650 / 4.2) and segs["ct"][0] == pytest.approx(989 / 4.8)
    assert segs["m"][1] == pytest.approx(650 / 4.2)


def test_roofline_needs_log_axes():
    with pytest.raises(ValueError, match="log axes"):
        cs.Panel("", cs.Axis("AI", "linear"), cs.Axis("y"), (), roofs=(cs.ComputeRoof(1, "c"),))


@pytest.mark.parametrize("series, expected", [
    ((), False),
    ((cs.Series("a", (), st.BLUE),), False),
    ((cs.Series("a", (cs.Point(1, 1),), st.BLUE),), False),
    ((cs.Series("a", (cs.Point(1, 1),), st.BLUE), cs.Series("b", (cs.Point(1, 2),), st.ORANGE)), False),
    ((cs.Series("a", (cs.Point(1, 1), cs.Point(2, 1)), st.BLUE),), True),
])
def test_worth_drawing(series, expected):
    assert cs.worth_drawing(cs.Panel("", cs.Axis("x"), cs.Axis("y"), series)) is expected


def test_spec_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="not finite"):
        cs.Point(float("nan"), 1)
    with pytest.raises(ValueError, match="interval"):
        cs.Point(1, 1, None, 2, 1)
    with pytest.raises(ValueError, match="colour"):
        cs.Series("s", (), 'red" onload="x')
    with pytest.raises(ValueError, match="marker"):
        cs.Series("s", (), st.BLUE, "star")
    with pytest.raises(ValueError, match="scale"):
        cs.Axis("x", "log3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no panels"):
        cs.Chart("t", (), "d")
    with pytest.raises(ValueError, match="cannot show"):
        cs.Panel("p", cs.Axis("x", "log2"), cs.Axis("y"), (cs.Series("s", (cs.Point(0, 1),), st.BLUE),))


def test_palette_is_okabe_ito():
    assert st.PALETTE[:3] == ("#0072B2", "#D55E00", "#009E73")
    assert len(set(st.PALETTE)) == 8


def test_every_marker_draws_and_the_legend_names_each_series_once():
    series = tuple(cs.Series(m, (cs.Point(1, i + 1), cs.Point(2, i + 2)), st.PALETTE[i], m)
                   for i, m in enumerate(st.MARKERS))
    chart = cs.Chart("m", (cs.Panel("a", cs.Axis("x"), cs.Axis("y"), series),
                           cs.Panel("b", cs.Axis("x"), cs.Axis("y"), series)), "d")
    assert [k.label for k in cd.legend_keys(chart)] == list(st.MARKERS)
    a, b = (cs.Series(n, (cs.Point(1, 1), cs.Point(2, 2)), c) for n, c in (("a", st.BLUE), ("b", st.ORANGE)))
    mixed = cs.Chart("m", (cs.Panel("1", cs.Axis("x"), cs.Axis("y"), (a, b)), cs.Panel("2", cs.Axis("x"), cs.Axis("y"),
                                                                                      (b, a))), "d")
    assert [k.label for k in cd.legend_keys(mixed)] == ["a", "b"]
    markers = {ln.get_marker() for ln in _lines(cd.figure(chart))}
    assert set(st.MARKER_CODES.values()) <= markers


def test_text_stays_legible_on_a_phone():
    """A one-panel chart scaled to a 390 px phone's 370 px column keeps its smallest text at 10 px or more."""
    assert min(st.TICK_SIZE, st.LABEL_SIZE) * 370 / st.PANEL_W >= 10


def test_png_is_a_png():
    png = cd.to_png(time_chart())
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_drawing_in_workers_gives_the_same_bytes():
    jobs = [(time_chart(), f"c{i}") for i in range(6)] + [(roofline_chart(), "r")]
    assert cd.to_svgs(jobs) == [cd.to_svg(c, n) for c, n in jobs]


def test_a_glyph_no_font_has_is_kept_as_text_without_a_warning(recwarn):
    s = cs.Series("gpu \U0009489c", (cs.Point(1, 2), cs.Point(10, 30)), st.BLUE)
    svg = cd.to_svg(cs.Chart("t", (cs.Panel("", cs.Axis("x"), cs.Axis("y"), (s,)),), "d"))
    assert "gpu \U0009489c" in texts(parse(svg))
    assert not [w for w in recwarn if "Glyph" in str(w.message)]


def test_a_time_series_on_a_linear_axis_stays_one_line():
    """Telemetry one second apart (a burn's clocks) is close in ratio but not ragged: one unbroken line."""
    pts = tuple(cs.Point(t, 1980.0 - t % 3) for t in range(1, 120))
    runs, alone = cd.split_ragged(pts, log=False)
    assert not alone and [len(r) for r in runs] == [len(pts)]
    panel = cs.Panel("", cs.Axis("s", "linear"), cs.Axis("MHz", "linear"), (cs.Series("gpu 0", pts, st.BLUE),))
    joined = [ln for ln in _lines(cd.figure(cs.Chart("t", (panel,), "d"))) if len(ln.get_xdata()) == len(pts)]
    assert len(joined) == 1
