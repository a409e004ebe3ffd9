"""Everything a started child leads to, found and ended: the child, its descendants, and the
processes that left its tree.

A user's code (or a library) may start a process in a session of its own
(``subprocess.Popen(..., start_new_session=True)``, fork + setsid) and let its parent exit: it is
then nobody's descendant, and stopping the worker's process group or its tree misses it. Three
things find it all the same:

- on Linux, envcheck makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``) before it
  starts the first worker: an orphaned descendant is re-parented to envcheck, not to PID 1, so it
  stays a descendant of envcheck and can be reaped;
- every started child gets ``ENVCHECK_SCOPE`` in its environment, a token of its own, which its
  descendants inherit (a process's initial environment stays readable in /proc even after it
  changes ``os.environ``): among envcheck's descendants, those carrying the token belong to
  that child, and no other worker's helpers are touched;
- a process that cleared its environment but stayed in the worker's session (its session id is
  the worker's pid: the worker starts a session of its own) is found by that.

``end`` kills what belongs to the scope (SIGKILL: the worker itself was asked with SIGTERM first)
and reaps what envcheck adopted. Only a process that clears its environment, starts a session of
its own and leaves the worker's tree (a double fork) before ``end`` runs escapes all three.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import threading
import time
from typing import Any

SCOPE_VAR = "ENVCHECK_SCOPE"
ROUNDS = 5  # kill, look again: a process may start another while it is being stopped
PR_SET_CHILD_SUBREAPER = 36

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
            _subreaper = _set_subreaper()
        return _subreaper


def _set_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def members(token: str, root: int | None = None) -> list[Any]:
    """The live psutil processes of scope ``token``: ``root`` (a child of this process, leader of
    its own session) with its tree, and every descendant of this process that is in root's
    session or whose initial environment carries the token. One scan of the process table (the
    memory watch calls this every second or so)."""
    import psutil

    try:
        ours = psutil.Process().children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    parent: dict[int, int] = {}
    for p in ours:
        try:
            parent[p.pid] = p.ppid()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    found = []
    for p in ours:
        up, seen = p.pid, 0
        while up in parent and up != root and seen < len(parent):  # a walk towards root, loops cut
            up, seen = parent[up], seen + 1
        if (root is not None and (up == root or _session(p.pid) == root)) or _token_of(p) == token:
            found.append(p)
    return found


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


_tokens: dict[Any, str | None] = {}  # psutil.Process (pid and start time) -> its ENVCHECK_SCOPE


def _token_of(p: Any) -> str | None:
    """``p``'s scope token; its initial environment never changes, so it is read once."""
    import psutil

    with _lock:
        if p in _tokens:
            return _tokens[p]
    try:
        token = p.environ().get(SCOPE_VAR)
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return None  # a zombie's environment is gone: asked again, not remembered
    with _lock:
        if len(_tokens) > 4096:
            _tokens.clear()
        _tokens[p] = token
    return token


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
