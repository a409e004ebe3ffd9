"""How much host memory a child's processes may hold, and the watch that holds them to it.

A user's code allocating host memory without end would take the machine (the OOM killer picks whom it
likes): each child's scope (scope.py) may hold half the host's RAM, read as resident memory every
``WATCH_S``. Not an rlimit in the child: CUDA reserves terabytes of address space (RLIMIT_AS) and its
allocators map private memory unrelated to what they touch (RLIMIT_DATA).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

MEMORY_FRACTION = 0.5
WATCH_S = 1.0  # each look reads the process table once (scope.members)
GIB = float(1 << 30)


def limit_bytes() -> int:
    """The most resident memory one child's scope may hold."""
    import psutil

    return int(psutil.virtual_memory().total * MEMORY_FRACTION)


def resident_bytes(procs: list[Any]) -> int:
    import psutil

    total = 0
    for p in procs:
        try:
            total += int(p.memory_info().rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


def over_limit_detail(used: int, limit: int) -> str:
    """The one line a worker stopped for its memory leaves as its failure's detail."""
    return f"memory: the worker used {used / GIB:.1f} GiB of host memory (limit {limit / GIB:.1f} GiB)"


class MemoryWatch:
    """Watches ``scope()`` (the live processes of one worker) until ``running()`` is False;
    past ``limit`` resident bytes it records what it saw and calls ``kill`` once."""

    def __init__(self, scope: Callable[[], list[Any]], running: Callable[[], bool], kill: Callable[[], None],
                 limit: int | None = None, every_s: float = WATCH_S) -> None:
        self.limit = limit_bytes() if limit is None else limit
        self.used: int | None = None  # set when the worker went over the limit
        self._scope, self._running, self._kill, self._every = scope, running, kill, every_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="envcheck-memory-watch")
        self._thread.start()

    @property
    def detail(self) -> str | None:
        return over_limit_detail(self.used, self.limit) if self.used is not None else None

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        while not self._done.wait(self._every) and self._running():
            used = resident_bytes(self._scope())
            if used > self.limit:
                self.used = used
                self._kill()
                return
