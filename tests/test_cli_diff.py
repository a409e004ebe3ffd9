"""envcheck diff / history end to end in a subprocess: exit codes, one-line errors, files never overwritten."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import factories
import pytest

from envcheck import model

ROOT = Path(__file__).resolve().parent.parent


def envcheck(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


def one_line_error(proc: subprocess.CompletedProcess[str], command: str, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"envcheck {command}: error: ")
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0]


@pytest.fixture()
def pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    base = model.dump(factories.report(), tmp_path / "base.json")
    same = model.dump(factories.report(created="2026-11-22T22:00:00Z"), tmp_path / "same.json")
    slow = model.dump(factories.report(scale=1.1, created="2026-11-23T22:00:00Z", driver="580.200.01"),
                      tmp_path / "slow.json")
    return base, same, slow


def test_text_diff_of_a_slowdown(pair):
    base, _, slow = pair
    proc = envcheck("diff", str(base), str(slow))
    assert proc.returncode == 0, proc.stderr
    assert "slow.json vs base.json" in proc.stdout
    assert "580.159.04" in proc.stdout and "580.200.01" in proc.stdout
    assert "\x1b[" not in proc.stdout  # not a terminal: plain text


def test_fail_on_regression_exit_codes(pair):
    base, same, slow = pair
    failing = envcheck("diff", str(base), str(slow), "--fail-on-regression", "5")
    assert failing.returncode == 1
    assert "regression: matmul" in failing.stderr and "slower by more than 5%" in failing.stderr
    assert envcheck("diff", str(base), str(slow), "--fail-on-regression", "20").returncode == 0
    assert envcheck("diff", str(base), str(same), "--fail-on-regression", "1").returncode == 0


def test_three_reports_compare_each_with_the_first(pair):
    base, same, slow = pair
    proc = envcheck("diff", str(base), str(same), str(slow), "--format", "md")
    assert proc.returncode == 0, proc.stderr
    assert "## same.json vs base.json" in proc.stdout and "## slow.json vs base.json" in proc.stdout


def test_missing_file(pair, tmp_path):
    one_line_error(envcheck("diff", str(pair[0]), str(tmp_path / "nope.json")), "diff", "nope.json", "no such file")


def test_corrupt_json(pair, tmp_path):
    bad = tmp_path / "truncated.json"
    bad.write_text(pair[0].read_text()[:500])
    one_line_error(envcheck("diff", str(pair[0]), str(bad)), "diff", "truncated.json", "not valid JSON")


def test_foreign_json(pair, tmp_path):
    foreign = tmp_path / "package.json"
    foreign.write_text(json.dumps({"name": "left-pad"}))
    one_line_error(envcheck("diff", str(foreign), str(pair[0])), "diff", "package.json", "not an envcheck report")


def test_a_single_report_is_a_usage_error(pair):
    one_line_error(envcheck("diff", str(pair[0])), "diff", "at least two reports")


def test_out_never_overwrites(pair, tmp_path):
    base, _, slow = pair
    out = tmp_path / "diff.html"
    out.write_text("precious")
    one_line_error(envcheck("diff", str(base), str(slow), "--format", "html", "--out", str(out)),
                   "diff", str(out), "already exists")
    assert out.read_text() == "precious"
    fresh = tmp_path / "new" / "diff.html"
    proc = envcheck("diff", str(base), str(slow), "--format", "html", "--out", str(fresh))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert fresh.read_text().startswith("<!DOCTYPE html>")


def test_history_of_a_folder_skips_foreign_json_with_a_note(tmp_path):
    folder = tmp_path / "reports"
    model.dump(factories.report(created="2026-11-01T00:00:00Z", driver="575.57"), folder / "r1.json")
    model.dump(factories.report(created="2026-11-15T00:00:00Z", driver="575.57"), folder / "r2.json")
    model.dump(factories.report(created="2026-12-01T00:00:00Z", scale=0.93), folder / "r3.json")
    (folder / "settings.json").write_text("{}")
    proc = envcheck("history", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert "note: skipped" in proc.stderr and "settings.json" in proc.stderr
    assert "matmul torch bf16 got 7.0% faster at 2026-12-01 when driver 575.57 -> 580.159.04" in proc.stdout
    one_line_error(envcheck("history", str(folder / "r1.json"), str(folder / "settings.json")),
                   "history", "settings.json", "not an envcheck report")
    one_line_error(envcheck("history", str(tmp_path / "empty-missing")), "history", "empty-missing")
    md = envcheck("history", str(folder), "--format", "md", "--lang", "zh-CN")
    assert md.returncode == 0 and "阶跃变化" in md.stdout


def test_text_footers_warn_that_intervals_miss_run_to_run_drift(pair):
    base, same, slow = pair
    proc = envcheck("diff", str(base), str(slow))
    assert proc.returncode == 0, proc.stderr
    assert "within-run sampling noise only" in " ".join(proc.stdout.split())
    proc = envcheck("history", str(base), str(same), str(slow))
    assert proc.returncode == 0, proc.stderr
    assert "within-run sampling noise only" in " ".join(proc.stdout.split())
