"""The temp-folder fallback cannot be planted: a fallback folder is used only when it is this user's own."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest
from factories import report as make_report

from envcheck import destination, model, reportname
from envcheck.commands import publish as publish_cmd
from envcheck.commands import run as run_cmd
from envcheck.destination import DestinationError, private_folder


def refuse_out_dir(monkeypatch: pytest.MonkeyPatch, out_dir: Path) -> None:
    real = reportname.write_report

    def read_only(folder, stem, content):
        if folder == out_dir:
            raise PermissionError(13, "Permission denied")
        return real(folder, stem, content)

    monkeypatch.setattr(reportname, "write_report", read_only)


def test_a_planted_symlink_is_skipped_and_the_message_names_where_the_report_went(tmp_path, monkeypatch) -> None:
    theirs = tmp_path / "attacker"
    theirs.mkdir()
    planted = tmp_path / "tmp" / "envcheck-reports"
    planted.parent.mkdir()
    planted.symlink_to(theirs)
    last = tmp_path / "last-resort"
    monkeypatch.setattr(publish_cmd, "fallback_dirs", lambda: [planted, last])
    out_dir = tmp_path / "out"
    refuse_out_dir(monkeypatch, out_dir)
    err = io.StringIO()
    path = publish_cmd.save_json(make_report(), out_dir, "s", err)
    assert list(theirs.iterdir()) == []  # nothing landed in their folder
    assert path is not None and path.parent == last and model.load(path).host == make_report().host
    assert f"saved it in {last}" in err.getvalue() and "symbolic link" in err.getvalue()


def test_a_fallback_folder_is_made_private(tmp_path) -> None:
    folder = tmp_path / "state" / "envcheck" / "reports"
    old = os.umask(0o002)
    try:
        private_folder(folder)
    finally:
        os.umask(old)
    st = os.lstat(folder)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_a_folder_that_is_not_ours_alone_is_refused(tmp_path, kind) -> None:
    folder = tmp_path / "envcheck-reports"
    if kind == "symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "elsewhere")
    else:
        folder.write_text("x")
    with pytest.raises(DestinationError):
        private_folder(folder)


def test_a_folder_of_ours_open_to_others_is_closed_before_use(tmp_path) -> None:
    folder = tmp_path / "envcheck-reports"
    folder.mkdir()
    folder.chmod(0o777)
    private_folder(folder)
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700


def test_a_group_writable_folder_that_cannot_be_closed_is_refused(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "envcheck-reports"
    folder.mkdir()
    folder.chmod(0o777)

    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(destination.os, "chmod", refuse)
    with pytest.raises(DestinationError, match="writable by other users"):
        private_folder(folder)


def test_a_folder_of_another_user_is_refused(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "envcheck-reports"
    folder.mkdir(mode=0o700)
    monkeypatch.setattr(destination.os, "geteuid", lambda: os.lstat(folder).st_uid + 1)
    with pytest.raises(DestinationError, match="belongs to another user"):
        private_folder(folder)


def test_when_no_folder_takes_the_report_stdout_holds_its_json_alone(tmp_path, monkeypatch, capsys) -> None:
    """The last resort (issue 36, item 8): the JSON on stdout and the summary on stderr, so what a user
    saves from stdout (``envcheck run ... > report.json``) is the report, valid JSON, not JSON then text."""
    from test_cli_run import deps, parse

    def full(folder, stem, content):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(publish_cmd, "fallback_dirs", lambda: [])
    monkeypatch.setattr(reportname, "write_report", full)
    rc = run_cmd.execute(parse("--quick", "--ops", "relu", "--out-dir", str(tmp_path / "out")), deps(tmp_path, None))
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert model.loads(out).kind == "run"  # the whole of stdout is the report
    assert "could not be written anywhere" in err and "relu" in err  # the summary went to stderr
