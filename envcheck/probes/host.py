"""The host seam: every file read, subprocess, environment variable and PATH lookup a probe makes, so a machine can
be recorded (``recording.py``) and replayed (``replay.py``). File methods raise ``OSError`` like ``os``; ``run``
never raises; ``read_text`` and ``run`` redact what crosses the seam, so no probe can forget to."""

from __future__ import annotations

import functools
import glob as _glob
import json
import math
import os
import platform
import shutil
import sys
import sysconfig
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from envcheck.harness import command
from envcheck.harness.command import RunResult
from envcheck.harness.env import clean_env
from envcheck.probes.packages import PackageInfo, find_package
from envcheck.redact import Redactor

MEMINFO = "/proc/meminfo"
# A Host's interpreter attributes, as a snapshot's ``python`` object names them.
PYTHON_FIELDS = {"python_executable": "executable", "python_version": "version", "python_prefix": "prefix",
                 "base_prefix": "base_prefix", "python_include_dir": "include_dir"}
# A Python child's events, one a line after this, in a run's stdout: how snapshots record them.
MARKER = "@@envcheck-json@@ "
Emit = Callable[[dict[str, object]], None]  # how a probe's child sends an event (the harness's ``out``)


def parse_meminfo(text: str) -> tuple[int, int | None]:
    """(MemTotal, MemAvailable) in bytes (MemAvailable None before kernel 3.14); ValueError without MemTotal."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1] == "kB" else 1
            values[name.strip()] = int(parts[0]) * scale
    if "MemTotal" not in values:
        raise ValueError("no MemTotal line")
    return values["MemTotal"], values.get("MemAvailable")


class Host:
    """The real machine. Subclassed by the test fake; probes use only these members."""

    def __init__(self) -> None:
        self.environ: Mapping[str, str] = os.environ
        self.python_executable: str = sys.executable or ""
        self.python_version: str = platform.python_version()
        self.python_prefix: str = sys.prefix
        self.base_prefix: str = sys.base_prefix
        # Where Python.h lives for this interpreter (a venv shares its base's headers).
        self.python_include_dir: str = sysconfig.get_paths().get("include", "")

    @property
    def redactor(self) -> Redactor:
        """Built from ``environ`` as it is now (tests and the recorder replace it after __init__)."""
        return Redactor(self.environ)

    def read_text(self, path: str) -> str:
        """The file's text, secrets redacted; raises ``OSError`` like ``open``."""
        return self.redactor.text(self._read_text(path))

    def text_or_none(self, path: str) -> str | None:
        try:
            return self.read_text(path)
        except OSError:
            return None

    def _read_text(self, path: str) -> str:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def is_symlink(self, path: str) -> bool:
        return os.path.islink(path)

    def readlink(self, path: str) -> str:
        return os.readlink(path)

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def glob(self, pattern: str) -> list[str]:
        return sorted(_glob.glob(pattern))

    def disk_free(self, path: str) -> int:
        """Bytes available to an unprivileged user on the file system holding ``path``."""
        return shutil.disk_usage(path).free

    def run(self, argv: list[str], timeout: float, env: dict[str, str] | None = None,
            name: str | None = None) -> RunResult:
        """Run ``argv`` (no shell) and collect its output, secrets redacted; never raises (KeyboardInterrupt aside,
        after killing the child). ``env``: the environment the allow-list is cut from (this process's by default).
        ``name`` gives the run a stable identity in snapshots (``torch_runtime``)."""
        args = tuple(argv)
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            return RunResult(args, None, error=f"invalid timeout {timeout!r} (a positive number of seconds)")
        res = self._run(args, timeout, env, name)
        r = self.redactor
        return replace(res, stdout=r.text(res.stdout), stderr=r.text(res.stderr),
                       error=r.text(res.error) if res.error else res.error)

    def _run(self, args: tuple[str, ...], timeout: float, env: dict[str, str] | None,
             name: str | None) -> RunResult:
        ran = command.run(args, timeout, env=clean_env(base=env))
        return replace(ran, returncode=None) if ran.timed_out else ran

    def run_python(self, target: str, timeout: float, name: str, args: object = None,
                   env: Mapping[str, str] | None = None, paths: Sequence[str] = ()) -> RunResult:
        """``target`` (``module:function``) in an isolated child of ``python_executable``, its one limit ``timeout``: its
        events as stdout lines after ``MARKER``. Never raises, KeyboardInterrupt aside (after the child is ended)."""
        from envcheck.harness import failures as f
        from envcheck.harness.spawn import spawn

        events: list[object] = []
        out = spawn(target, args, timeout=timeout, heartbeat=timeout, on_event=events.append, env=env,
                    python=self.python_executable, paths=paths)
        if isinstance(out.failure, f.Stopped):
            raise KeyboardInterrupt(out.failure.signal)
        argv = (self.python_executable, target)
        if isinstance(out.failure, f.SpawnFailed):
            kind = out.failure.error.partition(":")[0]
            why = {"FileNotFoundError": "not found", "PermissionError": "permission denied"}.get(kind)
            return RunResult(argv, None, error=why or f"cannot start ({out.failure.error})", wall_s=out.wall_s)
        timed_out = isinstance(out.failure, (f.Timeout, f.Hang))
        stdout = "".join(f"{MARKER}{json.dumps(e)}\n" for e in events)
        return RunResult(argv, None if timed_out else out.returncode, stdout, out.stderr_tail, timed_out,
                         f"timed out after {timeout:g} s" if timed_out else None, out.wall_s)

    def which(self, name: str) -> str | None:
        """Path of ``name`` on the PATH of ``environ`` (not of this process), or None."""
        return shutil.which(name, path=self.environ.get("PATH", os.defpath))

    def package(self, name: str) -> PackageInfo | None:
        """The installed distribution ``name`` (pip's metadata, no import), or None."""
        return find_package(name)

    def cpu_count(self) -> int | None:
        return os.cpu_count()

    def machine(self) -> str:
        return platform.machine()

    def has_run(self, name: str) -> bool:
        """Whether the named run (``torch_runtime``) can run here: always, on a real machine."""
        return True

    def memory(self) -> tuple[int, int | None]:
        """(total_bytes, available_bytes) from /proc/meminfo; raises OSError when unreadable."""
        text = self.read_text(MEMINFO)
        try:
            return parse_meminfo(text)
        except ValueError as e:
            raise OSError(f"{MEMINFO}: {e}") from None


@functools.cache
def default_host() -> Host:
    return Host()
