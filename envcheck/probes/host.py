"""The host seam: every file read, subprocess, environment variable and PATH lookup a probe makes.

Probes take a ``Host`` and never touch ``os``, ``open`` or ``subprocess`` themselves, so a
test swaps in a fake fed with outputs captured on real machines (``tests/fakes.py``).

File methods raise ``OSError`` like their ``os`` counterparts: the probe turns the error
into a recorded reason. ``run`` never raises: a missing binary, a crash or a hang all come
back as a ``RunResult``.
"""

from __future__ import annotations

import glob as _glob
import os
import platform
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Mapping
from dataclasses import dataclass

MEMINFO = "/proc/meminfo"


@dataclass(frozen=True)
class RunResult:
    """What one subprocess did. ``returncode`` is None when it never ran to an exit status
    (not found, not executable, killed on timeout); ``error`` then says why."""

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
    """(MemTotal, MemAvailable) in bytes from /proc/meminfo text.

    MemAvailable is None on kernels older than 3.14, which lack it. Raises ValueError
    when MemTotal is absent (not a meminfo file).
    """
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

    # ----------------------------------------------------------------- files

    def read_text(self, path: str) -> str:
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

    # ----------------------------------------------------------------- processes

    def run(self, argv: list[str], timeout: float, env: dict[str, str] | None = None) -> RunResult:
        """Run ``argv`` (no shell) and collect its output; never raises.

        ``env`` replaces the whole environment of the child when given. The child runs in
        its own session so that a timeout kills it and everything it started: a hung
        ``nvidia-smi`` or compiler must not outlive the probe.
        """
        args = tuple(argv)
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError:
            return RunResult(args, None, error="not found", wall_s=time.perf_counter() - start)
        except PermissionError:
            return RunResult(args, None, error="permission denied", wall_s=time.perf_counter() - start)
        except (OSError, ValueError) as e:
            return RunResult(args, None, error=f"cannot start ({e})", wall_s=time.perf_counter() - start)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                out, err = proc.communicate(timeout=2.0)
            except subprocess.TimeoutExpired:
                # A grandchild that left the group still holds the pipes: give up on its output.
                out, err = b"", b""
            return RunResult(
                args, None, _decode(out), _decode(err), timed_out=True,
                error=f"timed out after {timeout:g} s", wall_s=time.perf_counter() - start,
            )
        return RunResult(args, proc.returncode, _decode(out), _decode(err), wall_s=time.perf_counter() - start)

    # ----------------------------------------------------------------- lookups

    def which(self, name: str) -> str | None:
        """Path of ``name`` on the PATH of ``environ`` (not of this process), or None."""
        return shutil.which(name, path=self.environ.get("PATH", os.defpath))

    def cpu_count(self) -> int | None:
        return os.cpu_count()

    def machine(self) -> str:
        return platform.machine()

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
        proc.kill()


_DEFAULT: Host | None = None


def default_host() -> Host:
    """The real machine (one shared instance)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Host()
    return _DEFAULT
