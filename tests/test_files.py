"""Files users keep: never replaced unasked, never half-written, never through a hard link, nothing left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envcheck import files, reportname
from envcheck.files import FileSet, SetExistsError, write_new, write_set


@pytest.fixture(autouse=True)
def no_links(monkeypatch):
    """vfat, exFAT and many network shares refuse hard links: nothing here may depend on them."""
    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted (this filesystem has no hard links)")

    monkeypatch.setattr(os, "link", refuse)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*"))


def test_write_new_writes_a_whole_file_without_links(tmp_path):
    p = write_new(tmp_path / "sub" / "r.json", "{}\n")
    assert p.read_text() == "{}\n" and not leftovers(tmp_path)


def test_write_new_gives_files_the_permissions_of_any_new_file(tmp_path):
    umask = os.umask(0o022)
    try:
        p = write_new(tmp_path / "r.json", "x")
    finally:
        os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("kind", ["file", "dangling symlink", "folder"])
def test_write_new_never_replaces_anything(tmp_path, kind):
    target = tmp_path / "r.json"
    if kind == "file":
        target.write_text("mine")
    elif kind == "dangling symlink":
        target.symlink_to(tmp_path / "gone")
    else:
        target.mkdir()
    with pytest.raises(FileExistsError):
        write_new(target, "new")
    assert os.path.lexists(target) and not leftovers(tmp_path)
    if kind == "file":
        assert target.read_text() == "mine"


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_write_leaves_no_file_and_no_temporary(tmp_path, monkeypatch, error):
    def failing(fd, data):  # the claim is empty and never writes: this is the content
        raise error

    monkeypatch.setattr(os, "write", failing)
    with pytest.raises(type(error)):
        write_new(tmp_path / "r.json", "x" * 1000)
    assert list(tmp_path.iterdir()) == []


def _set(folder: Path) -> FileSet:
    return FileSet(files={folder / "r.md": "# new\n", folder / "r.html": "<html>new</html>\n"},
                   folders={folder / "r_charts": {"a.svg": "<svg>a</svg>", "b.svg": "<svg>b</svg>"}})


def test_write_set_writes_every_file(tmp_path):
    written = write_set(_set(tmp_path))
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == \
        ["r.html", "r.md", "r_charts/a.svg", "r_charts/b.svg"]
    assert not leftovers(tmp_path)


def test_write_set_refuses_before_writing_anything(tmp_path):
    (tmp_path / "r_charts").mkdir()
    with pytest.raises(SetExistsError) as e:
        write_set(_set(tmp_path))
    assert e.value.existing == [tmp_path / "r_charts"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r_charts"]


@pytest.mark.parametrize("error", [OSError(5, "Input/output error"), KeyboardInterrupt()])
@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("noreplace", [True, False], ids=["renameat2", "no-renameat2"])
def test_a_set_is_all_or_none_even_when_moving_into_place_fails(tmp_path, monkeypatch, error, force, noreplace):
    if force:
        (tmp_path / "r.md").write_text("old md")
        (tmp_path / "r_charts").mkdir()
        (tmp_path / "r_charts" / "old.svg").write_text("old chart")
    before = {p.relative_to(tmp_path): p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    real = files.rename_noreplace if noreplace else os.replace
    calls = []

    def second_fails(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise error
        return real(src, dst)

    if noreplace:
        monkeypatch.setattr(files, "rename_noreplace", second_fails)
    else:  # a filesystem without RENAME_NOREPLACE: the name is claimed, then renamed over
        monkeypatch.setattr(files, "rename_noreplace", lambda src, dst: False)
        monkeypatch.setattr(files.os, "replace", second_fails)
    with pytest.raises(type(error)):
        write_set(_set(tmp_path), force=force)
    after = {p.relative_to(tmp_path): p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before  # the old files back, no new one, no temporary


def test_a_full_disk_while_staging_changes_nothing(tmp_path, monkeypatch):
    (tmp_path / "r.html").write_text("old html")
    real = files._write_file

    def full(path, data):
        if path.name == "r.html" and files.STAGE_PREFIX in str(path):  # the staged copy
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(files, "_write_file", full)
    with pytest.raises(OSError, match="No space"):
        write_set(_set(tmp_path), force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]
    assert (tmp_path / "r.html").read_text() == "old html"


def test_force_replaces_a_charts_folder_whole_and_a_dangling_symlink(tmp_path):
    (tmp_path / "r_charts").mkdir()
    (tmp_path / "r_charts" / "stale.svg").write_text("old")
    (tmp_path / "r.md").symlink_to(tmp_path / "nowhere")
    write_set(_set(tmp_path), force=True)
    assert sorted(p.name for p in (tmp_path / "r_charts").iterdir()) == ["a.svg", "b.svg"]
    assert not (tmp_path / "r.md").is_symlink() and (tmp_path / "r.md").read_text() == "# new\n"
    assert not leftovers(tmp_path)


def test_new_folders_made_for_a_failed_set_are_removed(tmp_path, monkeypatch):
    real = files._write_file

    def fail(path, data):
        if path.name == "r.html":
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(files, "_write_file", fail)
    fs = FileSet(files={tmp_path / "a" / "b" / "r.md": "x", tmp_path / "a" / "b" / "r.html": "y"})
    with pytest.raises(OSError):
        write_set(fs)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- free report names


@pytest.mark.parametrize("sibling", ["x.md", "x.html", "x_charts", "x.zh-CN.md", "x.zh-CN_charts"])
def test_a_name_is_taken_by_anything_its_render_would_write(tmp_path, sibling):
    if sibling.endswith("_charts"):
        (tmp_path / sibling).mkdir()
    else:
        (tmp_path / sibling).write_text("")
    assert reportname.write_report(tmp_path, "x", "{}") == tmp_path / "x-2.json"


def test_a_dangling_symlink_takes_a_name(tmp_path):
    (tmp_path / "x.html").symlink_to(tmp_path / "gone.html")
    path = reportname.write_report(tmp_path, "x", "{}")
    assert path == tmp_path / "x-2.json" and path.read_text() == "{}"
