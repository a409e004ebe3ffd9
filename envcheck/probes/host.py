"""The host seam: every file read, subprocess, environment variable and PATH lookup a probe makes.

Probes never touch ``os``, ``open`` or ``subprocess`` themselves, so a machine can be recorded (``recording.py``) and
replayed (``replay.py``). File methods raise ``OSError`` like ``os``; ``run`` never raises. The public ``read_text``
and ``run`` redact every text that crosses the seam, so no probe can forget to.
"""

from __future__ import annotations

import contextlib
import functools
import glob as _glob
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from envcheck.child_env import child_env
from envcheck.probes.packages import PackageInfo, find_package
from envcheck.redact import Redactor

MEMINFO = "/proc/meminfo"
# A Host's interpreter attributes, as a snapshot's ``python`` object names them.
PYTHON_FIELDS = {"python_executable": "executable", "python_version": "version", "python_prefix": "prefix",
                 "base_prefix": "base_prefix", "python_include_dir": "include_dir"}


@dataclass(frozen=True)
class RunResult:
    """What one subprocess did; ``returncode`` None when it never exited (``error`` says why)."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None  # "not found", "permission denied", "timed out after 5 s", ...
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        """One line for a reason: why this run gave no usable output."""
        name = self.argv[0] if self.argv else "command"
        if self.error:
            return f"{name}: {self.error}"
        if self.returncode is not None and self.returncode != 0:
            last = (self.stderr.strip() or self.stdout.strip()).splitlines()
            tail = f": {last[-1].strip()[:200]}" if last else ""
            return f"{name} exited with status {self.returncode}{tail}"
        return f"{name}: no output"


def parse_meminfo(text: str) -> tuple[int, int | None]:
    """(MemTotal, MemAvailable) in bytes from /proc/meminfo text; MemAvailable is None before kernel 3.14.
    ValueError when MemTotal is absent (not a meminfo file)."""
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
        after killing the child). ``env`` replaces the child's whole environment (``child_env.py``). ``name`` gives
        the run a stable identity in snapshots (``torch_runtime``): a runtime probe's code changes, its purpose not."""
        args = tuple(argv)
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            return RunResult(args, None, error=f"invalid timeout {timeout!r} (a positive number of seconds)")
        res = self._run(args, timeout, env, name)
        r = self.redactor
        return replace(res, stdout=r.text(res.stdout), stderr=r.text(res.stderr),
                       error=r.text(res.error) if res.error else res.error)

    def _run(self, args: tuple[str, ...], timeout: float, env: dict[str, str] | None,
             name: str | None) -> RunResult:
        """The child runs in its own session: a timeout (or Ctrl-C) kills it and all it started."""
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=child_env(base=env), start_new_session=True)
        except (OSError, ValueError) as e:
            error = ("not found" if isinstance(e, FileNotFoundError) else "permission denied"
                     if isinstance(e, PermissionError) else f"cannot start ({e})")
            return RunResult(args, None, error=error, wall_s=time.perf_counter() - start)
        with _LIVE_LOCK:
            _LIVE.add(proc)
        try:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                try:
                    out, err = proc.communicate(timeout=2.0)
                except subprocess.TimeoutExpired:
                    # A grandchild that left the group still holds the pipes: give up on its output.
                    out, err = b"", b""
                return RunResult(args, None, _decode(out), _decode(err), timed_out=True,
                                 error=f"timed out after {timeout:g} s", wall_s=time.perf_counter() - start)
            except BaseException:
                # Ctrl-C while waiting: the child, in its own session, never saw SIGINT; it dies with us.
                _kill_group(proc)
                raise
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(proc)
        return RunResult(args, proc.returncode, _decode(out), _decode(err), wall_s=time.perf_counter() - start)

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


def _decode(data: bytes | None) -> str:
    return data.decode("utf-8", errors="replace") if data else ""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(OSError):
            proc.kill()


# Children started by Host._run that have not been waited for yet, from any thread.
_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()


def terminate_children(wait_s: float = 2.0) -> int:
    """Kill the process group of every child a Host still waits for (Ctrl-C reached only the main thread); how many."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for proc in live:
        _kill_group(proc)
    deadline = time.monotonic() + wait_s
    for proc in live:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    return len(live)


@functools.cache
def default_host() -> Host:
    return Host()
