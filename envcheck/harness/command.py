"""Any other program envcheck runs (nvidia-smi, nccl-tests, torchrun): the environment rule of a Python child, a
session of its own, killed with everything in it on a time limit, Ctrl-C or a stop signal."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from envcheck.harness import scope
from envcheck.harness.child import PR_SET_PDEATHSIG
from envcheck.harness.env import clean_env

READ_CHUNK = 64 << 10
DRAIN_S = 2.0  # after a kill: a grandchild that left the group may hold the pipes; its output is given up


@dataclass(frozen=True)
class RunResult:
    """What one program did; ``returncode`` None where it never ran to an exit status, ``error`` says why."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None  # "not found", "permission denied", "timed out after 5 s", ...
    wall_s: float = 0.0
    over: bool = False  # stopped as ``over()`` held

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


def parent_death_signal(sig: int = signal.SIGTERM) -> Callable[[], bool] | None:
    """On Linux, a ``preexec_fn`` asking for ``sig`` when the parent dies, even by SIGKILL; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).prctl  # loaded before a fork: the child only calls it
    except (OSError, AttributeError):
        return None
    return lambda: bool(call(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0)


def run(argv: Sequence[str], timeout: float, *, env: Mapping[str, str] | None = None, merge: bool = False,
        sink: Callable[[bytes], None] | None = None, grace_s: float = 0.0, die_with_parent: bool = False,
        over: Callable[[], bool] | None = None) -> RunResult:
    """Run ``argv`` (no shell) to its end, ``timeout`` or ``over()`` (asked each second; stopped then, not timed
    out); never raises for what it does. ``env``: its whole environment (default: ``clean_env()``); ``merge``:
    stderr into stdout; ``sink``: the output as it comes. Ctrl-C (or any exception) kills it first, then goes on."""
    start, args = time.monotonic(), tuple(argv)
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if merge else subprocess.PIPE, start_new_session=True,
                                env=dict(env) if env is not None else clean_env(),
                                preexec_fn=parent_death_signal() if die_with_parent else None)
    except (OSError, ValueError) as e:
        why = {FileNotFoundError: "not found", PermissionError: "permission denied"}.get(type(e), f"cannot start ({e})")
        return RunResult(args, None, error=why, wall_s=time.monotonic() - start)
    group = scope.Session(proc)
    got: dict[int, list[bytes]] = {}
    with scope.live(group):
        try:
            ended = _read(proc, got, sink, start + timeout, over)
            if ended:
                try:
                    proc.wait(timeout=max(start + timeout - time.monotonic(), 0.001))
                except subprocess.TimeoutExpired:  # its output closed, it did not end
                    ended = False
            timed_out = not ended and time.monotonic() >= start + timeout
            if not ended:
                group.stop(grace_s)
                _read(proc, got, sink, time.monotonic() + DRAIN_S)
                proc.wait()
        except BaseException:
            group.stop(0.0)
            raise
    out, err = ("" if p is None else b"".join(got.get(p.fileno(), [])).decode("utf-8", "replace")
                for p in (proc.stdout, proc.stderr))
    for p in (proc.stdout, proc.stderr):
        if p:
            p.close()
    return RunResult(args, proc.returncode, out, err, timed_out, f"timed out after {timeout:g} s" if timed_out else None,
                     time.monotonic() - start, not ended and not timed_out)


def _read(proc: subprocess.Popen[bytes], got: dict[int, list[bytes]], sink: Callable[[bytes], None] | None,
          deadline: float, over: Callable[[], bool] | None = None) -> bool:
    """Its output until both pipes close (True), ``deadline`` or ``over()`` (False)."""
    with selectors.DefaultSelector() as sel:
        for p in (proc.stdout, proc.stderr):
            if p is not None and not p.closed:
                sel.register(p, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0 or (over is not None and over()):
                return False
            for key, _ in sel.select(min(left, 1.0)):
                data = os.read(key.fd, READ_CHUNK)
                if not data:
                    sel.unregister(key.fileobj)
                elif sink is not None:
                    sink(data)
                else:
                    got.setdefault(key.fd, []).append(data)
    return True
