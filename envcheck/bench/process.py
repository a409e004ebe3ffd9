"""The worker's process: started in its own session, read line by line, stopped with its whole tree.

Nothing here knows the protocol: lines in, lines out, and a process that may crash, hang, or
leave children behind (torch.compile starts compile workers; a library may start more). Every
worker is started here, so this is where it gets envcheck's child environment (``child_env``).
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

from envcheck.child_env import child_env
from envcheck.model import StopCause

STDERR_TAIL_LINES = 40

Popen = Callable[..., "subprocess.Popen[str]"]


class WorkerProcess:
    """A started worker: ``lines`` gets each stdout line and then None at EOF; ``tail`` keeps
    the last stderr lines."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        assert proc.stdout is not None and proc.stderr is not None
        stdout, stderr = proc.stdout, proc.stderr

        def read_stdout() -> None:
            _pump(stdout, self.lines.put)
            self.lines.put(None)

        self._readers = [threading.Thread(target=read_stdout, daemon=True),
                         threading.Thread(target=_pump, args=(stderr, lambda s: self.tail.append(s.rstrip("\n"))),
                                          daemon=True)]
        for t in self._readers:
            t.start()

    @classmethod
    def start(cls, command: Sequence[str], popen: Popen = subprocess.Popen) -> WorkerProcess:
        """Start ``command`` in a new session (Ctrl-C in the terminal then reaches only this
        process, which decides what to stop) with envcheck's child environment. Raises OSError
        when it cannot start."""
        proc = popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True, encoding="utf-8", errors="replace", bufsize=1, start_new_session=True,
                     env=child_env(), preexec_fn=parent_death_signal())
        return cls(proc)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def poll(self) -> int | None:
        return self.proc.poll()

    def send(self, text: str) -> None:
        """Write ``text`` on the worker's stdin and close it; a worker that already died is not an error
        here (its exit status says why)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(text)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def wait(self, timeout: float) -> bool:
        """Whether the worker exited within ``timeout`` seconds."""
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, grace_s: float) -> None:
        stop_tree(self.proc, grace_s)

    def join_readers(self, timeout: float = 1.0) -> None:
        for t in self._readers:
            t.join(timeout=timeout)

    def last_stderr_line(self) -> str | None:
        return next((ln.strip() for ln in reversed(self.tail) if ln.strip()), None)


def parent_death_signal(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for Linux: the child gets ``sig`` when the process that started it dies, even by
    SIGKILL (``kill -9``, the OOM killer), instead of running on unowned until its own end (a worker
    timing a GPU nobody reads; a torchrun sub-launch, which then stops its workers). None elsewhere.
    Called in a process itself, it asks the same for that process (a fleet rank and its launcher)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # loaded before the fork: the child only calls it
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def set_it() -> None:
        prctl(pr_set_pdeathsig, int(sig))

    return set_it


def stop_tree(proc: subprocess.Popen[str], grace_s: float) -> None:
    """SIGTERM to a worker's process tree, SIGKILL after ``grace_s``: a worker stuck in a CUDA
    call ignores SIGTERM. Children that left the worker's process group (a new session of
    their own) are found through psutil and stopped too."""
    tree = _descendants(proc.pid)
    if proc.poll() is None:
        _signal_tree(proc, tree, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):  # a second Ctrl-C means now
            pass
    # Children may outlive a worker that exited on SIGTERM: the tree goes either way.
    _signal_tree(proc, tree + _descendants(proc.pid), signal.SIGKILL)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass


def _pump(stream: IO[str], sink: Callable[[str], None]) -> None:
    try:
        for line in stream:
            sink(line)
    except (OSError, ValueError):  # the pipe closed under us: the process is gone
        pass


def _descendants(pid: int) -> list[Any]:
    """The worker's live descendants (psutil processes); [] once it is gone."""
    import psutil

    try:
        return list(psutil.Process(pid).children(recursive=True))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def _signal_tree(proc: subprocess.Popen[str], tree: list[Any], sig: int) -> None:
    import psutil

    try:
        os.killpg(proc.pid, sig)  # the worker's session: itself and whatever it started
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
    for child in tree:
        try:
            child.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def exit_cause(returncode: int | None) -> tuple[StopCause, str | None]:
    """How a worker that ended on its own ended: crashed by a signal (named), or exited."""
    if returncode is not None and returncode < 0:
        try:
            return StopCause.CRASHED, signal.Signals(-returncode).name
        except ValueError:
            return StopCause.CRASHED, f"signal {-returncode}"
    return StopCause.EXITED, None
