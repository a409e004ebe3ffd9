"""The report model: JSON round trip, validation, versioned loading, safe writes."""

from __future__ import annotations

import json

import factories
import pytest

from envcheck import model, summary


def test_round_trip_is_exact():
    r = factories.report()
    assert model.loads(model.dumps(r)) == r


def test_timing_statistics_match_hand_computed_values():
    t = model.Timing.from_samples("cuda_graph", [4.0, 1.0, 3.0, 2.0, 100.0])
    assert (t.median_us, t.q1_us, t.q3_us, t.iqr_us, t.n) == (3.0, 2.0, 4.0, 2.0, 5)
    assert t.cv == pytest.approx(1.7733, rel=1e-3)


def test_fact_cannot_have_value_and_reason():
    with pytest.raises(ValueError):
        model.Fact(value=1, reason="x")


def test_case_rejects_unknown_flag():
    with pytest.raises(ValueError, match="flags"):
        model.Case("relu", "torch", "fp32", "fp32", (8,), "small", 64, 8, "pass", flags=("fast",))


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "not valid JSON"),
        ('{"hello": 1}', "not an envcheck report"),
        ('{"format": "envcheck-report", "schema_version": 99}', "newer than this envcheck"),
        ('{"format": "envcheck-report"}', "schema_version"),
    ],
)
def test_loader_rejects_foreign_and_future_files(tmp_path, text, message):
    p = tmp_path / "r.json"
    p.write_text(text)
    with pytest.raises(model.ReportError, match=message) as e:
        model.load(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_loader_reports_missing_file(tmp_path):
    with pytest.raises(model.ReportError, match="no such file"):
        model.load(tmp_path / "absent.json")


def test_write_new_never_replaces(tmp_path):
    p = tmp_path / "r.json"
    model.write_new(p, "first")
    with pytest.raises(FileExistsError):
        model.write_new(p, "second")
    assert p.read_text() == "first"
    assert [x.name for x in tmp_path.iterdir()] == ["r.json"]


def test_write_new_gives_ordinary_file_permissions(tmp_path):
    import os

    umask = os.umask(0o022)
    try:
        p = model.write_new(tmp_path / "r.json", "x")
    finally:
        os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o644


def test_dump_writes_format_marker(tmp_path):
    p = model.dump(factories.report(), tmp_path / "r.json")
    data = json.loads(p.read_text())
    assert data["format"] == "envcheck-report" and data["schema_version"] == model.SCHEMA_VERSION


def test_summary_counts_and_geomean():
    b = factories.bench()
    tally = summary.overall(b)
    assert tally.cases == len(b.cases) and tally.passed + tally.failed + tally.errors == tally.cases
    assert summary.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert summary.geomean([]) is None
    per = {t.name: t for t in summary.by_op_impl(b)}
    assert set(per) == {"vector_add/triton", "relu/triton", "matmul/triton"}
