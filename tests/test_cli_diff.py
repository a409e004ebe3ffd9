"""envcheck diff / history as the command line runs them: the JSON document, exit codes, one-line errors,
files never overwritten. Through cli.main in this process; the documented document also from ``python -m
envcheck diff`` in a process of its own (the exit status and streams of a real process)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import compare_fixtures as fx
import pytest
from evidence_files import text

from envcheck import cli, model

ROOT = Path(__file__).resolve().parent.parent


def envcheck(*args: str) -> subprocess.CompletedProcess[str]:
    """``envcheck ARGS`` through cli.main in this process, at 200 columns: its exit status and what it printed
    (argparse's usage errors exit: their status)."""
    out, err = io.StringIO(), io.StringIO()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "200"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(list(args))
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return subprocess.CompletedProcess(["envcheck", *args], rc, out.getvalue(), err.getvalue())


def envcheck_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m envcheck ARGS`` in a process of its own."""
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


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path, Path]:
    """The committed H200 runs, and the later one with its relu rows 30% slower."""
    tmp = tmp_path_factory.mktemp("diff")
    slow = fx.scaled(fx.h200_after(), 1.3, fx.keys(fx.h200_after(), op="relu"))
    return fx.H200_BEFORE, fx.H200_AFTER, model.dump(slow, tmp / "slow.json")


def test_json_diff_is_the_documented_document(pair):
    before, after, _ = pair
    proc = envcheck_process("diff", str(before), str(after), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["format"], doc["version"]) == ("envcheck-diff", 2)
    (cmp,) = doc["comparisons"]
    assert cmp["same_machine"] is False and [e["key"] for e in cmp["environment"]] == ["gpu.uuid"]
    # Two GPUs without repeats: no floor covers them, so CI gets every ratio and no call.
    assert {c["verdict"] for c in cmp["cases"]} == {"not judged"} and cmp["noise_floors"] == []


@pytest.mark.slow
def test_fail_on_regression_exit_codes_use_the_honest_intervals(pair):
    before, after, slow = pair
    failing = envcheck("diff", str(after), str(slow), "--format", "json", "--fail-on-regression", "20")
    assert failing.returncode == 1
    assert "regression: relu" in failing.stderr and "slower by more than 20%" in failing.stderr
    doc = json.loads(failing.stdout)
    assert doc["regression_pct"] == 20 and {r["op"] for r in doc["comparisons"][0]["regressions"]} == {"relu"}
    assert envcheck("diff", str(after), str(slow), "--format", "json", "--fail-on-regression", "40").returncode == 0
    # Same PyTorch, another H200: within-run intervals failed this at 5% (matmul torch tf32 +5.8%).
    quiet = envcheck("diff", str(before), str(after), "--format", "json", "--fail-on-regression", "5")
    assert "torch" not in quiet.stderr


def test_three_reports_compare_each_with_the_first(pair):
    before, after, slow = pair
    proc = envcheck("diff", str(before), str(after), str(slow), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [(c["baseline"], c["other"]) for c in doc["comparisons"]] == [
        (before.name, after.name), (before.name, "slow.json")]


def test_missing_file(pair, tmp_path):
    one_line_error(envcheck("diff", str(pair[0]), str(tmp_path / "nope.json")), "diff", "nope.json", "no such file")


def test_corrupt_json(pair, tmp_path):
    bad = tmp_path / "truncated.json"
    bad.write_text(text(pair[0])[:500])
    one_line_error(envcheck("diff", str(pair[0]), str(bad)), "diff", "truncated.json", "not valid JSON")


def test_foreign_json(pair, tmp_path):
    foreign = tmp_path / "package.json"
    foreign.write_text(json.dumps({"name": "left-pad"}))
    one_line_error(envcheck("diff", str(foreign), str(pair[0])), "diff", "package.json", "not an envcheck report")


def test_a_single_report_is_a_usage_error(pair):
    one_line_error(envcheck("diff", str(pair[0])), "diff", "at least two reports")


def test_out_never_overwrites(pair, tmp_path):
    before, after, _ = pair
    out = tmp_path / "diff.json"
    out.write_text("precious")
    one_line_error(envcheck("diff", str(before), str(after), "--format", "json", "--out", str(out)),
                   "diff", str(out), "already exists")
    assert out.read_text() == "precious"
    fresh = tmp_path / "new" / "diff.json"
    proc = envcheck("diff", str(before), str(after), "--format", "json", "--out", str(fresh))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and json.loads(fresh.read_text())["format"] == "envcheck-diff"


def test_history_of_check_reports_only_says_why_there_is_nothing(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "check.json").write_text(text(fx.H200_CHECK))
    (folder / "broken.json").write_text("{")
    proc = envcheck("history", str(folder))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("envcheck history: error: no benchmark results")
    assert any("left out check.json" in x for x in lines) and any("broken.json" in x and "not valid JSON" in x
                                                                  for x in lines)
    assert "Traceback" not in proc.stderr


def test_diff_reads_a_fleet_report_as_one_report_per_node(capsys):
    """A fleet report (here the real one from two nodes simulated on a 2 x H200 machine) is
    compared node by node, each labelled file:host, shaped like that node's own report."""
    from pathlib import Path

    from envcheck import cli

    reports = Path(__file__).resolve().parents[1] / "evidence"
    fleet = reports / "2026-11-22_2149Z_fleet-2x_vm.json.gz"
    assert cli.main(["diff", str(fleet), "--format", "json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    labels = [r["label"] for r in doc["reports"]]
    assert labels == [f"{fleet.name}:vm/0", f"{fleet.name}:vm/1"]
    assert doc["comparisons"][0]["overall"]["count"] > 0


def test_history_reads_a_fleet_report_as_one_report_per_node(capsys):
    """history, like diff, takes a fleet report node by node (it was left out as "without benchmark
    results"); each node joins the history of its machine, and one report is "1 report"."""
    from envcheck import cli

    reports = Path(__file__).resolve().parents[1] / "evidence"
    fleet = reports / "2026-11-22_2149Z_fleet-2x_vm.json.gz"
    assert cli.main(["history", str(fleet)]) == 0
    out, err = capsys.readouterr()
    assert "left out" not in err
    assert f"{fleet.name}:vm/0" in out and f"{fleet.name}:vm/1" in out
    assert cli.main(["history", str(reports / "2026-11-21_2341Z_vm_h200.json.gz")]) == 0
    out, _ = capsys.readouterr()
    assert "1 report, " in out and "1 reports" not in out


def test_diff_of_node_reports_compares_the_gpu_asked_for(capsys):
    """A node report holds one suite per GPU: without --gpu the first is compared and a note says so;
    --gpu N compares GPU N of each; a GPU a report lacks is one line, exit 2."""
    import json

    from envcheck import cli

    node = str(Path(__file__).resolve().parents[1] / "evidence" / "2026-11-22_2147Z_vm_2x-h200_node.json.gz")

    def times(*extra):
        assert cli.main(["diff", node, node, "--format", "json", *extra]) == 0
        out, err = capsys.readouterr()
        return [c["baseline_us"] for c in json.loads(out)["comparisons"][0]["cases"]], err

    first, note = times()
    gpu0, none0 = times("--gpu", "0")
    gpu1, none1 = times("--gpu", "1")
    assert "holds the suites of 2 GPUs" in note and "--gpu N" in note and not none0 and not none1
    assert first == gpu0 and gpu1 != gpu0 and len(gpu1) > 0
    assert cli.main(["diff", node, node, "--gpu", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no results of GPU 3 (its GPUs: 0, 1)" in err
