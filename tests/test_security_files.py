"""A shared output folder is not a weapon (issue 46, items 1 and 8).

What another user (or another container) leaves in a folder envcheck writes into never makes envcheck
delete, move or replace a file: plans of older versions are never read, a stage is recovered only when
it is a real folder of this user's, closed to others and unlocked. Two writers with the same host name
and process id (containers of one pod on a shared volume) never take each other's staged files.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

import pytest

from envcheck import files

OTHER_UID = 65534  # nobody


def _as_other_user(*paths: Path) -> None:
    """Give ``paths`` to another user, or skip where this process cannot (not root)."""
    try:
        for p in paths:
            os.chown(p, OTHER_UID, OTHER_UID, follow_symlinks=False)
    except PermissionError:
        pytest.skip("needs root to give a file to another user")


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def _precious(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_a_plan_planted_by_another_user_in_a_shared_folder_moves_nothing(tmp_path: Path, how: str) -> None:
    """The attack on envcheck before this change: a ``.set`` plan naming files outside the folder, with
    the killed-writer look (this host's tag, a process that no longer runs), was carried out."""
    shared, outside = tmp_path / "shared", tmp_path / "etc"
    shared.mkdir(mode=0o777)
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0\n")
    (shared / ".evil").write_text("attacker\n")
    target = {"absolute": str(outside / "passwd"), "dotdot": "../etc/passwd", "symlink": "link/passwd"}[how]
    if how == "symlink":
        (shared / "link").symlink_to(outside)
    tag = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]
    plan = shared / f".r.md.{_dead_pid()}-{tag}-0123abcd.set"
    plan.write_text(json.dumps({"version": 1, "entries": [
        {"target": target, "temp": ".evil", "aside": "../etc/.passwd-aside"}]}))
    _as_other_user(plan, shared / ".evil")
    files.write_new(shared / "r.json", "{}")
    files.write_set(files.FileSet(files={shared / "r.html": "<html></html>"}))
    assert _precious(outside) == {"passwd": "root:x:0:0\n"}
    assert plan.exists() and (shared / ".evil").read_text() == "attacker\n"  # another user's: left as it is


def _planted_stage(folder: Path, name: str = ".envcheck-abcdefgh.tmp") -> Path:
    """A stage as a killed writer leaves it mid-placing: ``go/`` holds a file for the folder."""
    stage = folder / name
    (stage / "go").mkdir(parents=True)
    (stage / "old").mkdir()
    (stage / "go" / "r.md").write_text("planted\n")
    os.chmod(stage, 0o700)
    return stage


@pytest.mark.parametrize("how", ["another user's", "open to others", "a symlink", "a file"])
def test_only_a_stage_of_this_users_own_is_recovered(tmp_path: Path, how: str) -> None:
    if how == "another user's":
        stage = _planted_stage(tmp_path)
        _as_other_user(stage, stage / "go", stage / "old", stage / "go" / "r.md")
    elif how == "open to others":
        stage = _planted_stage(tmp_path)
        os.chmod(stage, 0o777)
    elif how == "a symlink":
        elsewhere = _planted_stage(tmp_path / "elsewhere", "stage")
        stage = tmp_path / ".envcheck-abcdefgh.tmp"
        stage.symlink_to(elsewhere)
    else:
        stage = tmp_path / ".envcheck-abcdefgh.tmp"
        stage.write_text("not a folder")
    files.write_new(tmp_path / "r.json", "{}")
    assert not (tmp_path / "r.md").exists()  # nothing placed from it
    assert os.path.lexists(stage)  # and nothing of it removed
    if how == "a symlink":
        assert (tmp_path / "elsewhere" / "stage" / "go" / "r.md").read_text() == "planted\n"


def test_a_stage_of_this_users_own_killed_while_placing_is_finished(tmp_path: Path) -> None:
    _planted_stage(tmp_path)
    files.write_new(tmp_path / "r.json", "{}")
    assert (tmp_path / "r.md").read_text() == "planted\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.md"]


@pytest.mark.parametrize("pids", ["same pid", "different pids"])
def test_two_containers_with_one_host_name_writing_into_one_folder_keep_every_file(tmp_path: Path,
                                                                                 pids: str) -> None:
    """Containers of one pod share a volume, a host name and their process ids' numbering: a writer must
    never take the other's staged file for a dead process's (what envcheck did: "nothing written")."""
    big = b"x" * (2 << 20)  # a staged file that takes a while to write and flush: a wide window
    fake = {"a": 4_194_304 + 7, "b": 4_194_304 + (7 if pids == "same pid" else 8)}  # past any pid_max
    children = {}
    for who, pid in fake.items():
        child = os.fork()
        if child == 0:
            code = 1
            try:
                os.getpid = lambda pid=pid: pid  # type: ignore[assignment]  # what the container sees
                socket.gethostname = lambda: "pod-0"  # type: ignore[assignment]
                for i in range(25):
                    files.write_new(tmp_path / f"{who}-{i}.json", big)
                    files.write_set(files.FileSet(files={tmp_path / f"{who}-{i}.md": big},
                                                  folders={tmp_path / f"{who}-{i}_charts": {"a.svg": big}}))
                code = 0
            finally:
                os._exit(code)
        children[who] = child
    for who, child in children.items():
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0, f"container {who}: a write failed"
    for who in fake:
        for i in range(25):
            assert (tmp_path / f"{who}-{i}.json").stat().st_size == len(big)
            assert (tmp_path / f"{who}-{i}_charts" / "a.svg").stat().st_size == len(big)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
