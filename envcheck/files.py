"""Writing files that users keep: never replacing one unasked, never leaving one half-written (docs/security.md).
Every write stages its files in a private, locked folder beside the targets and uses only ``O_EXCL`` and ``rename``
within a folder; ``write_set`` swaps through the stage's ``old/``, ``new/`` and ``go/``, so a stage a killed writer
left is finished or undone by the next write.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import itertools
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

Content = str | bytes
STAGE_PREFIX, STAGE_SUFFIX = ".envcheck-", ".tmp"


def _bytes(content: Content) -> bytes:
    """UTF-8 of ``content``; a lone surrogate is written as its escape ``\\udcff`` (valid inside JSON)."""
    if isinstance(content, bytes):
        return content
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError:
        return content.encode("utf-8", "backslashreplace")


def _mode() -> int:
    # A report gets the permissions any new file would (mkstemp's 0600 would hide it from a team).
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


# renameat2(2) flags and the "at the current folder" descriptor, from <linux/fs.h> / <fcntl.h>.
_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}


def _renameat2() -> object | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not glibc >= 2.28 (or not Linux)
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _renameat2()


def rename_noreplace(src: Path, dst: Path) -> bool:
    """Rename ``src`` to ``dst`` atomically, FileExistsError when ``dst`` exists (even as a dangling symlink). False
    when this system or filesystem cannot promise that (the caller falls back)."""
    if _RENAMEAT2 is None:
        return False
    rc = _RENAMEAT2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)  # type: ignore[operator]
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), str(dst))


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a power cut after it keeps the new name)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_file(path: Path, data: bytes) -> None:
    """Create ``path`` (failing if it exists), write ``data`` and flush it to the disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _mode())
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _publish(src: Path, dst: Path) -> None:
    """Give the complete ``src`` the name ``dst``, never replacing anything that has it."""
    if rename_noreplace(src, dst):
        return
    claimed = not src.is_dir()
    if claimed:
        _write_file(dst, b"")  # no RENAME_NOREPLACE here: claim the name, then rename over our claim
    elif exists(dst):
        raise FileExistsError(17, "File exists", str(dst))
    try:
        os.replace(src, dst)
    except BaseException:
        if claimed:
            _remove(dst)
        raise


@contextlib.contextmanager
def _stage(folder: Path) -> Iterator[Path]:
    """A private stage in ``folder``, locked until removed on leaving (kept after a failed undo, to recover)."""
    while True:
        path = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, suffix=STAGE_SUFFIX, dir=folder))
        with contextlib.suppress(FileNotFoundError, FileExistsError):  # a clean-up took it before us: another
            fd = os.open(path / "lock", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            with contextlib.suppress(OSError):  # a filesystem without locks: clean-ups leave stages alone
                fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink:
                break
            os.close(fd)
    ok = False
    try:
        (path / "new").mkdir()
        (path / "old").mkdir()
        yield path
        ok = True
    finally:
        with contextlib.suppress(OSError):
            if ok or not os.listdir(path / "old"):  # never the user's old files after a failed undo
                _remove(path)
        os.close(fd)


def clean_stale(folder: Path) -> list[Path]:
    """Finish or undo the stages killed writers left in ``folder``; the stages removed. Never raises."""
    done = []
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            if name.startswith(STAGE_PREFIX) and name.endswith(STAGE_SUFFIX):
                with contextlib.suppress(OSError):
                    if _recover(folder, name):
                        done.append(folder / name)
    return done


def _recover(folder: Path, name: str) -> bool:
    fd = os.open(folder / name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)  # a symlink or a file: refused
    lock = None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            return False  # not a stage this user made: another's, or one others could have written into
        # Made here when its writer died before making it (or is about to: it then takes another stage).
        lock = os.open("lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while its writer runs (or cannot tell)
        inside = Path(f"/proc/self/fd/{fd}")  # the folder checked above, whatever has its name now
        step = "go" if (inside / "go").is_dir() else "old"
        if (inside / step).is_dir():
            for entry in os.listdir(inside / step):
                with contextlib.suppress(FileExistsError):  # a name taken since: its owner's now
                    if step == "go" and _own_empty_file(folder / entry):
                        os.replace(inside / step / entry, folder / entry)  # the claim of a writer without renameat2
                    else:
                        _publish(inside / step / entry, folder / entry)
        _fsync_folder(folder)
        for entry in os.listdir(fd):
            _remove(inside / entry)
        os.rmdir(folder / name)
        return True
    finally:
        for f in (lock, fd):
            if f is not None:
                os.close(f)


def _own_empty_file(path: Path) -> bool:
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        return stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_uid == os.geteuid()
    return False


def _parent(p: Path) -> None:
    if exists(p.parent) and not p.parent.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(p.parent))
    p.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(p.parent)


def write_new(path: str | os.PathLike[str], content: Content) -> Path:
    """Write ``content`` to a new file ``path``; FileExistsError when the name is taken (even by a dangling symlink)."""
    return _write_one(Path(path), content, replace=False)


def replace_file(path: str | os.PathLike[str], content: Content) -> Path:
    """Replace ``path`` whole (a reader sees the old file or the new one); a symlink there is replaced, not followed."""
    return _write_one(Path(path), content, replace=True)


def _write_one(p: Path, content: Content, replace: bool) -> Path:
    _parent(p)
    if replace and p.is_dir() and not p.is_symlink():
        raise IsADirectoryError(21, "Is a directory", str(p))
    if not replace and exists(p):
        raise FileExistsError(17, "File exists", str(p))
    with _stage(p.parent) as s:
        _write_file(s / "new" / p.name, _bytes(content))
        (os.replace if replace else _publish)(s / "new" / p.name, p)
    _fsync_folder(p.parent)
    return p


def exists(path: Path) -> bool:
    """Whether anything has the name: a file, a folder, or a symlink whether or not it points anywhere."""
    return os.path.lexists(path)


@dataclass
class FileSet:
    """What ``write_set`` writes into one folder: ``files`` by path, ``folders`` as {path: {file name: content}}."""

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
    """Write every file and folder of ``files``, all or none; the paths written. Without ``force`` an existing
    target refuses the whole set (SetExistsError); with it, targets are replaced once every new file is complete."""
    targets = files.targets()
    if len({t.parent for t in targets}) > 1:
        raise ValueError("the files of a set share one folder")
    if not targets:
        return []
    folder = targets[0].parent
    clean_stale(folder)
    existing = [t for t in targets if exists(t)]
    if existing and not force:
        raise SetExistsError(existing)
    for t in existing:
        if t in files.files and t.is_dir() and not t.is_symlink():
            raise IsADirectoryError(f"{t} is a folder, not a file envcheck wrote")
        if t in files.folders and not t.is_dir() and not t.is_symlink():
            raise NotADirectoryError(f"{t} is a file, where the charts folder goes")
    made_dirs = _mkdirs(folder)
    try:
        with _stage(folder) as s:
            for path, content in files.files.items():
                _write_file(s / "new" / path.name, _bytes(content))
            for path, members in files.folders.items():
                (s / "new" / path.name).mkdir()
                for name, content in members.items():
                    _write_file(s / "new" / path.name / name, _bytes(content))
                _fsync_folder(s / "new" / path.name)
            _fsync_folder(s / "new")
            _place(s, targets, force)
            _fsync_folder(folder)  # the new names are durable before the old files go with the stage
    except BaseException:
        for d in reversed(made_dirs):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    return [*files.files, *(path / name for path, members in files.folders.items() for name in members)]


def _place(s: Path, targets: list[Path], force: bool) -> None:
    aside: list[Path] = []
    placed: list[Path] = []
    try:
        for t in targets:
            if exists(t):
                if not force:
                    raise SetExistsError([t])  # appeared since the check: someone else's, left alone
                os.rename(t, s / "old" / t.name)
                aside.append(t)
        _fsync_folder(s / "old")
        os.rename(s / "new", s / "go")  # from here a kill is finished by the next write, not undone
        _fsync_folder(s)
        for t in targets:
            _publish(s / "go" / t.name, t)
            placed.append(t)
    except BaseException:
        for t in reversed(placed):
            os.rename(t, s / "go" / t.name)
        for t in reversed(aside):
            os.rename(s / "old" / t.name, t)
        raise


def _mkdirs(folder: Path) -> list[Path]:
    """Create ``folder`` and missing parents; the ones created, outermost first (to undo)."""
    missing = list(itertools.takewhile(lambda p: not p.exists(), (folder, *folder.parents)))
    folder.mkdir(parents=True, exist_ok=True)
    return missing[::-1]


REPORT_SUFFIXES = (".json.gz", ".json")  # a report's file names: its JSON, or that JSON gzip-compressed


def report_stem(path: str | os.PathLike[str]) -> str:
    """The name a report's documents are made from: its file name less ``.json`` or ``.json.gz``."""
    name = Path(path).name
    for suffix in REPORT_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return Path(path).stem
