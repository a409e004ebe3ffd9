"""Starting a Python child and waiting for it: the parent's side of the harness (protocol: messages.py).

One wait loop over the child's fd, stderr and stdin, with its limits: ``timeout`` for the run, ``heartbeat``
for silence, the caller's ``idle`` for silence of events, ``exit_s`` after the last message, and its scope's
memory every ``WATCH_S``. The child runs in a session of its own (Ctrl-C reaches envcheck alone, which decides)
with an allow-listed environment, and is ended whole on every way out; all it writes is bounded and redacted.
"""

from __future__ import annotations

import collections
import contextlib
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from envcheck.harness import messages, scope
from envcheck.harness.env import clean_env
from envcheck.harness.failures import ChildError, Crash, Failure, Garbage, Hang, Outcome, SpawnFailed, Stopped, Timeout
from envcheck.harness.lines import LineCutter
from envcheck.harness.signals import Signalled, stop_signals
from envcheck.outside_text import encodable
from envcheck.redact import Redactor

# No current folder and no PYTHONPATH (``-E``): nothing where the user stands shadows envcheck. Not ``-I``: the
# probes must see the user's site-packages (``pip install --user torch``). ROOT goes after the standard library.
BOOT = ("import sys\nr, p = sys.argv[1], sys.path\nif p and p[0] == '':\n    del p[0]\n"
        "r in p or p.insert(next((i for i, x in enumerate(p) if x.endswith(('site-packages', 'dist-packages'))),"
        " len(p)), r)\nfrom envcheck.harness.child import main\nsys.exit(main(sys.argv[2:]))\n")
HEARTBEAT_S = 60.0  # a Triton compile can hold the GIL for many seconds on a loaded machine
EXIT_S = 5.0  # after its last message, the time a child may take to exit (CUDA teardown can hang)
GRACE_S = 5.0  # SIGTERM, then SIGKILL: a child stuck in a CUDA call ignores SIGTERM
TICK_S = 0.1  # the longest wait between two looks at the process (its exit, a stop asked by another thread)
DRAIN_S = 2.0  # after it is gone, how long its output may still be read
WATCH_S = 1.0  # between two looks at its memory (one scan of the process table)
# Of the host's RAM per child; resident memory, not an rlimit: CUDA reserves terabytes of address space.
MEMORY_FRACTION = 0.5
MESSAGE_BYTES = 8 << 20  # a message carries one event (a case's samples): well under this
STDERR_BYTES = 64 << 10
TAIL_LINES = 40

OnEvent = Callable[[Any], "bool | None"]


def package_root() -> str:
    """The folder holding this ``envcheck`` package (a source tree or site-packages)."""
    import envcheck

    return os.path.dirname(os.path.dirname(os.path.abspath(envcheck.__file__)))


def memory_limit() -> int:
    import psutil

    return int(psutil.virtual_memory().total * MEMORY_FRACTION)


def spawn(target: str, args: Any = None, *, timeout: float, on_event: OnEvent | None = None,
          heartbeat: float = HEARTBEAT_S, idle: Callable[[], float | None] | None = None, exit_s: float = EXIT_S,
          grace_s: float = GRACE_S, stop: threading.Event | None = None, env: Mapping[str, str] | None = None,
          allow: Iterable[str] = (), python: str | None = None, paths: Sequence[str] = (), site: bool = True) -> Outcome:
    """Run ``target`` (``"module:function"``) on ``args`` in a child and wait for it; never raises for what the child
    or a signal does. ``on_event`` sees each Event's data (decoded, redacted); False from it: no progress, for
    ``idle``. ``stop``: another thread's stop. ``env``: set over the allow-listed variables (``allow``: more
    names); ``site``: False, no site-packages; ``paths``: folders for the end of its path."""
    t0 = time.monotonic()
    scope.become_subreaper()
    token = scope.new_token()
    child_env = clean_env({**(env or {}), scope.SCOPE_VAR: token}, allow=allow)
    r, w = os.pipe()
    argv = [python or sys.executable, "-E", *(() if site else ("-S",)), "-c", BOOT, package_root(), str(w),
            str(os.getpid())]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                pass_fds=(w,), start_new_session=True, env=child_env)
    except (OSError, ValueError) as e:
        os.close(r)
        return Outcome(failure=SpawnFailed(f"{type(e).__name__}: {e}"), wall_s=time.monotonic() - t0)
    finally:
        os.close(w)
    start = msgspec.json.encode({"target": target, "args": args, "paths": list(paths), "beat_s": heartbeat / 3})
    run = _Run(proc, r, token, Redactor({**os.environ, **child_env}), on_event, t0)
    with scope.live(run):
        run.wait(start + b"\n", t0 + timeout, timeout, heartbeat, idle, exit_s, stop, grace_s)
    run.out.wall_s = time.monotonic() - t0
    return run.out


class _Run:
    """One started child, read until it is gone."""

    def __init__(self, proc: subprocess.Popen[bytes], fd: int, token: str, redactor: Redactor,
                 on_event: OnEvent | None, t0: float) -> None:
        assert proc.stdin is not None and proc.stderr is not None
        self.proc, self.fd, self.token, self.redactor, self.on_event, self.t0 = proc, fd, token, redactor, on_event, t0
        self.session = scope.Session(proc)
        self.err, self.stdin = proc.stderr.fileno(), proc.stdin.fileno()
        self.out = Outcome()
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.cutters = {fd: LineCutter(MESSAGE_BYTES), self.err: LineCutter(STDERR_BYTES)}
        self.last_msg = self.last_event = self.next_watch = t0
        self.last_at: float | None = None  # when Done or Raised came
        self.raised: ChildError | None = None
        self.garbage: Garbage | None = None

    def clean(self, value: Any) -> Any:
        """Each string redacted (in the decoded data: in JSON text two strings could join into one match)."""
        if isinstance(value, str):
            return encodable(self.redactor.text(value))
        if isinstance(value, dict):
            return {k: self.clean(v) for k, v in value.items()}
        return [self.clean(v) for v in value] if isinstance(value, list) else value

    def _read(self, fd: int) -> bool:
        """What ``fd`` holds now, line by line; False at its end."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        cutter = self.cutters[fd]
        for line in cutter.feed(data) if data else [cutter.close()]:
            if line is not None and fd == self.fd:
                self._message(line)
            elif line is not None:
                self.tail.append(self.redactor.text(line))
        return bool(data)

    def _message(self, line: str) -> None:
        if self.garbage is not None:
            return
        now = time.monotonic()
        try:
            msg = messages.decode(line)
        except msgspec.DecodeError as e:
            self.garbage = Garbage(str(e), self.redactor.text(line[:200]))
            return
        self.last_msg = now
        if self.last_at is not None:
            self.garbage = Garbage(f"a {type(msg).__name__} message after the last", self.redactor.text(line[:200]))
        elif isinstance(msg, messages.Hello) and msg.protocol != messages.PROTOCOL:
            self.garbage = Garbage(f"protocol {msg.protocol}, not {messages.PROTOCOL}")
        elif isinstance(msg, messages.Beat):
            self.out.phase = msg.phase
        elif isinstance(msg, messages.Event):
            if self.on_event is None or self.on_event(self.clean(msgspec.json.decode(msg.data))) is not False:
                self.last_event = now
        elif isinstance(msg, messages.Done):
            self.out.result, self.out.done, self.out.done_s = self.clean(msgspec.json.decode(msg.result)), True, now - self.t0
            self.last_at = now
        elif isinstance(msg, messages.Raised):
            self.raised = ChildError(msg.type, self.redactor.text(msg.message), self.redactor.text(msg.traceback))
            self.last_at = now

    def wait(self, start: bytes, deadline: float, timeout: float, heartbeat: float,
             idle: Callable[[], float | None] | None, exit_s: float, stop: threading.Event | None,
             grace_s: float) -> None:
        sel = selectors.DefaultSelector()
        for fd, ev in ((self.fd, selectors.EVENT_READ), (self.err, selectors.EVENT_READ),
                       (self.stdin, selectors.EVENT_WRITE)):
            os.set_blocking(fd, False)
            sel.register(fd, ev)
        pending, limit = memoryview(start), memory_limit()
        ended: Failure | None = None
        with stop_signals() as signals:
            try:
                try:
                    while ended is None and self.proc.poll() is None and self.garbage is None:
                        now = time.monotonic()
                        ended = self._rule(now, deadline, timeout, heartbeat, idle, exit_s, stop, limit)
                        if ended is not None:
                            break
                        wake = min(deadline, self.last_msg + heartbeat) - now
                        for key, _ in sel.select(max(0.0, min(wake, TICK_S))):
                            if key.fd == self.stdin:
                                pending = self._write(pending, sel)
                            elif not self._read(key.fd):
                                sel.unregister(key.fd)
                except KeyboardInterrupt:
                    ended = Stopped("SIGINT")
                except Signalled as s:
                    ended = Stopped(s.name)
            finally:
                signals.armed = False  # from here a signal is only noted: the ending is never cut short
                sel.close()
                self._end(ended is not None or self.garbage is not None, grace_s)
            if ended is None and signals.names and not self.out.done:
                ended = Stopped(signals.names[0])
        # First match wins: what stopped it, a protocol error, its exception, a limit, how it exited.
        if isinstance(ended, Stopped):
            self.out.failure = ended
        else:
            self.out.failure = self.garbage or self.raised or ended or (
                Crash(self.out.returncode, self.out.phase) if not self.out.done or self.out.returncode else None)

    def _rule(self, now: float, deadline: float, timeout: float, heartbeat: float,
              idle: Callable[[], float | None] | None, exit_s: float, stop: threading.Event | None,
              limit: int) -> Failure | None:
        """Why the child must be stopped now, if it must (its memory is looked at here too)."""
        if stop is not None and stop.is_set():
            return Stopped()
        if now >= deadline:
            return Timeout(timeout, self.out.phase)
        if now >= self.next_watch:
            self.next_watch = now + WATCH_S
            used = scope.resident_bytes(scope.members(self.token, self.proc.pid))
            if used > limit:
                self.out.memory = (f"memory: the worker used {used / (1 << 30):.1f} GiB of host memory "
                                   f"(limit {limit / (1 << 30):.1f} GiB)")
                self.kill_now()  # its exit, a crash by SIGKILL, ends the loop
        if self.last_at is not None:
            return Hang(exit_s, "exit") if now - self.last_at >= exit_s else None
        if now - self.last_msg >= heartbeat:
            return Hang(heartbeat, self.out.phase)
        most = idle() if idle is not None else None
        return Hang(most, self.out.phase, idle=True) if most is not None and now - self.last_event >= most else None

    def _write(self, pending: memoryview, sel: selectors.BaseSelector) -> memoryview:
        try:
            pending = pending[os.write(self.stdin, pending):]
        except BlockingIOError:
            return pending
        except OSError:  # it is gone: its exit says why
            pending = pending[len(pending):]
        if not pending:
            sel.unregister(self.stdin)  # stdin stays open: its end would tell the child its parent is gone
        return pending

    def _end(self, stop: bool, grace_s: float) -> None:
        """Stop it (``stop``) or wait for it, end what it left, read what it wrote before it went."""
        if stop or self.proc.poll() is None:
            self.session.stop(grace_s)
        scope.end(self.token, self.proc.pid, session=self.proc.pid)
        deadline, open_fds = time.monotonic() + DRAIN_S, [self.fd, self.err]
        try:
            while open_fds and time.monotonic() < deadline:
                open_fds = [fd for fd in open_fds if self._read(fd)]
                time.sleep(0.01 if open_fds else 0)
        except KeyboardInterrupt:
            pass
        os.close(self.fd)
        for stream in (self.proc.stdin, self.proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        self.out.returncode, self.out.tail = self.proc.returncode, tuple(self.tail)

    def kill_now(self) -> None:
        self.session.kill_now()
        for p in scope.members(self.token, self.proc.pid):
            with contextlib.suppress(Exception):  # gone already, or not ours to kill
                p.kill()
