"""Everything a child leads to, found and ended, also what left its tree: this process is a child subreaper
(Linux), each child carries ``ENVCHECK_SCOPE`` (inherited, readable in /proc), and its session is looked at;
only a double fork that also clears the environment and starts a new session escapes all three.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from envcheck.harness.child import PR_SET_CHILD_SUBREAPER, prctl

SCOPE_VAR = "ENVCHECK_SCOPE"
ROUNDS = 5  # kill, look again: a process may start another while it is being stopped

T = TypeVar("T")
_counter = itertools.count(1)
_lock = threading.Lock()
_subreaper: bool | None = None


def new_token() -> str:
    """A token no other child of this process has (``ENVCHECK_SCOPE``'s value)."""
    return f"{os.getpid()}.{next(_counter)}"


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux; once): orphaned descendants become its children."""
    global _subreaper
    with _lock:
        if _subreaper is None:
            _subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1)
        return _subreaper


def _ask(question: Callable[[], T], default: T) -> T:
    """``question()`` about a process, or ``default`` where it is gone or not ours to see."""
    import psutil

    try:
        return question()
    except (psutil.Error, OSError):
        return default


def members(token: str, root: int | None = None) -> list[Any]:
    """The live descendants of this process in ``root``'s tree or session, or carrying ``token`` (in the environment
    it started with, which /proc keeps)."""
    import psutil

    ours = _ask(lambda: psutil.Process().children(recursive=True), [])
    tree = {p.pid for p in _ask(lambda: psutil.Process(root).children(recursive=True), [])} if root else set()
    return [p for p in ours if p.pid in tree or (root is not None and _ask(lambda p=p: os.getsid(p.pid), None) == root)
            or _ask(lambda p=p: p.environ().get(SCOPE_VAR), None) == token]


def resident_bytes(procs: list[Any]) -> int:
    return sum(_ask(lambda p=p: int(p.memory_info().rss), 0) for p in procs)


def end(token: str, root: int | None = None, *, session: int | None = None, wait_s: float = 2.0) -> None:
    """Kill every process of scope ``token`` but ``root`` (its ``Popen`` reaps it) and reap those this process
    adopted, adopted zombies of ``session`` too."""
    import psutil

    killed: dict[int, Any] = {}
    for _ in range(ROUNDS):
        alive = [p for p in members(token, root)
                 if p.pid != root and _ask(lambda p=p: p.status() != psutil.STATUS_ZOMBIE, False)]
        if not alive:
            break
        for p in alive:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                p.send_signal(signal.SIGKILL)
                killed[p.pid] = p
    if session is not None:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            for p in psutil.Process().children():
                if p.pid != root and p.status() == psutil.STATUS_ZOMBIE and os.getsid(p.pid) == session:
                    killed.setdefault(p.pid, p)
    killed.pop(root if root is not None else -1, None)
    _reap(list(killed.values()), wait_s)


def _reap(procs: list[Any], wait_s: float) -> None:
    """Collect the exit of each killed process that is (or becomes) this process's child; ``is_running`` compares
    start times, so a reused pid is never waited for."""
    import psutil

    me = os.getpid()
    deadline = time.monotonic() + wait_s
    left = list(procs)
    while left:
        still = []
        for p in left:
            try:
                if not p.is_running():
                    continue
                if p.ppid() != me:
                    still.append(p)
                    continue
                done, _ = os.waitpid(p.pid, os.WNOHANG)
            except (psutil.NoSuchProcess, ChildProcessError):
                continue
            if not done:
                still.append(p)
        left = still
        if not left or time.monotonic() >= deadline:
            return
        time.sleep(0.02)


class Killable(Protocol):
    def kill_now(self) -> None: ...


class Session:
    """A child started in a session of its own: signalled there (itself and what it started in it)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(OSError):
                self.proc.send_signal(sig)

    def kill_now(self) -> None:
        self.signal(signal.SIGKILL)

    def stop(self, grace_s: float) -> None:
        """SIGTERM, SIGKILL after ``grace_s`` (at once without one, or on a second Ctrl-C), then reaped."""
        if grace_s > 0 and self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
                self.proc.wait(timeout=grace_s)
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=max(grace_s, 1.0))


_LIVE: set[Killable] = set()


@contextmanager
def live(child: Killable) -> Iterator[None]:
    """``child`` is known to ``end_all`` inside."""
    with _lock:
        _LIVE.add(child)
    try:
        yield
    finally:
        with _lock:
            _LIVE.discard(child)


def end_all() -> int:
    """Kill every child still running, from any thread (Ctrl-C reaches the main thread only); how many."""
    with _lock:
        children = list(_LIVE)
    for child in children:
        child.kill_now()
    return len(children)
