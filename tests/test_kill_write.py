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
    killed = kill_when(proc, lambda: any(n.startswith(files.STAGE_PREFIX) for n in os.listdir(tmp_path)))
    assert killed
    assert not os.path.lexists(target)
    assert hidden(tmp_path)  # the killed writer's stage: hidden, envcheck's own
    assert all(n.startswith(files.STAGE_PREFIX) for n in hidden(tmp_path))
    files.write_new(tmp_path / "next.json", "{}\n")  # the next run in this folder
    assert hidden(tmp_path) == [] and [p.name for p in visible(tmp_path)] == ["next.json"]


def test_a_live_writers_stage_is_left_alone(tmp_path: Path) -> None:
    """Cleaning removes only what a dead writer left: the stage of a running one (its lock held) stays."""
    with files._stage(tmp_path) as stage:
        (stage / "new" / "r.json").write_text("in progress")
        files.write_new(tmp_path / "other.json", "{}")
        assert (stage / "new" / "r.json").read_text() == "in progress"


def test_a_file_moved_aside_by_a_killed_render_comes_back(tmp_path: Path) -> None:
    """``--force`` moves the old documents into the stage before the new ones are placed: a kill in
    between must not lose them; the next write puts them back."""
    code = ("import os, sys; from pathlib import Path; from envcheck import files\n"
            "with files._stage(Path(sys.argv[1])) as s:\n"
            "    (s / 'old' / 'r.md').write_text(\"# the user's old document\\n\")\n"
            "    os._exit(0)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, check=True, timeout=WAIT_S)
    assert hidden(tmp_path)  # the stage the writer died with
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
        assert all(n.startswith(files.STAGE_PREFIX) for n in hidden(tmp_path))
        for p in visible(tmp_path):
            assert p == report or p.stat().st_size > 0, p
    assert cli.main(["history", str(tmp_path), "--format", "md"]) == 0, capsys.readouterr().err
    with undrawn_charts():
        assert cli.main(["render", str(report), "--force"]) == 0, capsys.readouterr().err
    assert hidden(tmp_path) == []
