"""A recorded machine behind the host seam (``--replay``, the tests): files, links, folders, commands, environment,
Python and packages in memory. Links are followed component by component, ``glob`` matches one level, and a file
recorded without its content refuses to be read."""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from envcheck.model.reasons import NOT_CAPTURED
from envcheck.probes.host import PYTHON_FIELDS, Host, RunResult
from envcheck.probes.packages import PackageInfo

if TYPE_CHECKING:
    from envcheck.outside_json import Json

CommandAnswer = RunResult | tuple[int, str, str]
CommandSpec = CommandAnswer | Callable[[tuple[str, ...]], CommandAnswer]


class ReplayHost(Host):
    """A machine made of dictionaries; every run is appended to ``calls`` (argv tuples) for assertions.

    ``files``: path -> text, ``None`` (exists, content not recorded) or an ``OSError`` raised on read; ``links``: path
    -> target; ``dirs``: folders (parents of every file and link exist too); ``commands``: by argv tuple, argv[0] or
    its base name, values a ``RunResult``, ``(rc, stdout, stderr)`` or ``argv -> either``; ``runs``: the same by run
    name, tried first; ``which`` overrides ``PATH``; ``disk_free``: bytes, or path -> bytes; ``packages``: name ->
    ``PackageInfo``. An unknown command answers ``unknown_command``."""

    def __init__(
        self,
        files: Mapping[str, str | None | OSError] | None = None,
        links: Mapping[str, str] | None = None,
        dirs: Iterable[str] = (),
        commands: Mapping[tuple[str, ...] | str, CommandSpec] | None = None,
        environ: Mapping[str, str] | None = None,
        which: Mapping[str, str | None] | None = None,
        disk_free: int | Mapping[str, int] = 500 * 10**9,
        cpu_count: int | None = 8,
        machine: str = "x86_64",
        cwd: str = "/home/user/project",
        python_executable: str = "/home/user/project/.venv/bin/python",
        python_version: str = "3.11.9",
        python_prefix: str = "/home/user/project/.venv",
        base_prefix: str = "/usr",
        python_include_dir: str = "/usr/include/python3.11",
        packages: Mapping[str, PackageInfo | None] | None = None,
        runs: Mapping[str, CommandSpec] | None = None,
        unknown_command: str = "not found",
    ) -> None:
        # Deliberately no super().__init__(): nothing of the real machine leaks in.
        self.cwd = cwd
        self.files: dict[str, str | None | OSError] = {self._abs(p): v for p, v in (files or {}).items()}
        self.links: dict[str, str] = {self._abs(p): t for p, t in (links or {}).items()}
        self.dirs: set[str] = {"/"} | {self._abs(d) for d in dirs}
        for p in [*self.files, *self.links, *list(self.dirs)]:
            parent = posixpath.dirname(p)
            while parent not in self.dirs:
                self.dirs.add(parent)
                parent = posixpath.dirname(parent)
        self.commands: dict[tuple[str, ...] | str, CommandSpec] = dict(commands or {})
        self.runs: dict[str, CommandSpec] = dict(runs or {})
        self.environ: Mapping[str, str] = dict(environ or {})
        self._which = dict(which) if which is not None else None
        self._disk_free = disk_free
        self._cpu_count = cpu_count
        self._machine = machine
        self.python_executable = python_executable
        self.python_version = python_version
        self.python_prefix = python_prefix
        self.base_prefix = base_prefix
        self.python_include_dir = python_include_dir
        self.packages: dict[str, PackageInfo | None] = dict(packages or {})
        self.unknown_command = unknown_command
        self.calls: list[tuple[str, ...]] = []

    @classmethod
    def from_section(cls, section: Mapping[str, Json]) -> ReplayHost:
        """A host from a snapshot's ``host`` section (types checked by ``snapshot.py`` when it was read)."""
        files: dict[str, str | None | OSError] = dict(section.get("files") or {})
        for path, err in (section.get("errors") or {}).items():
            files[path] = OSError(int(err.get("errno") or 5), str(err.get("strerror") or "I/O error"), path)
        recorded = [run_result(tuple(map(str, c["argv"])), c) for c in section.get("commands") or []]
        commands: dict[tuple[str, ...] | str, CommandSpec] = {r.argv: r for r in recorded}
        runs: dict[str, CommandSpec] = {name: run_result(tuple(map(str, c.get("argv") or (name,))), c)
                                        for name, c in (section.get("runs") or {}).items()}
        packages = {name: (PackageInfo(name, str(p.get("version") or ""), str(p.get("location") or ""),
                                       tuple(p.get("requires") or ())) if p else None)
                    for name, p in (section.get("packages") or {}).items()}
        python = section.get("python") or {}
        disk = section.get("disk_free")
        return cls(
            files=files,
            links=section.get("links") or {},
            dirs=section.get("dirs") or (),
            commands=commands,
            environ=section.get("environ") or {},
            which=section.get("which") or {},
            disk_free=disk if isinstance(disk, (int, dict)) else {},
            cpu_count=section.get("cpu_count"),
            machine=str(section.get("machine") or ""),
            cwd=str(section.get("cwd") or "/"),
            **{attr: str(python.get(name) or "") for attr, name in PYTHON_FIELDS.items()},
            packages=packages,
            runs=runs,
            unknown_command=NOT_CAPTURED,
        )

    def _abs(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, path))

    def _resolve(self, path: str, depth: int = 0) -> str:
        """Follow links component by component, like os.path.realpath (non-strict)."""
        if depth > 40:
            raise OSError(40, "Too many levels of symbolic links", path)
        parts = self._abs(path).split("/")[1:]
        current = "/"
        for i, part in enumerate(parts):
            candidate = posixpath.join(current, part)
            if candidate in self.links:
                target = posixpath.join(posixpath.dirname(candidate), self.links[candidate])
                rest = "/".join(parts[i + 1:])
                resolved = self._resolve(target, depth + 1)
                return self._resolve(posixpath.join(resolved, rest), depth + 1) if rest else resolved
            current = candidate
        return current

    def _read_text(self, path: str) -> str:
        real = self._resolve(path)
        if real in self.files:
            value = self.files[real]
            if isinstance(value, OSError):
                raise value
            if value is None:
                raise OSError(5, f"content {NOT_CAPTURED}", path)
            return value
        if real in self.dirs:
            raise IsADirectoryError(21, "Is a directory", path)
        raise FileNotFoundError(2, "No such file or directory", path)

    def _real(self, path: str) -> str | None:
        """``_resolve``, or None for a loop of links."""
        try:
            return self._resolve(path)
        except OSError:
            return None

    def exists(self, path: str) -> bool:
        real = self._real(path)
        return real in self.files or real in self.dirs

    def is_dir(self, path: str) -> bool:
        return self._real(path) in self.dirs

    def is_symlink(self, path: str) -> bool:
        return self._abs(path) in self.links

    def readlink(self, path: str) -> str:
        p = self._abs(path)
        if p not in self.links:
            raise OSError(22, "Invalid argument", path)
        return self.links[p]

    def realpath(self, path: str) -> str:
        return self._real(path) or self._abs(path)

    def _entries(self) -> set[str]:
        return set(self.files) | set(self.links) | self.dirs

    def listdir(self, path: str) -> list[str]:
        real = self._resolve(path)
        if real not in self.dirs:
            if real in self.files:
                raise NotADirectoryError(20, "Not a directory", path)
            raise FileNotFoundError(2, "No such file or directory", path)
        # Entries are listed under the folder as named (a linked folder lists its target's entries).
        return sorted(posixpath.basename(p) for p in self._entries() if p != "/" and posixpath.dirname(p) == real)

    def glob(self, pattern: str) -> list[str]:
        pat = self._abs(pattern)
        return sorted(p for p in self._entries() if fnmatch.fnmatchcase(p, pat) and p.count("/") == pat.count("/"))

    def disk_free(self, path: str) -> int:
        if isinstance(self._disk_free, int):
            if not self.exists(path):
                raise FileNotFoundError(2, "No such file or directory", path)
            return self._disk_free
        real = self._resolve(path)
        if real not in self._disk_free:
            if self.unknown_command == NOT_CAPTURED:
                raise OSError(61, NOT_CAPTURED, path)
            raise FileNotFoundError(2, "No such file or directory", path)
        return int(self._disk_free[real])

    def _run(self, args: tuple[str, ...], timeout: float, env: dict[str, str] | None,
             name: str | None) -> RunResult:
        self.calls.append(args)
        keys = (args, args[0], posixpath.basename(args[0])) if args else (args,)
        spec = (self.runs.get(name) if name else None) or next((self.commands[k] for k in keys if k in self.commands),
                                                               None)
        if spec is None:
            return RunResult(args, None, error=self.unknown_command)
        answer = spec(args) if callable(spec) else spec
        if isinstance(answer, RunResult):
            return answer
        rc, out, err = answer
        return RunResult(args, rc, out, err, wall_s=0.001)

    def run_python(self, target: str, timeout: float, name: str, args: object = None,
                   env: Mapping[str, str] | None = None, paths: Sequence[str] = ()) -> RunResult:
        """The run recorded as ``name``, else a command answering for the Python itself."""
        return self._run((self.python_executable, target), timeout, None, name)

    def which(self, name: str) -> str | None:
        if self._which is not None and name in self._which:
            return self._which[name]
        if "/" in name:
            return self._abs(name) if self._resolve(name) in self.files else None
        found = (posixpath.join(self._abs(d), name) for d in self.environ.get("PATH", "").split(":") if d)
        return next((c for c in found if self.exists(c) and not self.is_dir(c)), None)

    def package(self, name: str) -> PackageInfo | None:
        return self.packages.get(name)

    def has_run(self, name: str) -> bool:
        """Whether the run ``name`` (``torch_runtime``) can be replayed; a section without one reads "not run"."""
        return self.unknown_command != NOT_CAPTURED or name in self.runs

    def cpu_count(self) -> int | None:
        return self._cpu_count

    def machine(self) -> str:
        return self._machine


def run_result(argv: tuple[str, ...], data: Mapping[str, Json]) -> RunResult:
    """A ``RunResult`` from its snapshot form (``returncode``, ``stdout``, ``stderr``, ...)."""
    rc = data.get("returncode")
    return RunResult(
        argv,
        int(rc) if isinstance(rc, int) else None,
        str(data.get("stdout") or ""),
        str(data.get("stderr") or ""),
        timed_out=bool(data.get("timed_out")),
        error=data.get("error"),
        wall_s=float(data.get("wall_s") or 0.0),
    )
