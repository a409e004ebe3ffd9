"""Rows timed on the host only (compared on launch time: JAX's, with no GPU time) are called changed only
with a noise floor learned for them from committed negative controls; without one they keep their ratio
and are shown as not judged, outside the family tested and the geometric means."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import compare_fixtures as fx
import pytest
from in_lang import print_diff, render_diff

from envcheck.compare import diff, export, shipped
from envcheck.model import Report
from envcheck.render.terminal.console import capture

REPORTS = fx.REPORTS
H100_2220Z = {k: f"2026-11-25_2220Z_vm_h100_controls_{k}.json.gz" for k in ("baseline", "rerun", "control")}
NOT_JUDGED = diff.NOT_JUDGED


@functools.cache
def _report(name: str) -> Report:
    return fx.load(REPORTS / H100_2220Z[name])


def _cmp(other: str, floors: dict | None = None, base: Report | None = None,
         other_report: Report | None = None) -> diff.Comparison:
    a = base if base is not None else _report("baseline")
    b = other_report if other_report is not None else _report(other)
    return diff.diff([("baseline.json", a), (f"{other}.json", b)], floors=floors).comparisons[0]


def _called(cmp: diff.Comparison) -> set[tuple[str, str]]:
    return {(c.impl, c.op) for c in cmp.cases if c.verdict in ("slower", "faster")}


def test_the_h100_positive_control_calls_no_jax_row_and_still_catches_the_planted_change():
    """The committed positive control of 2026-11-25 (5 repeats a side, JAX in the runs): its 24 JAX rows
    moved by 0.70-0.95x with nothing of JAX changed, 8 of them called faster on the repeats alone. Judged
    with the launch floors shipped for the H100 none is called; every Triton vector add row still is."""
    cmp = _cmp("control")
    jax = [c for c in cmp.cases if c.impl == "jax"]
    assert len(jax) == 24 and all(c.timing == shipped.LAUNCH for c in jax)
    # Each row's repeats, with what of the launch floor moves a whole run where the repeats leave any of it.
    assert all(c.verdict == "same" and c.floor is not None and c.floor.source == "repeats" for c in jax)
    assert sum(c.floor.kind[:1] == (shipped.LAUNCH,) for c in jax) >= 12
    assert _called(cmp) == {("triton", "vector_add")}
    assert sum(c.verdict == "slower" for c in cmp.cases) == 12


def test_without_a_launch_floor_a_host_timed_row_is_not_judged(monkeypatch):
    """The same diff where no floor is shipped for the GPU model (as on an H200 today): the JAX rows keep
    their ratio but get no interval and no verdict; the GPU-time rows are judged on their repeats alone."""
    monkeypatch.setattr(shipped, "for_model", lambda name: None)
    cmp = _cmp("control")
    jax = [c for c in cmp.cases if c.impl == "jax"]
    assert len(jax) == 24 and all(c.verdict == NOT_JUDGED for c in jax)
    assert all(c.ratio is not None and c.low is None and c.high is None and c.floor is None for c in jax)
    assert _called(cmp) == {("triton", "vector_add")}
    assert cmp.tested == 48 and dict(cmp.sources) == {"repeats": 48}
    g = cmp.overall
    assert (g.count, g.not_judged, g.slower, g.same) == (48, 24, 12, 36)
    assert {o.name: o.not_judged for o in cmp.ops} == {"vector_add": 12, "relu": 12}


def test_a_launch_floor_holds_only_for_the_implementations_its_rows_measured():
    """The launch floors were learned from JAX's rows: torch rows compared on launch time (their GPU time
    gone, as when a capture fails) are not judged, JAX's are."""
    def no_gpu_time(r: Report) -> Report:
        cases = tuple(dataclasses.replace(c, gpu=None) if c.impl == "torch" else c for c in r.benches[0].cases)
        return fx.with_cases(r, cases)

    assert shipped.for_model("NVIDIA H100 80GB HBM3").launch_impls == {"jax"}
    cmp = _cmp("rerun", base=no_gpu_time(_report("baseline")), other_report=no_gpu_time(_report("rerun")))
    torch = [c for c in cmp.cases if c.impl == "torch"]
    assert len(torch) == 24 and all(c.timing == shipped.LAUNCH and c.verdict == NOT_JUDGED for c in torch)
    assert all(c.verdict != NOT_JUDGED for c in cmp.cases if c.impl != "torch")


def test_floors_given_to_the_diff_replace_those_shipped():
    """``floors={}``: nothing shipped is used (the JAX rows not judged, the rest on their repeats alone)."""
    cmp = _cmp("rerun", floors={})
    assert cmp.shipped_model is None and cmp.shipped_pairs == ()
    assert {c.verdict for c in cmp.cases if c.impl == "jax"} == {NOT_JUDGED}


def test_a_diff_names_the_launch_controls_its_floors_came_from():
    cmp = _cmp("rerun")
    assert set(shipped.for_model(cmp.base.gpu_name).launch_pairs) <= set(cmp.shipped_pairs)


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_not_judged_rows_are_said_so_in_every_format(monkeypatch, lang):
    monkeypatch.setattr(shipped, "for_model", lambda name: None)
    d = diff.diff([("baseline.json", _report("baseline")), ("control.json", _report("control"))])
    md = render_diff(d, "md", lang)
    text = capture(lambda console: print_diff(console, d, lang), width=200)
    word = {"en": "not judged: no noise floor", "zh-CN": "未作判定：无噪声下限"}[lang]
    split = {"en": "24 not judged: no noise floor covers them.", "zh-CN": "24 行未作判定"}[lang]
    assert md.count(f"| {word} |") == 24 and split in md and split in " ".join(text.split())
    data = export.to_data(d)["comparisons"][0]
    assert data["overall"]["not_judged"] == 24 and data["tested"] == 48
    assert sum(c["verdict"] == NOT_JUDGED and c["low"] is None for c in data["cases"]) == 24


def test_the_learner_takes_only_the_launch_rows_of_a_launch_pair():
    """``noise_floors.py --launch``: the pair's GPU-time rows are left out, its launch rows make the
    launch/... kinds, their implementations the launch_impls."""
    import runpy

    learn = runpy.run_path(str(Path(REPORTS).parent / "tools" / "evidence" / "noise_floors.py"))["learn"]
    doc = learn([], launch=[(str(REPORTS / H100_2220Z["baseline"]), str(REPORTS / H100_2220Z["rerun"]))])
    (m,) = doc["models"].values()
    assert m["impls"] == [] and m["launch_impls"] == ["jax"] and m["pairs"] == []
    assert m["kinds"] and all(k.startswith("launch") for k in m["kinds"])
    assert m["kinds"]["launch"]["rows"] == 24 and m["kinds"]["launch"]["log_sd"] > 0.15
