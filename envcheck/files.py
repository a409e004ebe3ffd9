"""Writing files that users keep: never replacing one unasked, never leaving one half-written.

No hard links anywhere: vfat/exFAT and many network shares refuse them. What the functions rely
on instead is what every such filesystem does: ``O_CREAT | O_EXCL`` (creation fails when the
name exists) and ``rename`` within one folder (atomic, replacing the target).

* ``write_new``: one new file. The name is claimed with an empty ``O_EXCL`` placeholder, the
  content written and flushed to a temporary file beside it, and the temporary renamed over the
  placeholder: a reader sees no file, an empty one or the whole file, never part of it, and a
  file someone else created meanwhile is never touched.
* ``write_set``: files and folders that belong together (a report's Markdown, its charts folder
  and its HTML) appear all or not at all. Every new file is written to a temporary name first, so
  a full disk or an error fails before anything visible changes; then each target is moved into
  place, an existing one (only with ``force``) first renamed aside and deleted once the whole set
  is in place, restored when anything fails. Symlinks are replaced, never followed.

On every failure, Ctrl-C included, the temporaries are removed and what existed before is back.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

Content = str | bytes


def _bytes(content: Content) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


def _mode() -> int:
    # A report gets the permissions any new file would (mkstemp's 0600 would hide it from a team).
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _temp_name(target: Path, tag: str = "tmp") -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(4)}.{tag}")


def _write_file(path: Path, data: bytes) -> None:
    """Create ``path`` (failing if it exists), write ``data`` and flush it to the disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), _mode())
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def write_new(path: str | os.PathLike[str], content: Content) -> Path:
    """Write ``content`` to a new file ``path``; FileExistsError when the name is taken (even by a dangling symlink)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    _write_file(p, b"")  # the claim: fails if anything, a dangling symlink included, has the name
    tmp = _temp_name(p)
    try:
        _write_file(tmp, _bytes(content))
        os.replace(tmp, p)
    except BaseException:
        _remove(tmp)
        _remove(p)  # our empty placeholder
        raise
    return p


def exists(path: Path) -> bool:
    """Whether anything has the name: a file, a folder, or a symlink whether or not it points anywhere."""
    return os.path.lexists(path)


@dataclass
class _Staged:
    target: Path
    temp: Path
    aside: Path | None = None  # the old target, renamed aside until the set is complete
    claimed: bool = False  # the target name was created empty by us
    moving: bool = False  # the temporary is being renamed to the target


@dataclass
class FileSet:
    """What ``write_set`` writes: ``files`` by path, ``folders`` as {path: {file name: content}}."""

    files: dict[Path, Content] = field(default_factory=dict)
    folders: dict[Path, dict[str, Content]] = field(default_factory=dict)

    def targets(self) -> list[Path]:
        return [*self.files, *self.folders]


class SetExistsError(FileExistsError):
    """Some targets of a set exist and ``force`` was not given; nothing was written."""

    def __init__(self, existing: list[Path]) -> None:
        super().__init__(f"{existing[0]} already exists")
        self.existing = existing


def write_set(files: FileSet, force: bool = False) -> list[Path]:
    """Write every file and folder of ``files``, all or none; the paths written, folders' files included.

    Without ``force`` an existing target refuses the whole set (SetExistsError) before anything is
    written; with it, existing targets are replaced, but only once every new file is complete.
    """
    targets = files.targets()
    existing = [t for t in targets if exists(t)]
    if existing and not force:
        raise SetExistsError(existing)
    for t in existing:
        if t in files.files and t.is_dir() and not t.is_symlink():
            raise IsADirectoryError(f"{t} is a folder, not a file envcheck wrote")
        if t in files.folders and not (t.is_dir() and not t.is_symlink()) and not t.is_symlink():
            raise NotADirectoryError(f"{t} is a file, where the charts folder goes")
    staged: list[_Staged] = []
    made_dirs: list[Path] = []
    try:
        for path, content in files.files.items():
            made_dirs += _mkdirs(path.parent)
            s = _Staged(path, _temp_name(path))
            staged.append(s)
            _write_file(s.temp, _bytes(content))
        for path, members in files.folders.items():
            made_dirs += _mkdirs(path.parent)
            s = _Staged(path, _temp_name(path))
            staged.append(s)
            s.temp.mkdir()
            for name, content in members.items():
                _write_file(s.temp / name, _bytes(content))
        for s in staged:
            _place(s, force)
    except BaseException:
        for s in reversed(staged):
            _undo(s)
        for d in reversed(made_dirs):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    for s in staged:
        if s.aside is not None:
            with contextlib.suppress(OSError):
                _remove(s.aside)
    written = list(files.files)
    for path, members in files.folders.items():
        written += [path / name for name in members]
    return written


def _mkdirs(folder: Path) -> list[Path]:
    """Create ``folder`` and missing parents; the ones created, outermost first (to undo)."""
    missing = []
    p = folder
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    folder.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def _place(s: _Staged, force: bool) -> None:
    if exists(s.target):
        if not force:
            raise SetExistsError([s.target])  # appeared since the check: someone else's, left alone
        s.aside = _temp_name(s.target, "old")
        os.rename(s.target, s.aside)
    elif s.temp.is_file():
        # Claim the name exclusively, so a file created meanwhile by someone else is never replaced.
        _write_file(s.target, b"")
        s.claimed = True
    s.moving = True
    os.replace(s.temp, s.target)  # a folder's name is free here: the old one, if any, was moved aside


def _undo(s: _Staged) -> None:
    if s.claimed or (s.moving and not exists(s.temp)):
        _remove(s.target)  # the new file or folder, or our empty claim
    _remove(s.temp)
    if s.aside is not None and exists(s.aside):
        os.rename(s.aside, s.target)
