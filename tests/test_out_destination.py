"""A bad output destination is one clean line before any work; two snapshots in one second both survive."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import factories
import pytest

from envcheck import cli, model, snapshot
from envcheck.commands import snapshot as snapshot_cmd
from envcheck.probes import collect as collect_mod

ROOT = Path(__file__).resolve().parents[1]
CHECK_REPORT = ROOT / "evidence" / "2026-11-21_2341Z_vm_h200_check.json.gz"


def one_line(err: str) -> str:
    [line] = err.strip().splitlines()
    return line


def test_diff_out_under_a_file_says_what_is_wrong(tmp_path: Path, capsys) -> None:
    (tmp_path / "afile").write_text("mine")
    a = tmp_path / "a.json"
    model.dump(factories.report(), a)
    assert cli.main(["diff", str(a), str(a), "--out", str(tmp_path / "afile" / "x")]) == 2
    line = one_line(capsys.readouterr().err)
    assert "is a file, not a folder" in line and "already exists" not in line
    assert (tmp_path / "afile").read_text() == "mine"


def test_render_out_under_a_file_is_one_clean_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "afile").write_text("mine")
    report = tmp_path / "r.json"
    shutil.copy(CHECK_REPORT, report)
    assert cli.main(["render", str(report), "--out", str(tmp_path / "afile" / "sub")]) == 2
    line = one_line(capsys.readouterr().err)
    assert "afile is a file" in line and "Errno" not in line


@pytest.fixture
def no_probing(monkeypatch: pytest.MonkeyPatch) -> None:
    def probed(*args, **kwargs):
        raise AssertionError("probed before the destination was checked")

    monkeypatch.setattr(collect_mod, "collect", probed)
    monkeypatch.setattr(snapshot, "capture", probed)


@pytest.mark.parametrize("command", [["check", "--out"], ["snapshot", "--out"]])
def test_check_and_snapshot_refuse_an_impossible_folder_before_probing(tmp_path: Path, capsys, no_probing,
                                                                      command: list[str]) -> None:
    (tmp_path / "afile").write_text("mine")
    assert cli.main([*command, str(tmp_path / "afile" / "sub" / "r.json")]) == 2
    assert "part of its path is a file" in one_line(capsys.readouterr().err)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
@pytest.mark.parametrize("command", [["check", "--out"], ["snapshot", "--out"]])
def test_check_and_snapshot_refuse_a_read_only_folder_before_probing(tmp_path: Path, capsys, no_probing,
                                                                    command: list[str]) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    assert cli.main([*command, str(ro / "r.json")]) == 2
    assert "not writable" in one_line(capsys.readouterr().err)


def test_check_and_snapshot_refuse_an_unwritable_folder_before_probing(tmp_path: Path, capsys, no_probing,
                                                                      monkeypatch) -> None:
    """The same refusal where the tests run as root (who may write anywhere): the access check says no."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == ro else real(p, mode, **kw))
    for command in (["check", "--out", str(ro / "r.json")], ["snapshot", "--out", str(ro / "s.json")]):
        assert cli.main(command) == 2
        assert "not writable" in one_line(capsys.readouterr().err)


def test_two_snapshots_in_the_same_second_both_survive(tmp_path: Path, capsys, monkeypatch) -> None:
    snap = snapshot.load(ROOT / "tests" / "fixtures" / "snapshots" / "corpus" / "wsl-4x-rtx4090-torch25.json")
    snap = snapshot.Snapshot(meta={**snap.meta, "captured": "2026-11-25T21:30:00Z"}, host=snap.host, nvml=snap.nvml)
    monkeypatch.setattr(snapshot, "capture", lambda timeout: snap)
    assert cli.main(["snapshot", "--out-dir", str(tmp_path)]) == 0
    assert cli.main(["snapshot", "--out-dir", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    first = snapshot_cmd.default_name(snap.hostname, "2026-11-25T21:30:00Z")
    assert names == sorted([first, first.replace(".json", "-2.json")])
    for name in names:
        snapshot.load(tmp_path / name)


def test_a_snapshot_goes_to_the_reports_folder_as_every_report_and_says_where(tmp_path: Path, capsys,
                                                                               monkeypatch) -> None:
    """One rule for where files go: the reports folder (ENVCHECK_REPORTS_DIR), never the folder the command
    was started in; the path is printed."""
    snap = snapshot.load(ROOT / "tests" / "fixtures" / "snapshots" / "corpus" / "wsl-4x-rtx4090-torch25.json")
    monkeypatch.setattr(snapshot, "capture", lambda timeout: snap)
    here, reports = tmp_path / "here", tmp_path / "reports"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("ENVCHECK_REPORTS_DIR", str(reports))
    assert cli.main(["snapshot"]) == 0
    (written,) = reports.glob("envcheck-snapshot-*.json")
    assert list(here.iterdir()) == [] and str(written) in capsys.readouterr().err
    # history of that folder reads the reports in it; a snapshot is no report and is not listed
    (reports / "2026-11-26_0456Z_vm_h200.json.gz").write_bytes((ROOT / "evidence" / "2026-11-26_0456Z_vm_h200.json.gz")
                                                                 .read_bytes())
    assert cli.main(["history", str(reports)]) == 0
    assert "snapshot" not in capsys.readouterr().err
