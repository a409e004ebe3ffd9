"""A fake ``Host`` for probe tests: an in-memory file system, canned commands and environment.

Feed it texts captured on real machines (``tests/fixtures/``), never invented ones.

Example: a WSL2 machine whose ``nvidia-smi`` works and whose libcuda.so.1 is a copy::

    host = FakeHost(
        files={
            "/proc/version": WSL2_PROC_VERSION,
            "/usr/lib/wsl/lib/libcuda.so.1.1": "",
            "/usr/lib/wsl/lib/libcuda.so.1": "",        # a regular file where a link belongs
        },
        links={"/usr/lib/x86_64-linux-gnu/libcuda.so.1": "/usr/lib/wsl/lib/libcuda.so.1"},
        dirs=["/dev/dxg"],
        commands={
            "nvidia-smi": (0, NVIDIA_SMI_Q, ""),          # keyed by argv[0] (name or full path)
            ("ldconfig", "-p"): (0, LDCONFIG_P, ""),        # or by the whole argv
            "dpkg-query": RunResult(("dpkg-query",), None, timed_out=True, error="timed out after 5 s"),
        },
        environ={"PATH": "/usr/bin:/usr/lib/wsl/lib", "WSL_DISTRO_NAME": "Ubuntu-22.04"},
    )

- ``files``: path -> text. A value that is an ``OSError`` instance is raised on read
  (e.g. ``PermissionError(13, "Permission denied")`` for /proc/1/environ).
- ``links``: path -> target (absolute or relative to the link's folder). A link whose
  target is not in the fake file system is broken: ``exists`` is False, ``is_symlink`` True.
- ``dirs``: folders that exist even if empty; parents of every file and link exist too.
- ``commands``: keyed by the argv tuple, by argv[0] as given, or by argv[0]'s base name
  (tried in that order). Values: a ``RunResult``, an ``(rc, stdout, stderr)`` tuple, or a
  callable ``argv -> either``. An unknown command gives ``error="not found"``, like a
  missing binary. Every call is appended to ``calls`` (tuples) for assertions.
- ``which``: name -> path or None, overriding the lookup; by default ``which`` searches
  the fake ``PATH`` in ``environ`` for a file of that name in the fake file system.
- ``disk_free``: bytes free, one number for every path or a dict path -> bytes (paths
  not listed raise FileNotFoundError).
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable, Iterable, Mapping

from envcheck.probes.host import Host, RunResult

CommandAnswer = RunResult | tuple[int, str, str]
CommandSpec = CommandAnswer | Callable[[tuple[str, ...]], CommandAnswer]


class FakeHost(Host):
    """A machine made of dictionaries; see the module docstring."""

    def __init__(
        self,
        files: Mapping[str, str | OSError] | None = None,
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
    ) -> None:
        # Deliberately no super().__init__(): nothing of the real machine leaks in.
        self.cwd = cwd
        self.files: dict[str, str | OSError] = {self._abs(p): v for p, v in (files or {}).items()}
        self.links: dict[str, str] = {self._abs(p): t for p, t in (links or {}).items()}
        self.dirs: set[str] = {"/"} | {self._abs(d) for d in dirs}
        for p in [*self.files, *self.links, *list(self.dirs)]:
            parent = posixpath.dirname(p)
            while parent not in self.dirs:
                self.dirs.add(parent)
                parent = posixpath.dirname(parent)
        self.commands: dict[tuple[str, ...] | str, CommandSpec] = dict(commands or {})
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
        self.calls: list[tuple[str, ...]] = []

    # ----------------------------------------------------------------- paths

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

    # ----------------------------------------------------------------- Host API

    def read_text(self, path: str) -> str:
        real = self._resolve(path)
        if real in self.files:
            value = self.files[real]
            if isinstance(value, OSError):
                raise value
            return value
        if real in self.dirs:
            raise IsADirectoryError(21, "Is a directory", path)
        raise FileNotFoundError(2, "No such file or directory", path)

    def exists(self, path: str) -> bool:
        try:
            real = self._resolve(path)
        except OSError:
            return False
        return real in self.files or real in self.dirs

    def is_dir(self, path: str) -> bool:
        try:
            return self._resolve(path) in self.dirs
        except OSError:
            return False

    def is_symlink(self, path: str) -> bool:
        return self._abs(path) in self.links

    def readlink(self, path: str) -> str:
        p = self._abs(path)
        if p not in self.links:
            raise OSError(22, "Invalid argument", path)
        return self.links[p]

    def realpath(self, path: str) -> str:
        try:
            return self._resolve(path)
        except OSError:
            return self._abs(path)

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
            raise FileNotFoundError(2, "No such file or directory", path)
        return self._disk_free[real]

    def run(self, argv: list[str], timeout: float, env: dict[str, str] | None = None) -> RunResult:
        args = tuple(argv)
        self.calls.append(args)
        spec: CommandSpec | None = None
        for key in (args, args[0] if args else "", posixpath.basename(args[0]) if args else ""):
            if key in self.commands:
                spec = self.commands[key]
                break
        if spec is None:
            return RunResult(args, None, error="not found")
        answer = spec(args) if callable(spec) else spec
        if isinstance(answer, RunResult):
            return answer
        rc, out, err = answer
        return RunResult(args, rc, out, err, wall_s=0.001)

    def which(self, name: str) -> str | None:
        if self._which is not None and name in self._which:
            return self._which[name]
        if "/" in name:
            return self._abs(name) if self._resolve(name) in self.files else None
        for d in self.environ.get("PATH", "").split(":"):
            if d:
                candidate = posixpath.join(self._abs(d), name)
                if self.exists(candidate) and not self.is_dir(candidate):
                    return candidate
        return None

    def cpu_count(self) -> int | None:
        return self._cpu_count

    def machine(self) -> str:
        return self._machine
