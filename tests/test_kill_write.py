"""``kill -9`` at the worst moments of a write: a report file is complete or absent, and the next run cleans up.

A child process writes (``files.write_new``, ``files.write_set``, the real ``envcheck render``);
the test watches the folder and kills the child with SIGKILL the instant something appears: the
target's name (where the old writer had claimed it with an empty file), a hidden temporary (in the
middle of staging a render). What is visible afterwards must be whole; the temporaries a killed
writer leaves are envcheck's own, ignored by ``history``, and removed by the next write there.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from envcheck import cli, files

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "evidence" / "2026-11-21_2341Z_vm_h200.json.gz"
SIZE = 24 << 20  # large enough that writing and flushing it takes a while: a wide window to hit
WAIT_S = 120.0


def child(code: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def kill_when(proc: subprocess.Popen[bytes], seen: Callable[[], bool]) -> bool:
    """SIGKILL ``proc`` the moment ``seen()`` holds; False when it finished first."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if seen():
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=WAIT_S)
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.001)  # a look a millisecond: the writes awaited take longer; a busy loop took a core
    proc.kill()
    proc.wait(timeout=WAIT_S)
    raise AssertionError("the child neither finished nor showed what was awaited")


def visible(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if not any(part.startswith(".") for part in p.relative_to(folder).parts))


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


WRITE_NEW = "from envcheck import files; files.write_new({target!r}, b'x' * {size})"


@pytest.mark.parametrize("trial", range(3))
def test_a_report_name_appears_only_with_the_whole_file(tmp_path: Path, trial: int) -> None:
    target = tmp_path / "r.json"
    proc = child(WRITE_NEW.format(target=str(target), size=SIZE))
    kill_when(proc, lambda: os.path.lexists(target))
    # The old writer claimed the name with an empty file first: a kill here left a 0-byte report.
    assert target.stat().st_size == SIZE


@pytest.mark.parametrize("trial", range(2))
def test_a_kill_while_the_content_is_written_leaves_nothing_visible_and_the_next_write_cleans_up(
        tmp_path: Path, trial: int) -> None:
    target = tmp_path / "r.json"
    proc = child(WRITE_NEW.format(target=str(target), size=SIZE))
    killed = kill_when(proc, lambda: any(n.startswith(".r.json.") for n in os.listdir(tmp_path)))
    assert killed
    assert not os.path.lexists(target)
    assert hidden(tmp_path)  # the killed writer's temporary: hidden, envcheck's own
    assert all(files.is_temporary(n) for n in hidden(tmp_path))
    files.write_new(tmp_path / "next.json", "{}\n")  # the next run in this folder
    assert hidden(tmp_path) == [] and [p.name for p in visible(tmp_path)] == ["next.json"]


def test_a_live_writers_temporary_is_left_alone(tmp_path: Path) -> None:
    """Cleaning removes only what a dead process left: a temporary of a running one stays."""
    busy = tmp_path / f".r.json.{os.getpid()}-{files._host_tag()}-0123abcd.tmp"
    busy.write_text("in progress")
    files.write_new(tmp_path / "other.json", "{}")
    assert busy.exists()


def test_a_file_renamed_aside_by_a_killed_render_comes_back(tmp_path: Path) -> None:
    """``--force`` renames the old document aside before the new one is placed: a kill in between
    must not lose it; the next write puts it back."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    aside = tmp_path / f".r.md.{int(dead.stdout)}-{files._host_tag()}-0123abcd.old"
    aside.write_text("# the user's old document\n")
    files.write_new(tmp_path / "r.json", "{}")
    assert (tmp_path / "r.md").read_text() == "# the user's old document\n" and hidden(tmp_path) == []


SET = """
from pathlib import Path
from envcheck import files
d = Path({folder!r})
files.write_set(files.FileSet(files={{d / "r.md": b"m" * {size}, d / "r.html": b"h" * {size}}},
                              folders={{d / "r_charts": {{"a.svg": b"a" * {size}, "b.svg": b"b" * {size}}}}}))
"""


@pytest.mark.parametrize("moment", ["staging", "placing"])
def test_a_kill_during_a_render_set_leaves_only_whole_files_and_the_next_run_cleans_up(
        tmp_path: Path, moment: str) -> None:
    proc = child(SET.format(folder=str(tmp_path), size=SIZE // 4))
    if moment == "staging":
        killed = kill_when(proc, lambda: any(n.endswith(".tmp") for n in os.listdir(tmp_path)))
    else:
        killed = kill_when(proc, lambda: any(not n.startswith(".") for n in os.listdir(tmp_path)))
    assert killed
    for p in visible(tmp_path):
        if p.is_file():
            assert p.stat().st_size == SIZE // 4, p
    files.write_new(tmp_path / "next.json", "{}\n")
    assert hidden(tmp_path) == []


@pytest.mark.slow  # a real render process killed (~5 s); test_set_journal kills at every step fast
def test_envcheck_render_killed_mid_render_then_run_again(tmp_path: Path, capsys, undrawn_charts) -> None:
    """The issue's case: hidden .md/.html/_charts temporaries left by a killed render, never cleaned.
    After a kill, ``history`` does not count them and a second render succeeds and leaves none (both through
    cli.main in this process; the second render's charts are placeholders, written the same way)."""
    report = tmp_path / REPORT.name
    shutil.copy(REPORT, report)
    code = f"import sys; from envcheck import cli; sys.exit(cli.main(['render', {str(report)!r}]))"
    proc = child(code)
    killed = kill_when(proc, lambda: any(n.startswith(".") for n in os.listdir(tmp_path)))
    if killed:
        assert all(files.is_temporary(n) for n in hidden(tmp_path))
        for p in visible(tmp_path):
            assert p == report or p.stat().st_size > 0, p
    assert cli.main(["history", str(tmp_path), "--format", "md"]) == 0, capsys.readouterr().err
    with undrawn_charts():
        assert cli.main(["render", str(report), "--force"]) == 0, capsys.readouterr().err
    assert hidden(tmp_path) == []


def test_an_older_envcheck_temporary_goes_once_stale_and_a_users_lookalike_stays(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """Temporaries of the older naming (no process id) are judged by age; only report-set names count."""
    stale = tmp_path / ".r.html.0123abcd.tmp"
    fresh = tmp_path / ".r.md.0123abcd.tmp"
    users = tmp_path / ".notes.0123abcd.tmp"
    for p in (stale, fresh, users):
        p.write_text("x")
    old = {stale.name, users.name}
    real_lstat = os.lstat

    class Aged:  # an hour and more since these were last touched (ctime cannot be set back)
        def __init__(self, st: os.stat_result) -> None:
            self.st_ctime = st.st_ctime - 2 * files.STALE_AFTER_S
            self.st_mode = st.st_mode

    def lstat(path, *args, **kwargs):
        st = real_lstat(path, *args, **kwargs)
        return Aged(st) if os.path.basename(path) in old else st

    monkeypatch.setattr(files.os, "lstat", lstat)
    files.write_new(tmp_path / "r.json", "{}")
    assert not stale.exists() and fresh.exists() and users.exists()
