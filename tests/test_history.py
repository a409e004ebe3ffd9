"""envcheck history: ordering, trends, peaks, step changes tied to what changed, mixed-machine warnings."""

from __future__ import annotations

import dataclasses
import re

import factories
import pytest

from envcheck.compare.history import history
from envcheck.render import documents as document
from envcheck.render.compare_view import step_sentence


def timeline():
    """Same machine three times; the third run is 7% faster after a driver update."""
    return [
        ("r3.json", factories.report(created="2026-12-01T09:00:00Z", driver="580.159.04", scale=0.93)),
        ("r1.json", factories.report(created="2026-11-01T09:00:00Z", driver="575.57")),
        ("r2.json", factories.report(created="2026-11-15T09:00:00Z", driver="575.57")),
    ]


def test_reports_are_ordered_by_creation_time():
    h = history(timeline())
    assert [p.info.label for p in h.points] == ["r1.json", "r2.json", "r3.json"]


def test_driver_update_step_is_found_and_tied_to_the_driver_change():
    h = history(timeline())
    assert h.steps, "a 7% change across every case must be a step"
    assert {s.index for s in h.steps} == {2}
    assert {s.direction for s in h.steps} == {"faster"}
    step = next(s for s in h.steps if s.group == "matmul torch bf16")
    assert step.ratio == pytest.approx(0.93, rel=0.01)
    assert step.change_pct == pytest.approx(7.0, abs=0.3)
    assert [(c.label, c.before, c.after) for c in step.changes] == [("driver", "575.57", "580.159.04")]
    sentence = step_sentence(step, "en", str)
    assert sentence == "matmul torch bf16 got 7.0% faster at 2026-12-01 when driver 575.57 -> 580.159.04"
    assert h.mixed is False


def test_trend_is_relative_to_the_first_report():
    h = history(timeline())
    first, second, third = h.points
    assert all(o.ratio == 1.0 for o in first.ops)
    assert all(o.ratio == pytest.approx(1.0) for o in second.ops)
    assert all(o.ratio == pytest.approx(0.93, rel=0.005) for o in third.ops)
    assert [o.op for o in third.ops] == list(h.ops) == ["vector_add", "relu", "matmul"]


def test_peaks_and_copy_bandwidth_come_from_each_report():
    reports = timeline()
    h = history(reports)
    r3 = dict(reports)["r3.json"]
    point = h.points[2]
    vec = point.op("vector_add")
    assert vec.peak_gbps == max(c.gbps for c in r3.bench.cases if c.op == "vector_add")
    mm = point.op("matmul")
    best = max((c for c in r3.bench.cases if c.op == "matmul"), key=lambda c: c.tflops)
    assert mm.peak_tflops == best.tflops
    assert mm.peak_tflops_pct == pytest.approx(100 * best.tflops / r3.bench.ceiling(best.precision, "theoretical").value)
    assert point.copy_gbps == r3.bench.ceiling("bandwidth", "measured").value


def test_identical_runs_have_no_step():
    h = history([("a", factories.report(created="2026-11-01T00:00:00Z")),
                 ("b", factories.report(created="2026-11-02T00:00:00Z"))])
    assert h.steps == ()


def test_change_without_environment_change_says_so():
    h = history([("a", factories.report(created="2026-11-01T00:00:00Z")),
                 ("b", factories.report(created="2026-11-02T00:00:00Z", scale=1.2))])
    assert h.steps and all(s.direction == "slower" and s.changes == () for s in h.steps)
    assert step_sentence(h.steps[0], "en", str).endswith("with no recorded environment change")


def test_mixed_hosts_and_gpus_are_named():
    other = dataclasses.replace(factories.report(created="2026-11-03T00:00:00Z", gpu_name="NVIDIA H100 80GB HBM3"),
                                host="other-box")
    h = history([("a.json", factories.report(created="2026-11-01T00:00:00Z")), ("b.json", other)])
    assert h.mixed
    assert h.hosts == (("gpu-box-1", ("a.json",)), ("other-box", ("b.json",)))
    assert h.gpus == (("NVIDIA H200", ("a.json",)), ("NVIDIA H100 80GB HBM3", ("b.json",)))
    md = document.render_history(h, "md")
    assert "different hosts: gpu-box-1: a.json; other-box: b.json" in md
    assert "different GPU models" in md


def test_documents_escape_machine_strings_and_embed_the_chart():
    evil = "<b onclick=x>box</b>"
    reports = [(label, dataclasses.replace(r, host=evil)) for label, r in timeline()]
    h = history(reports)
    html = document.render_history(h, "html")
    assert "<b onclick" not in html and "&lt;b onclick=x&gt;box&lt;/b&gt;" in html
    assert html.count("<svg") == 1
    md = document.render_history(h, "md")
    assert re.search(r"(?<!\\)<b", md) is None  # every "<" from the machine is backslash-escaped
    assert "\\<b onclick=x\\>box\\</b\\>" in md
    assert "matmul torch bf16 got 7.0% faster at 2026-12-01" in md
    zh = document.render_history(h, "md", "zh-CN")
    assert "阶跃变化" in zh and "快了 7.0%" in zh


def test_single_report_history_is_a_flat_line():
    h = history([("only.json", factories.report())])
    assert len(h.points) == 1 and h.steps == ()
    assert "only.json" in document.render_history(h, "html")


def test_large_changes_read_as_factors():
    h = history([("a", factories.report(created="2026-11-01T00:00:00Z")),
                 ("b", factories.report(created="2026-11-02T00:00:00Z", scale=3.0))])
    sentence = step_sentence(h.steps[0], "en", str)
    assert "got 3× slower at 2026-11-02" in sentence


def test_vector_ops_without_a_bandwidth_ceiling_still_report_bandwidth():
    """A CPU run has no bandwidth ceiling (no pct_theoretical): low-intensity ops still peak in GB/s."""
    r = factories.report()
    cpu_cases = tuple(dataclasses.replace(c, pct_theoretical=None, pct_measured=None) for c in r.bench.cases)
    r = dataclasses.replace(r, bench=dataclasses.replace(r.bench, cases=cpu_cases, ceilings=()))
    point = history([("cpu.json", r)]).points[0]
    assert point.op("vector_add").peak_gbps is not None and point.op("vector_add").peak_tflops is None
    assert point.op("vector_add").peak_gbps_pct is None
    assert point.op("matmul").peak_tflops is not None and point.op("matmul").peak_tflops_pct is None
    assert point.copy_gbps is None


def test_a_step_after_a_change_of_run_settings_names_them():
    a = factories.report(created="2026-11-01T00:00:00Z")
    b = factories.report(created="2026-11-02T00:00:00Z", scale=0.8, seed=1)
    b = dataclasses.replace(b, bench=dataclasses.replace(b.bench, settings={**b.bench.settings, "quick": True}))
    h = history([("a", a), ("b", b)])
    assert h.steps
    text = document.render_history(h, "md")
    assert "envcheck run settings changed (quick)" in text
    assert "no recorded environment change" not in text


@pytest.mark.parametrize(("lang", "needle"), [("en", "within-run sampling noise only"), ("zh-CN", "运行内的采样噪声")])
@pytest.mark.parametrize("fmt", ["md", "html"])
def test_method_note_warns_that_intervals_miss_run_to_run_drift(lang, needle, fmt):
    assert needle in document.render_history(history(timeline()), fmt, lang)
