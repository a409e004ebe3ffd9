"""Everything a child leads to, found and ended, also what left its tree (a helper in a session of its
own whose parent exited). This process becomes a child subreaper (Linux), so orphans stay its
descendants; each child carries ``ENVCHECK_SCOPE`` (inherited by its descendants, readable in /proc
even after they change their environment); and a process that cleared its environment but stayed in
the child's session is found by that. Only a double fork that also clears the environment and starts
a new session escapes all three.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from envcheck.harness.child import PR_SET_CHILD_SUBREAPER, prctl

SCOPE_VAR = "ENVCHECK_SCOPE"
ROUNDS = 5  # kill, look again: a process may start another while it is being stopped

_counter = itertools.count(1)
_lock = threading.Lock()
_subreaper: bool | None = None


def new_token() -> str:
    """A token no other child of this process has (``ENVCHECK_SCOPE``'s value)."""
    return f"{os.getpid()}.{next(_counter)}"


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux; once); whether it is one. Orphaned
    descendants then become this process's children until it reaps them (``end``)."""
    global _subreaper
    with _lock:
        if _subreaper is None:
            _subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1)
        return _subreaper


def members(token: str, root: int | None = None) -> list[Any]:
    """The live psutil processes of scope ``token``: the descendants of this process that are in ``root``'s
    tree or session (root: a child of this process, leader of its own session) or whose environment carries
    the token."""
    import psutil

    try:
        ours = psutil.Process().children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    try:
        tree = {p.pid for p in psutil.Process(root).children(recursive=True)} if root is not None else set()
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # root is gone: its session and token still say
        tree = set()
    return [p for p in ours if p.pid in tree or (root is not None and _session(p.pid) == root) or _token_of(p) == token]


def resident_bytes(procs: list[Any]) -> int:
    import psutil

    total = 0
    for p in procs:
        try:
            total += int(p.memory_info().rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _token_of(p: Any) -> str | None:
    """``p``'s scope token, from the environment it started with (/proc keeps it)."""
    import psutil

    try:
        return p.environ().get(SCOPE_VAR)  # type: ignore[no-any-return]
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return None


def end(token: str, root: int | None = None, *, session: int | None = None, wait_s: float = 2.0) -> None:
    """Kill every process of scope ``token`` (``root``'s tree included, ``root`` itself excepted)
    and reap those this process adopted; also reap adopted zombies of ``session`` (the worker's
    session: an orphan that died by itself). ``root`` is left to its ``Popen`` to reap."""
    import psutil

    killed: dict[int, Any] = {}
    for _ in range(ROUNDS):
        alive = [p for p in members(token, root) if p.pid != root and _running(p)]
        if not alive:
            break
        for p in alive:
            try:
                p.send_signal(signal.SIGKILL)
                killed[p.pid] = p
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
    if session is not None:
        try:
            for p in psutil.Process().children():
                if p.pid != root and p.status() == psutil.STATUS_ZOMBIE and os.getsid(p.pid) == session:
                    killed.setdefault(p.pid, p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            pass
    killed.pop(root if root is not None else -1, None)
    _reap(list(killed.values()), wait_s)


def _running(p: Any) -> bool:
    import psutil

    try:
        return bool(p.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _reap(procs: list[Any], wait_s: float) -> None:
    """Collect the exit of each killed process that is (or becomes, as its parent dies) this
    process's child; its own parent reaps the others. ``is_running`` compares start times, so a
    pid reused by a new child of another thread's ``Popen`` is never waited for here."""
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
        """SIGTERM, then SIGKILL after ``grace_s`` (at once without one, or on a second Ctrl-C), then reaped."""
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
    """``child`` is known to ``end_all`` while inside."""
    with _lock:
        _LIVE.add(child)
    try:
        yield
    finally:
        with _lock:
            _LIVE.discard(child)


def end_all() -> int:
    """Kill every child still running, from any thread; how many there were (Ctrl-C reaches the main
    thread only, while children started from other threads wait there)."""
    with _lock:
        children = list(_LIVE)
    for child in children:
        child.kill_now()
    return len(children)
