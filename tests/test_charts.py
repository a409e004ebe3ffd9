"""Charts: the right charts for the data, deterministic SVG bytes, no external references."""

from __future__ import annotations

import dataclasses
import re

import pytest
from factories import bench, report

from envcheck.render import charts as ch


@pytest.fixture(scope="module")
def factory_report():
    return report()


def test_plan_for_factory_run(factory_report):
    names = [p.name for p in ch.plan(factory_report)]
    assert names == [
        "vector_add_time", "vector_add_speedup", "vector_add_bandwidth",
        "relu_time", "relu_speedup", "relu_bandwidth",
        "matmul_time", "matmul_speedup", "matmul_tflops",
        "roofline",
    ]


def test_plan_without_bench_or_speedups():
    r = report()
    assert ch.plan(dataclasses.replace(r, bench=None)) == []
    torch_only = dataclasses.replace(r.bench, cases=tuple(c for c in r.bench.cases if c.impl == "torch"))
    kinds = {p.kind for p in ch.plan(dataclasses.replace(r, bench=torch_only))}
    assert "speedup" not in kinds and "time" in kinds


@pytest.mark.parametrize("name", ["vector_add_bandwidth", "matmul_tflops", "roofline"])
def test_drawing_twice_gives_identical_bytes(factory_report, name):
    (p,) = [p for p in ch.plan(factory_report) if p.name == name]
    assert ch.draw(factory_report, p).svg == ch.draw(factory_report, p).svg


def test_svg_is_standalone_and_has_no_date_or_external_reference(factory_report):
    chart = ch.draw(factory_report, ch.plan(factory_report)[0])
    svg = chart.svg
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "<?xml" not in svg and "<!DOCTYPE" not in svg and "<metadata>" not in svg
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg
    # the only URLs left are XML namespace names, never fetched
    urls = set(re.findall(r'https?://[^"\s]+', svg))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
    assert not re.search(r'(?:xlink:)?href="(?!#)', svg)  # internal references only
    assert "<text" not in svg  # glyphs are paths: identical wherever it is viewed


def test_implementations_keep_their_colour_in_every_chart(factory_report):
    for p in ch.plan(factory_report):
        svg = ch.draw(factory_report, p).svg.lower()
        assert ch.IMPL_COLORS["triton"].lower() in svg, p.name
        assert ch.IMPL_COLORS["torch"].lower() in svg, p.name


def test_zh_cn_charts_keep_english_text_but_translated_title(factory_report):
    p = ch.plan(factory_report)[0]
    en, zh = ch.draw(factory_report, p, "en"), ch.draw(factory_report, p, "zh-CN")
    assert en.svg == zh.svg  # DejaVu Sans has no CJK glyphs: the chart text stays English
    assert zh.title != en.title and "vector_add" in zh.title


def test_bandwidth_chart_draws_both_ceilings(factory_report):
    b = factory_report.bench
    (p,) = [p for p in ch.plan(factory_report) if p.name == "vector_add_bandwidth"]
    svg_both = ch.draw(factory_report, p).svg
    no_measured = dataclasses.replace(b, ceilings=tuple(c for c in b.ceilings if c.kind != "measured"))
    svg_one = ch.draw(dataclasses.replace(factory_report, bench=no_measured), p).svg
    assert svg_both != svg_one
    assert ch.MEASURED_COLOR.lower() in svg_both.lower() and ch.MEASURED_COLOR.lower() not in svg_one.lower()


def test_peaks_with_equal_values_share_one_roof():
    peaks = ch._peaks(bench().ceilings)
    assert [p.name for p in peaks] == ["fp16/bf16", "tf32", "fp32"]


def test_errored_cases_without_times_are_left_out():
    r = report()
    b = r.bench
    first = b.cases[0]
    broken = dataclasses.replace(first, status="error", gpu=None, launch=None, gbps=None, message="compile failed")
    r2 = dataclasses.replace(r, bench=dataclasses.replace(b, cases=(broken, *b.cases[1:])))
    for p in ch.plan(r2):
        assert ch.draw(r2, p).svg.startswith("<svg")
