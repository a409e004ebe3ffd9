"""The worker's process: started in its own session and scope, read line by line, ended whole.

Nothing here knows the protocol: lines in, lines out, and a process that may crash, hang, write
without end, grow without end, or leave children behind (torch.compile starts compile workers; a
library, or a user's code, may start more, in sessions of their own). Every worker (and the
child that imports a user's file, userbench/discover.py) is started here, so this is where:

- it gets envcheck's child environment (``child_env``) plus its scope token (scope.py);
- envcheck becomes a child subreaper, so what the worker leaves behind stays envcheck's to end;
- its lines are bounded (lines.py), and carry a redactor for the secrets of the environment it
  was given: what a worker writes may quote them (a user's exception with
  ``os.environ["HF_TOKEN"]``), and nothing read here may reach a report or a terminal unredacted;
- its resident memory is watched (hostmem.py);
- it is ended whole: its process group, its tree and every process of its scope, after every
  exit, normal or not (``stop``, and ``end_leftovers`` as soon as it has exited on its own).

Reading stops at the end of the output (EOF) or, when a process that left the scope's reach
still holds the pipe, ``EXITED_DRAIN_S`` after the worker exited (``next_line``).
"""

from __future__ import annotations

import collections
import enum
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from envcheck.harness import memory as hostmem
from envcheck.harness import scope
from envcheck.harness.env import clean_env as child_env
from envcheck.harness.lines import LineCutter
from envcheck.model import StopCause
from envcheck.outside_text import encodable
from envcheck.redact import Redactor

STDERR_TAIL_LINES = 40
# A protocol line carries one event (a case's raw samples, a window's NVML samples: well under
# 1 MiB); a stderr line is for people. What a child writes beyond these is cut (lines.py).
STDOUT_LINE_BYTES = 8 << 20
STDERR_LINE_BYTES = 64 << 10
# Lines read ahead of the reader's consumer: past this the child waits on its pipe, as it would
# with no reader thread, and the parent holds at most this many bounded lines.
QUEUED_LINES = 16
READ_CHUNK = 64 << 10
EXITED_DRAIN_S = 2.0  # a dead worker's leftovers can hold stdout open: stop waiting for EOF after this

Popen = Callable[..., "subprocess.Popen[bytes]"]


class Ended(enum.Enum):
    """Why ``next_line`` has no more lines: the output closed, or the worker exited and its
    output stayed open past ``EXITED_DRAIN_S``."""

    EOF = "eof"
    EXITED = "exited"


class WorkerProcess:
    """A started worker: ``lines`` gets each stdout line (bounded) and then None at EOF, for the
    caller to decode and pass through ``redactor`` (a protocol line is redacted in its decoded
    strings, never as raw text, which would break its JSON); ``tail`` keeps the last stderr lines
    (bounded, redacted)."""

    def __init__(self, proc: subprocess.Popen[bytes], token: str | None = None,
                 redactor: Redactor | None = None, memory_limit: int | None = None) -> None:
        self.proc = proc
        self.token = token or scope.new_token()
        self.redactor = redactor or Redactor(os.environ)
        self.lines: queue.Queue[str | None] = queue.Queue(maxsize=QUEUED_LINES)
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._closed = threading.Event()
        self._exited_at: float | None = None
        assert proc.stdout is not None and proc.stderr is not None
        stdout, stderr = proc.stdout, proc.stderr

        def read_stdout() -> None:
            _pump(stdout, STDOUT_LINE_BYTES, self._put)
            self._put(None)

        self._readers = [threading.Thread(target=read_stdout, daemon=True),
                         threading.Thread(target=_pump, args=(stderr, STDERR_LINE_BYTES,
                                                              lambda s: self.tail.append(self.redactor.text(s))),
                                          daemon=True)]
        for t in self._readers:
            t.start()
        self.memory = hostmem.MemoryWatch(lambda: scope.members(self.token, self.proc.pid),
                                          lambda: self.proc.poll() is None, self._kill_now, memory_limit)

    @classmethod
    def start(cls, command: Sequence[str], popen: Popen = subprocess.Popen) -> WorkerProcess:
        """Start ``command`` in a new session (Ctrl-C in the terminal then reaches only this
        process, which decides what to stop) with envcheck's child environment and a scope token
        of its own, this process a subreaper first. Raises OSError when it cannot start."""
        scope.become_subreaper()
        token = scope.new_token()
        env = child_env({scope.SCOPE_VAR: token})
        proc = popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     bufsize=0, start_new_session=True, env=env, preexec_fn=parent_death_signal())
        return cls(proc, token, Redactor(env))

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def poll(self) -> int | None:
        return self.proc.poll()

    def send(self, text: str) -> None:
        """Write ``text`` on the worker's stdin and close it, from a thread of its own: a worker
        that never reads must not hang the caller. A worker that already died is not an error
        here (its exit status says why)."""
        stdin = self.proc.stdin
        assert stdin is not None

        def write() -> None:
            try:
                stdin.write(text.encode("utf-8", errors="replace"))
            except (BrokenPipeError, OSError, ValueError):
                pass
            try:
                stdin.close()
            except (BrokenPipeError, OSError):
                pass

        threading.Thread(target=write, daemon=True).start()

    def next_line(self, wait_s: float) -> str | Ended | None:
        """The next stdout line; None when none came within ``wait_s``; ``Ended`` when no more
        will. Once the worker has exited, what it left running is ended at once (its pipes close
        with it), and EOF is awaited ``EXITED_DRAIN_S`` at most."""
        try:
            line = self.lines.get(timeout=wait_s)
        except queue.Empty:
            if self.proc.poll() is None:
                return None
            if self._exited_at is None:
                self._exited_at = time.monotonic()
                self.end_leftovers()
            return Ended.EXITED if time.monotonic() - self._exited_at > EXITED_DRAIN_S else None
        return Ended.EOF if line is None else line

    def wait(self, timeout: float) -> bool:
        """Whether the worker exited within ``timeout`` seconds (what it left running is then ended)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        self.end_leftovers()
        return True

    def stop(self, grace_s: float) -> None:
        """SIGTERM, SIGKILL after ``grace_s``, to the worker and everything of its scope."""
        self.memory.stop()
        stop_tree(self.proc, grace_s)
        self.end_leftovers()

    def end_leftovers(self) -> None:
        """Kill and reap every process of the worker's scope but the worker itself."""
        scope.end(self.token, self.proc.pid, session=self.proc.pid)

    def join_readers(self, timeout: float = 1.0) -> None:
        for t in self._readers:
            t.join(timeout=timeout)
        self._closed.set()  # a reader still blocked on a full queue now drops instead of waiting

    def drain(self) -> list[str]:
        """The lines read but not yet taken (after ``join_readers``)."""
        got: list[str] = []
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return got
            if line is not None:
                got.append(line)

    def clean(self, data: object) -> object:
        """JSON data the worker wrote, as envcheck may keep it: every string redacted and made
        encodable (a lone surrogate, ``"\\ud800"`` in JSON, becomes ``?``), keys as they are. Done on
        the parsed data, not the raw line: redacting JSON text could join two strings into one
        URL match and break the line."""
        return _strings(data, lambda s: encodable(self.redactor.text(s)))

    def last_stderr_line(self) -> str | None:
        return next((ln.strip() for ln in reversed(self.tail) if ln.strip()), None)

    def last_words(self) -> str | None:
        """Why the worker ended, in its own words: the memory watch's line when it was killed for
        its memory, else its last stderr line."""
        return self.memory.detail or self.last_stderr_line()

    def _put(self, line: str | None) -> None:
        while True:
            try:
                self.lines.put(line, timeout=0.2)
                return
            except queue.Full:
                if self._closed.is_set():
                    return

    def _kill_now(self) -> None:
        _signal_tree(self.proc, scope.members(self.token, self.proc.pid), signal.SIGKILL)


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


def stop_tree(proc: subprocess.Popen[Any], grace_s: float) -> None:
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


def _strings(value: object, fn: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v, fn) for v in value]
    return value


def _pump(stream: IO[bytes], limit: int, sink: Callable[[str], None]) -> None:
    cutter = LineCutter(limit)
    read = getattr(stream, "read1", stream.read)
    try:
        while chunk := read(READ_CHUNK):
            for line in cutter.feed(chunk):
                sink(line)
    except (OSError, ValueError):  # the pipe closed under us: the process is gone
        pass
    last = cutter.close()
    if last is not None:
        sink(last)


def _descendants(pid: int) -> list[Any]:
    """The worker's live descendants (psutil processes); [] once it is gone."""
    import psutil

    try:
        return list(psutil.Process(pid).children(recursive=True))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def _signal_tree(proc: subprocess.Popen[Any], tree: list[Any], sig: int) -> None:
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
