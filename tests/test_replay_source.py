"""A replay says what it replays: the banner in text, ``replayed_from`` and the capture's time in JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envcheck import cli, model

CORPUS = Path(__file__).parent / "fixtures" / "snapshots" / "corpus"
BASE = CORPUS / "wsl-4x-rtx4090-torch25.json"
CAPTURED = "2026-03-04T05:06:07Z"


def dated(tmp_path: Path, captured: str | None = CAPTURED, host: str = "wsl-4090") -> Path:
    data = json.loads(BASE.read_text())
    data["meta"]["captured"] = captured
    data["meta"]["host"] = host
    path = tmp_path / "the-snapshot.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("command", ["check", "probe"])
def test_the_json_names_the_snapshot_and_carries_the_capture_time(tmp_path: Path, capsys, command: str) -> None:
    snap = dated(tmp_path)
    cli.main([command, "--replay", str(snap), "--format", "json"])
    report = model.loads(capsys.readouterr().out)
    src = report.replayed_from
    assert src is not None and (src.file, src.host, src.captured) == ("the-snapshot.json", "wsl-4090", CAPTURED)
    assert report.created == CAPTURED and src.replayed != CAPTURED  # both times, each named
    assert str(tmp_path) not in json.dumps(model.to_dict(report))  # the name, not this machine's folder


@pytest.mark.parametrize("command", ["check", "probe"])
def test_the_text_says_whose_machine_and_when_not_a_probe_of_this_one(tmp_path: Path, capsys, command: str) -> None:
    cli.main([command, "--replay", str(dated(tmp_path))])
    out = capsys.readouterr().out
    first = out.strip().splitlines()[0]
    assert "the-snapshot.json" in first and "wsl-4090" in first and CAPTURED in first and "not this machine" in first
    assert "probed in" not in out and "replayed from a snapshot in" in out


def test_an_undated_snapshot_says_its_time_is_unknown_and_keeps_the_replay_time(tmp_path: Path, capsys) -> None:
    cli.main(["probe", "--replay", str(dated(tmp_path, captured=None)), "--format", "json"])
    report = model.loads(capsys.readouterr().out)
    assert report.replayed_from.captured is None and report.created == report.replayed_from.replayed
    cli.main(["probe", "--replay", str(dated(tmp_path, captured=None))])
    assert "capture time not recorded" in capsys.readouterr().out


def test_a_capture_time_that_is_not_a_time_is_refused(tmp_path: Path, capsys) -> None:
    assert cli.main(["probe", "--replay", str(dated(tmp_path, captured="<script>"))]) == 2
    assert "meta.captured" in capsys.readouterr().err


def test_this_machine_is_no_replay(capsys) -> None:
    cli.main(["probe", "--format", "json"])
    assert model.loads(capsys.readouterr().out).replayed_from is None


def test_a_hostile_snapshot_host_is_shown_as_text_in_the_banner(tmp_path: Path, capsys) -> None:
    cli.main(["probe", "--replay", str(dated(tmp_path, host="[bold]x\x1b[2J\u202e"))])
    first = capsys.readouterr().out.splitlines()[0]
    assert "[bold]x" in first and "\x1b" not in first and "\u202e" not in first


def test_a_report_without_replayed_from_loads_as_before() -> None:
    """The field is optional: every committed report still loads, without it."""
    for path in sorted((Path(__file__).resolve().parents[1] / "evidence").glob("*_check.json.gz")):
        assert model.load(path).replayed_from is None


def test_anonymize_hides_the_snapshot_host_in_the_file_name_too(tmp_path: Path, capsys, monkeypatch) -> None:
    snap = dated(tmp_path, host="labbox7")
    named = snap.rename(tmp_path / "envcheck-snapshot-labbox7-20260304T050607Z.json")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    cli.main(["check", "--replay", str(named), "--anonymize", "--format", "json"])
    out = capsys.readouterr().out
    report = model.loads(out)
    assert "labbox7" not in out and report.replayed_from.host == report.host != "labbox7"
    assert report.replayed_from.file.startswith("envcheck-snapshot-host-")
