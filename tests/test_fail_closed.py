"""A failing machine never reads healthy (issue 36, item 1).

A check group that cannot run is a failure of its own ("could not be evaluated"), in every view
and in the verdict; a newline (or any control character) in a machine string (a GPU name, the
driver version, Python's include folder, Triton's location) is shown as an escape where the
finding is built, so the rule still runs and a failing check still fails: on the health line,
in JUnit, in Prometheus and in the exit status. Snapshots of the committed corpus, replayed
in-process.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from envcheck import checks as checks_pkg
from envcheck import cli, model

CORPUS = Path(__file__).parent / "fixtures" / "snapshots" / "corpus"
A100 = json.loads((CORPUS / "linux-a100-driver-535-torch-cu124.json").read_text())


def _without_sm80(snap: dict[str, Any]) -> dict[str, Any]:
    """The A100 snapshot with torch's build lacking sm_80: its architecture check fails."""
    out = copy.deepcopy(snap)
    run = out["host"]["runs"]["torch_runtime"]
    assert '"sm_80", ' in run["stdout"]
    run["stdout"] = run["stdout"].replace('"sm_80", ', "")
    return out


def _planted(snap: dict[str, Any], text: str) -> dict[str, Any]:
    """``text`` appended to the machine strings the issue names (GPU name, driver version, Python's
    include folder, Triton's and torch's location)."""
    out = copy.deepcopy(snap)
    out["nvml"]["gpus"][0]["nvmlDeviceGetName"]["value"] += text
    out["nvml"]["nvmlSystemGetDriverVersion"]["value"] += text
    out["host"]["python"]["include_dir"] += text
    for name in ("triton", "torch"):
        out["host"]["packages"][name]["location"] += text
    return out


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], snap: dict[str, Any], fmt: str) -> tuple[int, str]:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    rc = cli.main(["check", "--replay", str(path), "--format", fmt])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out


def _verdict_ok(prom: str) -> float:
    [fam] = [f for f in text_string_to_metric_families(prom) if f.name == "envcheck_verdict_ok"]
    return fam.samples[0].value


def _junit_failures(xml: str) -> list[str]:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml)
    return [tc.get("name") or "" for tc in root.iter("testcase") if tc.find("failure") is not None]


def _assert_failing_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str], snap: dict[str, Any],
                               check_id: str) -> None:
    rc, line = _check(tmp_path, capsys, snap, "health")
    assert rc == 1 and line.startswith("[node_problem] ") and line.count("\n") == 1, line
    rc, xml = _check(tmp_path, capsys, snap, "junit")
    assert rc == 1 and any(check_id in name for name in _junit_failures(xml)), xml
    rc, prom = _check(tmp_path, capsys, snap, "prometheus")
    assert rc == 1 and _verdict_ok(prom) == 0.0
    rc, text = _check(tmp_path, capsys, snap, "json")
    report = model.loads(text)
    assert rc == 1 and any(c.id.startswith(check_id) and c.status == "fail" for c in report.checks)


def test_a_check_group_that_cannot_run_fails_in_every_view(tmp_path, capsys, monkeypatch) -> None:
    def broken(env: model.Environment) -> list[model.Check]:
        raise RuntimeError("cannot read\nthe second line")

    real = checks_pkg._rules()
    monkeypatch.setattr(checks_pkg, "_rules", lambda: tuple((s, broken if s == "torch" else r) for s, r in real))
    _assert_failing_everywhere(tmp_path, capsys, A100, "torch.internal")
    rc, text = _check(tmp_path, capsys, A100, "json")
    [crashed] = [c for c in model.loads(text).checks if c.id == "torch.internal"]
    assert "could not be evaluated" in crashed.finding and "RuntimeError: cannot read" in crashed.finding
    assert "second line" not in crashed.finding


@pytest.mark.parametrize("planted", ["\nX", "\r\n[node_problem] fake", "\x1b[2J\x85\u2028", "\u202eevil"])
def test_a_control_character_in_machine_strings_keeps_a_failing_check_failing(tmp_path, capsys, planted) -> None:
    snap = _planted(_without_sm80(A100), planted)
    _assert_failing_everywhere(tmp_path, capsys, snap, "torch.arch")
    rc, text = _check(tmp_path, capsys, snap, "json")
    report = model.loads(text)
    assert not [c for c in report.checks if c.id.endswith(".internal")], "no rule stopped on a machine string"
    arch = next(c for c in report.checks if c.id.startswith("torch.arch"))
    assert "\n" not in arch.finding and "\\u{000a}" in arch.finding if "\n" in planted else True


def test_a_healthy_machine_with_a_newline_in_its_gpu_name_still_passes(tmp_path, capsys) -> None:
    snap = copy.deepcopy(A100)
    snap["nvml"]["gpus"][0]["nvmlDeviceGetName"]["value"] += "\nX"
    rc, line = _check(tmp_path, capsys, snap, "health")
    assert (rc, line) == (0, "OK\n")


def test_a_report_recorded_with_a_crashed_group_as_a_warning_reads_as_a_failure(tmp_path) -> None:
    """envcheck before issue 36 recorded a rule that could not run as a warning: it loads as a failure."""
    from envcheck.analysis import analyse
    from envcheck.analysis.verdict import verdict
    from envcheck.render.health import health_line

    data = json.loads((Path(__file__).parent / "golden" / "h200_small.json").read_text())
    data["checks"].append({"id": "gpu.internal", "status": "warn", "title": "gpu checks",
                           "finding": "the gpu checks crashed: ValueError: a finding is one line"})
    report = model.loads(json.dumps(data))
    assert [c.status for c in report.checks if c.id == "gpu.internal"] == ["fail"]
    assert not verdict(analyse(report)).ok and health_line(analyse(report))[1] == 1
