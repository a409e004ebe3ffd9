"""The host seam, recorded (``envcheck snapshot``): the real machine, answering as :class:`Host` does, writing down
each answer (already redacted) as a file system a ``ReplayHost`` answers from as the machine would: every link on
a touched path with its target, the path as a file (its text if read), a folder or a link."""

from __future__ import annotations

import os
import posixpath
import stat
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence

from envcheck.probes.host import PYTHON_FIELDS, Host, RunResult
from envcheck.probes.packages import PackageInfo
from envcheck.redact import redact_value


class RecordingEnviron(Mapping[str, str]):
    """The real environment; remembers the variables a probe read (never the others)."""

    def __init__(self, real: Mapping[str, str]) -> None:
        self._real = real
        self.read: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        value = self._real[name]
        self.read[name] = redact_value(name, value)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._real)

    def __len__(self) -> int:
        return len(self._real)


class RecordingHost(Host):
    """The real machine, recorded (see the module docstring); ``section()`` is the snapshot's host part."""

    def __init__(self) -> None:
        super().__init__()
        self._real_environ = self.environ
        self.environ = RecordingEnviron(self._real_environ)
        self._lock = threading.RLock()
        self.cwd = os.getcwd()
        self.files: dict[str, str | None] = {}
        self.errors: dict[str, dict[str, int | str | None]] = {}
        self.links: dict[str, str] = {}
        self.dirs: set[str] = set()
        self.which_answers: dict[str, str | None] = {}
        self.disk_answers: dict[str, int] = {}
        self.commands: list[dict[str, object]] = []
        self.runs: dict[str, dict[str, object]] = {}
        self.packages: dict[str, dict[str, object] | None] = {}
        self._cpu_count: int | None = None
        self._machine: str | None = None

    @property
    def redactor(self):  # type: ignore[override]
        from envcheck.redact import Redactor

        # Secrets are looked up in the whole environment, not only in what probes read.
        return Redactor(self._real_environ)

    def _abs(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, path))

    def _note(self, path: str, depth: int = 0) -> None:
        """Record ``path`` and every link on the way to it, as they are on disk."""
        if depth > 40:
            return
        path = self._abs(path)
        parts = path.split("/")[1:]
        current = "/"
        for i, part in enumerate(parts):
            current = posixpath.join(current, part)
            try:
                st = os.lstat(current)
            except OSError:
                return  # absent from here on: absent in the replay too
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(current)
                except OSError:
                    return
                with self._lock:
                    self.links[current] = target
                resolved = posixpath.join(posixpath.dirname(current), target)
                rest = "/".join(parts[i + 1:])
                self._note(posixpath.join(resolved, rest) if rest else resolved, depth + 1)
                return
            if i == len(parts) - 1:
                with self._lock:
                    if stat.S_ISDIR(st.st_mode):
                        self.dirs.add(current)
                    else:
                        self.files.setdefault(current, None)

    def read_text(self, path: str) -> str:
        try:
            text = super().read_text(path)
        except OSError as e:
            with self._lock:
                self.errors[self._abs(path)] = {"errno": e.errno, "strerror": e.strerror or str(e)}
            raise
        finally:
            self._note(path)
        with self._lock:
            self.files[self._abs(os.path.realpath(path))] = text
        return text

    def listdir(self, path: str) -> list[str]:
        names = super().listdir(path)
        self._note(path)
        for name in names:
            self._note(posixpath.join(self._abs(path), name))
        return names

    def glob(self, pattern: str) -> list[str]:
        found = super().glob(pattern)
        for p in found:
            self._note(p)
        return found

    def disk_free(self, path: str) -> int:
        free = super().disk_free(path)
        with self._lock:
            self.disk_answers[self._abs(os.path.realpath(path))] = free
        return free

    def run(self, argv: list[str], timeout: float, env: dict[str, str] | None = None,
            name: str | None = None) -> RunResult:
        return self._record(super().run(argv, timeout, env=env, name=name), name)

    def run_python(self, target: str, timeout: float, name: str, args: object = None,
                   env: Mapping[str, str] | None = None, paths: Sequence[str] = ()) -> RunResult:
        return self._record(super().run_python(target, timeout, name, args, env, paths), name)

    def _record(self, res: RunResult, name: str | None) -> RunResult:
        entry: dict[str, object] = {"argv": list(res.argv), "returncode": res.returncode, "stdout": res.stdout, "stderr": res.stderr,
                 "timed_out": res.timed_out, "error": res.error, "wall_s": round(res.wall_s, 3)}
        with self._lock:
            if name:
                # The argv of a named run holds envcheck's own code: the name identifies it.
                entry["argv"] = [res.argv[0]] if res.argv else []
                self.runs[name] = entry
            else:
                self.commands.append(entry)
        return res

    def which(self, name: str) -> str | None:
        found = super().which(name)
        with self._lock:
            self.which_answers[name] = found
        if found:
            self._note(found)
        return found

    def package(self, name: str) -> PackageInfo | None:
        pkg = super().package(name)
        with self._lock:
            self.packages[name] = None if pkg is None else {
                "version": pkg.version, "location": pkg.location, "requires": list(pkg.requires)}
        return pkg

    def cpu_count(self) -> int | None:
        self._cpu_count = super().cpu_count()
        return self._cpu_count

    def machine(self) -> str:
        self._machine = super().machine()
        return self._machine

    def section(self) -> dict[str, object]:
        with self._lock:
            return {
                "machine": self._machine if self._machine is not None else super().machine(),
                "cpu_count": self._cpu_count if self._cpu_count is not None else super().cpu_count(),
                "cwd": self.cwd,
                "python": {name: getattr(self, attr) for attr, name in PYTHON_FIELDS.items()},
                "environ": dict(sorted(self.environ.read.items())),
                "files": dict(sorted(self.files.items())),
                "errors": dict(sorted(self.errors.items())),
                "links": dict(sorted(self.links.items())),
                "dirs": sorted(self.dirs),
                "which": dict(sorted(self.which_answers.items())),
                "disk_free": dict(sorted(self.disk_answers.items())),
                "commands": list(self.commands),
                "runs": dict(sorted(self.runs.items())),
                "packages": dict(sorted(self.packages.items())),
            }


def _noting(name: str) -> Callable[[RecordingHost, str], object]:
    """``Host.<name>(path)``, the path recorded first (every link on the way included)."""
    asked = getattr(Host, name)

    def method(self: RecordingHost, path: str) -> object:
        self._note(path)
        return asked(self, path)

    return method


for _name in ("exists", "is_dir", "is_symlink", "readlink", "realpath"):
    setattr(RecordingHost, _name, _noting(_name))
