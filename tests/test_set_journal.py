"""A report's documents are replaced all or nothing even when the writer is killed between two of its
renames (issue 36, item 9): the next envcheck write into the folder finishes or undoes the set, from
the killed writer's own stage only (issue 46, item 1).

Each trial forks a writer that dies (``os._exit``: no cleanup, like ``kill -9``) just before its k-th
change to the folder, for every k until one finishes; the parent then runs the recovery every write
does (``clean_stale``) and finds the old set or the new one, whole, and nothing hidden.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from envcheck import files

OLD = {"r.md": "old md", "r.html": "old html", "r_charts/a.svg": "old a"}
NEW = {"r.md": "new md", "r.html": "new html", "r_charts/a.svg": "new a", "r_charts/b.svg": "new b"}
KILLED = 77


def state(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def old_set(folder: Path) -> None:
    (folder / "r_charts").mkdir()
    for name, text in OLD.items():
        (folder / name).write_text(text)


def new_set(folder: Path) -> files.FileSet:
    return files.FileSet(files={folder / "r.md": NEW["r.md"], folder / "r.html": NEW["r.html"]},
                         folders={folder / "r_charts": {"a.svg": NEW["r_charts/a.svg"],
                                                        "b.svg": NEW["r_charts/b.svg"]}})


def _dying_at(k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the child: every change to the folder counts; the k-th never happens, the process ends there."""
    count = [0]

    def counted(real: Callable[..., object]) -> Callable[..., object]:
        def step(*args: object, **kwargs: object) -> object:
            count[0] += 1
            if count[0] == k:
                os._exit(KILLED)
            return real(*args, **kwargs)
        return step

    for name in ("rename", "replace", "unlink", "rmdir", "mkdir"):
        monkeypatch.setattr(os, name, counted(getattr(os, name)))
    for name in ("rename_noreplace", "_write_file", "_remove"):
        monkeypatch.setattr(files, name, counted(getattr(files, name)))


def killed_writer(folder: Path, k: int, monkeypatch: pytest.MonkeyPatch, renameat2: bool) -> bool:
    """Fork a ``write_set(force=True)`` that dies before its k-th change; True when it died."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            if not renameat2:
                monkeypatch.setattr(files, "_RENAMEAT2", None)
            _dying_at(k, monkeypatch)
            files.write_set(new_set(folder), force=True)
        except BaseException:  # noqa: BLE001 - the child reports by its exit status only
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, KILLED), f"the writer failed on its own (exit {code})"
    return code == KILLED


@pytest.mark.parametrize("renameat2", [True, False])
def test_a_kill_at_every_step_of_a_forced_render_leaves_the_old_set_or_the_new_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renameat2: bool) -> None:
    outcomes = set()
    for k in range(1, 200):
        folder = tmp_path / str(k)
        folder.mkdir()
        old_set(folder)
        died = killed_writer(folder, k, monkeypatch, renameat2)
        files.clean_stale(folder)  # what the next envcheck write into the folder does first
        after = state(folder)
        assert after in (OLD, NEW), f"killed before change {k}: {after}"
        assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == [], k
        outcomes.add("new" if after == NEW else "old")
        if not died:
            break
    else:
        raise AssertionError("the writer never finished")
    assert outcomes == {"old", "new"}  # the kills fell before the plan and after it


def test_a_stage_killed_while_staging_is_dropped_and_nothing_changes(tmp_path: Path) -> None:
    old_set(tmp_path)
    pid = os.fork()
    if pid == 0:  # a writer that dies halfway through writing its new files: no lock, no clean-up
        with files._stage(tmp_path) as stage:
            (stage / "new" / "r.md").write_text("new m")
            os._exit(0)
    os.waitpid(pid, 0)
    files.write_new(tmp_path / "next.json", "{}")
    assert state(tmp_path) == {**OLD, "next.json": "{}"}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
