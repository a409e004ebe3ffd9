"""Writing files that users keep: never replacing one unasked, never leaving one half-written.

No hard links anywhere: vfat/exFAT and many network shares refuse them. What the functions rely
on instead is what every such filesystem does: ``O_CREAT | O_EXCL`` (creation fails when the
name exists) and ``rename`` within one folder (atomic).

* ``write_new``: one new file. The content is written and flushed (fsync) to a hidden temporary
  beside the target, then renamed to the target with ``RENAME_NOREPLACE`` (Linux ``renameat2``),
  which fails when the name exists: the name appears only with the whole file behind it, even
  under ``kill -9``, and a file someone else created meanwhile is never touched. Where the
  filesystem has no ``RENAME_NOREPLACE`` the name is first claimed with an empty ``O_EXCL`` file
  and the temporary renamed over it (the only case where a kill at that instant leaves an empty file).
* ``replace_file``: one file that is meant to be refreshed (a Prometheus textfile): the same
  temporary, fsync and rename, but the rename replaces what has the name.
* ``write_set``: files and folders that belong together (a report's Markdown, its charts folder
  and its HTML) appear all or not at all. Every new file is written to a temporary name first, so
  a full disk or an error fails before anything visible changes; then each target is moved into
  place, an existing one (only with ``force``) first renamed aside and deleted once the whole set
  is in place, restored when anything fails. Symlinks are replaced, never followed.

On every failure, Ctrl-C included, the temporaries are removed and what existed before is back.
A process killed outright (``kill -9``, a power cut) cannot clean up: its temporaries carry its
process id and this host's tag in their names (``.<name>.<pid>-<host>-<random>.tmp``), and the
next write into the same folder (``clean_stale``) removes those of a process that no longer
runs, and puts back a file it had renamed aside (``.old``) whose new version never arrived.

A set is all or nothing across such a kill too: once every new file is complete and flushed, and
before the first rename, ``write_set`` writes its plan (``.<first target>.<pid>-<host>-<random>.set``:
each target with its temporary and its aside name). Killed before the plan exists, nothing visible
changed and the temporaries go (rolled back); killed after, the next write into the folder
finishes the plan (rolled forward: every new file in place, every old one removed), then removes it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

Content = str | bytes


def _bytes(content: Content) -> bytes:
    """UTF-8 of ``content``. A lone surrogate (a file name or variable that was not UTF-8, as Python
    hands it over: ``bad\\xffdir`` reads as ``bad\\udcffdir``) is written as its escape ``\\udcff``:
    a valid escape inside JSON (the report reads back the same string), plain text elsewhere, and
    never an error after the work that produced the content is done."""
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


def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]


# Temporaries of this version (process id and host tag: distinctive, whatever the target's name)
# and of older ones (a random part only: recognised for the names a report set has, so that a
# user's own ".notes.0123abcd.tmp" is never taken for one).
TEMP_NAME = re.compile(
    r"^\.(?:(?P<name>.+)\.(?P<pid>\d+)-(?P<host>[0-9a-f]{6})-[0-9a-f]{8}\.(?P<tag>tmp|old|set)"
    r"|(?P<old_name>.+(?:\.json|\.md|\.html|_charts))\.[0-9a-f]{8}\.(?P<old_tag>tmp|old))$")
# A temporary whose writer cannot be asked (another host on a shared folder, an older envcheck)
# is stale once untouched this long: a render or a report write takes seconds.
STALE_AFTER_S = 3600.0


def _temp_name(target: Path, tag: str = "tmp") -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}-{_host_tag()}-{secrets.token_hex(4)}.{tag}")


def is_temporary(name: str) -> bool:
    """Whether ``name`` is one of envcheck's own temporaries (never a report, never the user's)."""
    return TEMP_NAME.match(name) is not None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a number no process can have does not)."""
    if pid == os.getpid():
        return True
    if pid <= 0:
        return True  # 0 and below name groups, never a writer: not ours to judge
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:
        return True  # alive, another user's (EPERM): not ours to judge
    return True


def _stale(path: Path, m: re.Match[str], now: float) -> bool:
    pid, host = m.group("pid"), m.group("host")
    if pid is not None and host == _host_tag():
        return not pid_alive(int(pid))
    try:
        # ctime, not mtime: a file renamed aside keeps the old mtime of the document it was.
        return now - os.lstat(path).st_ctime > STALE_AFTER_S
    except OSError:
        return False


def clean_stale(folder: Path) -> list[Path]:
    """Remove the temporaries a killed envcheck left in ``folder`` (see the module docstring); put
    back a file renamed aside whose replacement never arrived. Returns what was removed or restored.
    Never raises: a folder that cannot be listed or cleaned is left as it is."""
    done: list[Path] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return done
    now = time.time()
    # First the sets a killed writer had begun to put in place: finished, which uses their temporaries.
    for name in names:
        m = TEMP_NAME.match(name)
        if m is not None and m.group("tag") == "set" and _stale(folder / name, m, now):
            with contextlib.suppress(OSError):
                _finish_set(folder / name)
                done.append(folder / name)
    with contextlib.suppress(OSError):
        names = os.listdir(folder)
    for name in names:
        m = TEMP_NAME.match(name)
        if m is None or m.group("tag") == "set":
            continue
        path = folder / name
        if not _stale(path, m, now):
            continue
        target = folder / (m.group("name") or m.group("old_name"))
        with contextlib.suppress(OSError):
            if (m.group("tag") or m.group("old_tag")) == "old" and not exists(target):
                os.rename(path, target)  # the old version is all there is: it goes back
            else:
                _remove(path)
            done.append(path)
    return done


# renameat2(2) flags and the "at the current folder" descriptor, from <linux/fs.h> / <fcntl.h>.
_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}


def _renameat2() -> object | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):  # not glibc >= 2.28 (or not Linux)
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _renameat2()


def rename_noreplace(src: Path, dst: Path) -> bool:
    """Rename ``src`` to ``dst`` atomically, failing with FileExistsError when ``dst`` exists (even as a
    dangling symlink). False when this system or filesystem cannot promise that (the caller falls back)."""
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
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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


def _publish(tmp: Path, target: Path) -> None:
    """Give the complete ``tmp`` the name ``target``, never replacing anything that has it."""
    if rename_noreplace(tmp, target):
        return
    _write_file(target, b"")  # no RENAME_NOREPLACE here: claim the name, then rename over our claim
    try:
        os.replace(tmp, target)
    except BaseException:
        _remove(target)
        raise


def write_new(path: str | os.PathLike[str], content: Content) -> Path:
    """Write ``content`` to a new file ``path``; FileExistsError when the name is taken (even by a dangling symlink)."""
    p = Path(path)
    if exists(p.parent) and not p.parent.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(p.parent))
    p.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(p.parent)
    if exists(p):
        raise FileExistsError(17, "File exists", str(p))
    tmp = _temp_name(p)
    try:
        _write_file(tmp, _bytes(content))
        _publish(tmp, p)
    except BaseException:
        _remove(tmp)
        raise
    _fsync_folder(p.parent)
    return p


def replace_file(path: str | os.PathLike[str], content: Content) -> Path:
    """Replace ``path`` whole with ``content`` (a file meant to be refreshed, like a Prometheus
    textfile): written and flushed to one of our temporaries beside it, then renamed over it, so a
    reader sees the old file or the new one, never half of one, even under ``kill -9``; the
    temporary a killed writer left is removed by the next write (``clean_stale``). A folder or a
    symlink at ``path`` is refused (IsADirectoryError / the symlink replaced, never followed)."""
    p = Path(path)
    if exists(p.parent) and not p.parent.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(p.parent))
    p.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(p.parent)
    if p.is_dir() and not p.is_symlink():
        raise IsADirectoryError(21, "Is a directory", str(p))
    tmp = _temp_name(p)
    try:
        _write_file(tmp, _bytes(content))
        os.replace(tmp, p)
    except BaseException:
        _remove(tmp)
        raise
    _fsync_folder(p.parent)
    return p


def exists(path: Path) -> bool:
    """Whether anything has the name: a file, a folder, or a symlink whether or not it points anywhere."""
    return os.path.lexists(path)


@dataclass
class _Staged:
    target: Path
    temp: Path
    aside: Path | None = None  # the old target, renamed aside until the set is complete
    aside_name: Path | None = None  # where the plan says it goes aside
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
    for folder in dict.fromkeys(t.parent for t in targets):
        clean_stale(folder)
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
    journal: Path | None = None
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
            _fsync_folder(s.temp)
        if staged:
            journal = _write_plan(staged)
        for s in staged:
            _place(s, force)
    except BaseException:
        for s in reversed(staged):
            _undo(s)
        for d in reversed(made_dirs):
            with contextlib.suppress(OSError):
                d.rmdir()
        if journal is not None:
            _remove(journal)  # what it planned is undone: nothing left to finish
        raise
    for folder in dict.fromkeys(s.target.parent for s in staged):
        _fsync_folder(folder)  # the new names are durable before the old files and the plan go
    for s in staged:
        if s.aside is not None:
            with contextlib.suppress(OSError):
                _remove(s.aside)
    if journal is not None:
        with contextlib.suppress(OSError):
            _remove(journal)
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


def _write_plan(staged: list[_Staged]) -> Path:
    """The set's plan, complete and flushed (with the temporaries' names) before anything is renamed.
    Names are relative to the plan's folder, so a folder moved whole keeps its plan."""
    folder = staged[0].target.parent
    for s in staged:
        s.aside_name = _temp_name(s.target, "old")
    plan = {"version": 1, "entries": [
        {"target": os.path.relpath(s.target, folder), "temp": os.path.relpath(s.temp, folder),
         "aside": os.path.relpath(s.aside_name, folder)} for s in staged]}
    for f in dict.fromkeys(s.target.parent for s in staged):
        _fsync_folder(f)  # the temporaries' names survive a power cut before the plan names them
    journal = _temp_name(staged[0].target, "set")
    _write_file(journal, json.dumps(plan).encode("ascii"))
    _fsync_folder(folder)
    return journal


def _finish_set(journal: Path) -> None:
    """Finish the set a killed writer planned in ``journal`` (see the module docstring), then remove the
    plan. A plan that does not read whole was being written when the kill came: nothing had been
    renamed yet, so there is nothing to finish (its temporaries go as any others)."""
    folder = journal.parent
    try:
        entries = json.loads(journal.read_bytes().decode("ascii"))["entries"]
        steps = [(folder / e["target"], folder / e["temp"], folder / e["aside"]) for e in entries]
    except (ValueError, KeyError, TypeError):
        steps = []
    for target, temp, aside in steps:
        if exists(temp):
            if exists(target):
                if exists(aside):
                    _remove(target)  # the old one is aside already: this is the empty claim on the name
                else:
                    os.rename(target, aside)
            os.rename(temp, target)
        elif not exists(target) and exists(aside):
            os.rename(aside, target)  # an undo the kill interrupted: the old file goes back
    _fsync_folder(folder)
    for target, _, aside in steps:
        if exists(target) and exists(aside):
            _remove(aside)
    _remove(journal)
    _fsync_folder(folder)


def _place(s: _Staged, force: bool) -> None:
    if exists(s.target):
        if not force:
            raise SetExistsError([s.target])  # appeared since the check: someone else's, left alone
        s.aside = s.aside_name or _temp_name(s.target, "old")
        os.rename(s.target, s.aside)
    s.moving = True
    if not rename_noreplace(s.temp, s.target):
        if s.temp.is_file():
            # Claim the name exclusively, so a file created meanwhile by someone else is never replaced.
            _write_file(s.target, b"")
            s.claimed = True
        os.replace(s.temp, s.target)  # a folder's name is free here: the old one, if any, was moved aside


def _undo(s: _Staged) -> None:
    if s.claimed or (s.moving and not exists(s.temp)):
        _remove(s.target)  # the new file or folder, or our empty claim
    _remove(s.temp)
    if s.aside is not None and exists(s.aside):
        os.rename(s.aside, s.target)


REPORT_SUFFIXES = (".json.gz", ".json")  # a report's file names: its JSON, or that JSON gzip-compressed


def report_stem(path: str | os.PathLike[str]) -> str:
    """The name a report's documents are made from: its file name less ``.json`` or ``.json.gz``."""
    name = Path(path).name
    for suffix in REPORT_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return Path(path).stem
