"""How much host memory a worker may use, and the watch that holds it to that.

A user's implementation that allocates host memory until the machine has none left takes the
machine with it (the OOM killer picks whom it likes). So each worker's resident memory is bounded:
``limit_bytes``, half the host's RAM. The host side of a GPU case (PyTorch, the CUDA context,
pinned staging buffers) needs a few GiB, and a CPU case's inputs and float64 reference fit many
times over in half of any machine that can run it; the other half stays for the system, envcheck
and the other GPUs' workers.

Why a watch from the parent and no rlimit in the child: RLIMIT_AS counts address space, and CUDA
reserves tens of GiB to terabytes of it for unified addressing, so any bound that stops a runaway
allocation also stops CUDA from initialising; RLIMIT_DATA (Linux >= 4.7) counts private writable
mappings, which the CUDA driver and PyTorch's allocators make in sizes unrelated to what they
touch. Resident memory is what an allocation takes from the machine, whatever the library.
The watch sums the resident sets of the worker's scope (its tree and what left it: scope.py)
every ``WATCH_S`` and kills the scope past the bound. Pages a forked helper shares with its parent
count once per process: an overestimate, which only matters for a tree that is already large.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

MEMORY_FRACTION = 0.5
WATCH_S = 1.0  # each look reads the process table once (scope.members)
GIB = float(1 << 30)


def limit_bytes() -> int:
    """The most resident memory one worker may hold (the module docstring says why this much)."""
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
