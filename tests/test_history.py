"""envcheck history: machines told apart by GPU, check reports left out, steps tied to what changed, bad files skipped."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import compare_fixtures as fx
import pytest

from envcheck import model
from envcheck.analysis import analyse
from envcheck.commands.history import collect
from envcheck.compare.history import NO_BENCHMARK, UNREADABLE, histories, history
from envcheck.model import Report

UUID = "GPU-864be31b-1c83-bb06-459b-885fba99fd31"  # the H200 of the later run


def on(r: Report, created: str, uuid: str = UUID) -> Report:
    return dataclasses.replace(fx.with_gpu_fact(r, "uuid", uuid), created=created)


def timeline() -> list[tuple[str, Report]]:
    """One H200 three times, given out of order: the TMA matmul kernels arrive at r2, a
    driver update makes everything 7% faster at r3."""
    r3 = fx.with_fact(fx.scaled(fx.h200_after(), 0.93), "driver", "driver_version", "580.200.01")
    return [
        ("r3.json", on(r3, "2026-12-01T09:00:00Z")),
        ("r1.json", on(fx.h200_before(), "2026-11-01T09:00:00Z")),
        ("r2.json", on(fx.h200_after(), "2026-11-15T09:00:00Z")),
    ]


@pytest.fixture(scope="module")
def h():
    return history(timeline())


def test_reports_are_ordered_by_creation_time(h):
    assert [p.info.label for p in h.points] == ["r1.json", "r2.json", "r3.json"]
    assert h.machine is not None and h.machine.uuids == {UUID}


def test_steps_are_the_real_changes_tied_to_what_changed(h):
    at_tma = [s for s in h.steps if s.index == 1]
    at_driver = [s for s in h.steps if s.index == 2]
    # The TMA kernels: Triton matmul faster, PyTorch's rows (same PyTorch) not a step.
    assert {s.group for s in at_tma if s.direction == "faster"} >= {"matmul triton fp16", "matmul triton bf16"}
    assert not [s for s in at_tma if s.group.split()[1] == "torch"]
    step = next(s for s in at_driver if s.group == "matmul torch bf16")
    assert step.direction == "faster" and step.ratio == pytest.approx(0.93, rel=0.01)
    assert step.change_pct == pytest.approx(7.0, abs=0.5)
    assert [(c.key, c.before, c.after) for c in step.changes] == [("driver.driver_version", "580.159.04", "580.200.01")]
    assert {s.direction for s in at_driver} == {"faster"} and len(at_driver) >= 20


def test_trend_is_relative_to_the_first_report(h):
    first, _, third = h.points
    assert all(o.ratio == 1.0 for o in first.ops)
    vector = third.op("vector_add")
    assert vector.low < vector.ratio < vector.high
    assert [o.op for o in third.ops] == list(h.ops) == ["vector_add", "relu", "matmul", "softmax", "row_sum"]


def test_peaks_and_ceilings_come_from_each_reports_analysis(h):
    r3 = dict(timeline())["r3.json"]
    a = analyse(r3).bench
    point = h.points[2]
    vec = [r for r in a.results if r.case.op == "vector_add" and r.gbps is not None]
    best = max(vec, key=lambda r: r.gbps)
    assert (point.op("vector_add").peak_gbps, point.op("vector_add").peak_gbps_pct) == (best.gbps, best.pct_theoretical)
    mm = max((r for r in a.results if r.case.op == "matmul" and r.tflops), key=lambda r: r.tflops)
    assert (point.op("matmul").peak_tflops, point.op("matmul").peak_tflops_pct) == (mm.tflops, mm.pct_theoretical)
    assert point.op("matmul").peak_gbps is None
    assert point.theoretical_gbps == a.ceilings.get("bandwidth", "theoretical").value
    assert point.copy_gbps == a.ceilings.get("bandwidth", "measured").value


def test_identical_runs_have_no_step():
    r = fx.h200_after()
    assert history([("a", on(r, "2026-11-01T00:00:00Z")), ("b", on(r, "2026-11-02T00:00:00Z"))]).steps == ()


def test_a_whole_machine_slower_with_nothing_changed_is_a_step_without_a_cause():
    r = fx.h200_after()
    h = history([("a", on(r, "2026-11-01T00:00:00Z")), ("b", on(fx.scaled(r, 1.2), "2026-11-02T00:00:00Z"))])
    assert h.steps and all(s.direction == "slower" and s.changes == () for s in h.steps)


SCHEMA_1 = ("2026-11-21_2341Z_vm_h200", "2026-11-22_0057Z_vm_h100-80gb-hbm3", "2026-11-22_0104Z_vm_h200")


def test_the_schema_1_reports_are_three_machines_and_check_reports_are_left_out():
    names = [f"{stem}{suffix}.json.gz" for stem in SCHEMA_1 for suffix in ("", "_check")]
    reports = [(name, fx.load(fx.REPORTS / name)) for name in names]
    hs = histories(reports)
    assert len(hs.machines) == 3  # two H200s (two physical GPUs, both "vm") and an H100
    assert all(len(m.points) == 1 for m in hs.machines)
    assert sorted(x.label for x in hs.left_out) == sorted(p for p, r in reports if r.kind == "check")
    assert {(x.reason, x.detail) for x in hs.left_out} == {(NO_BENCHMARK, "check")}


def test_two_runs_on_one_gpu_are_one_machine_with_two_points():
    names = ("2026-11-22_2139Z_vm_h200.json.gz", "2026-11-22_2143Z_vm_h200.json.gz", "2026-11-22_0104Z_vm_h200.json.gz")
    hs = histories([(n, fx.load(fx.REPORTS / n)) for n in names])
    # Same host name ("vm") and model on all three; the GPU UUIDs say the first two are one GPU.
    assert sorted(len(m.points) for m in hs.machines) == [1, 2]


def test_a_check_report_is_never_the_baseline():
    check = dataclasses.replace(fx.with_gpu_fact(fx.load(fx.H200_CHECK), "uuid", UUID), created="2026-10-01T00:00:00Z")
    hs = histories([("check.json", check), *timeline()])
    (h,) = hs.machines
    assert h.points[0].info.label == "r1.json" and h.points[0].info.kind == "run"
    assert [x.label for x in hs.left_out] == ["check.json"]


def test_one_bad_file_in_a_folder_is_skipped_with_its_error(tmp_path: Path):
    folder = tmp_path / "reports"
    folder.mkdir()
    for label, r in timeline():
        model.dump(r, folder / label)
    (folder / "truncated.json").write_text((folder / "r1.json").read_text()[:400])
    invalid = json.loads((folder / "r2.json").read_text())
    invalid["benches"][0]["cases"][0]["shape"] = [-4]
    (folder / "invalid.json").write_text(json.dumps(invalid))
    os.mkfifo(folder / "fifo.json")
    (folder / "dir.json").mkdir()
    (folder / "notes.txt").write_text("not json")
    reports, left_out = collect([str(folder)])
    assert sorted(label for label, _ in reports) == ["r1.json", "r2.json", "r3.json"]
    why = {x.label: x.detail for x in left_out}
    assert set(why) == {"truncated.json", "invalid.json", "fifo.json", "dir.json"}
    assert all(x.reason == UNREADABLE and "\n" not in x.detail for x in left_out)
    assert "not valid JSON" in why["truncated.json"]
    assert "benches[0].cases[0]" in why["invalid.json"]
    assert "not a regular file" in why["fifo.json"] and "is a directory" in why["dir.json"]
    hs = histories(reports, left_out)
    assert len(hs.machines) == 1 and len(hs.machines[0].points) == 3 and len(hs.left_out) == 4


def test_a_bad_file_named_explicitly_is_an_error(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(model.ReportError, match="bad.json"):
        collect([str(bad)])


def test_each_column_is_one_ops_and_a_report_that_did_not_run_an_op_has_no_value_in_it():
    """Issue 49, item 7: a report was given 1.000x in the column of an op it never ran, and a user op first
    run by a later report had no trend. Columns are keyed by op (its cases matched by op, impl, dtype, size)."""
    ev = Path(__file__).resolve().parents[1] / "evidence"
    suite = model.load(ev / "2026-11-25_2220Z_vm_h100_controls_baseline.json.gz")
    rerun = model.load(ev / "2026-11-25_2220Z_vm_h100_controls_rerun.json.gz")
    user = model.load(ev / "2026-11-25_2223Z_vm_h100_userbench_softmax-wsum.json.gz")
    user = dataclasses.replace(user, benches=(dataclasses.replace(user.benches[0], settings=suite.benches[0].settings),))
    later = dataclasses.replace(user, created="2026-11-25T23:59:00Z")
    h = history([("suite", suite), ("user", user), ("rerun", rerun), ("later", later)])
    assert [p.info.label for p in h.points] == ["suite", "rerun", "user", "later"]
    assert set(h.ops) == {"vector_add", "relu", "softmax_wsum"}
    cell = {(p.info.label, o.op): o.ratio for p in h.points for o in p.ops}
    assert cell[("suite", "softmax_wsum")] is None and cell[("rerun", "softmax_wsum")] is None
    assert cell[("user", "vector_add")] is None and cell[("later", "relu")] is None
    assert cell[("suite", "vector_add")] == 1.0 and cell[("user", "softmax_wsum")] == 1.0
    assert cell[("later", "softmax_wsum")] == pytest.approx(1.0)  # against the first report that ran it
    assert cell[("rerun", "vector_add")] is not None and cell[("rerun", "vector_add")] != 1.0
