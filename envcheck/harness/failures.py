"""What a child's run came to: one ``Outcome``, its ``failure`` one of seven tagged kinds (spawn.py says when
each), and ``to_stop`` / ``to_launch``, which write it where the report records one (``Stop``, ``Launch``)."""

from __future__ import annotations

import signal as _signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from envcheck.model import Stop, StopCause
from envcheck.model.node import Launch


class _Failure(msgspec.Struct, tag_field="kind", tag=True, frozen=True):
    pass


class SpawnFailed(_Failure):  # it could not start
    error: str


class Stopped(_Failure):  # Ctrl-C, SIGTERM, SIGHUP, or another thread asked (signal None)
    signal: str | None = None

    @property
    def cause(self) -> StopCause:
        return StopCause.USER if self.signal in (None, "SIGINT") else StopCause.SIGNAL


class Garbage(_Failure):  # not a message, a protocol it does not speak, anything after its last message
    error: str
    sample: str = ""


class ChildError(_Failure):  # the target raised
    type: str
    message: str
    traceback: str = ""

    @property
    def line(self) -> str:
        first = next((ln.strip() for ln in self.message.splitlines() if ln.strip()), "")
        return f"{self.type}: {first}" if first else self.type


class Timeout(_Failure):  # still talking when ``timeout`` ran out (a GPU call that never returned)
    after_s: float
    phase: str = ""


class Hang(_Failure):  # silent for ``heartbeat``, no event for ``idle``, or not exiting ``exit_s`` after Done
    after_s: float
    phase: str = ""
    idle: bool = False  # the caller's limit on events


class Crash(_Failure):  # ended without a last message, or with a non-zero status after Done
    returncode: int | None
    phase: str = ""

    @property
    def signal(self) -> str | None:
        return signal_name(self.returncode)


Failure = SpawnFailed | Stopped | Garbage | ChildError | Timeout | Hang | Crash


def signal_name(returncode: int | None) -> str | None:
    """``SIGSEGV`` for a child killed by signal 11 (returncode -11), else None."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return _signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


@dataclass
class Outcome:
    """How one child's run went: its result once Done came, the failure if any (also after Done), its exit status,
    its stderr's last lines (redacted), and ``memory`` where the memory watch killed it."""

    result: Any = None
    done: bool = False
    failure: Failure | None = None
    returncode: int | None = None
    tail: tuple[str, ...] = ()
    phase: str = ""
    wall_s: float = 0.0
    done_s: float | None = None  # when Done came, from the start
    memory: str | None = None

    @property
    def stderr_tail(self) -> str:
        return "\n".join(self.tail)

    @property
    def last_words(self) -> str | None:
        """Why it ended, in its own words: the memory watch's line, else its last stderr line."""
        return self.memory or next((ln.strip() for ln in reversed(self.tail) if ln.strip()), None)


def to_stop(out: Outcome, finished: int, planned: int, *, idle: StopCause = StopCause.HUNG, **extra: Any) -> Stop | None:
    """The report's ``Stop`` for a run that did not finish (None once Done came); ``idle``: the cause of a stall."""
    f = out.failure
    if out.done or f is None:
        return None
    base: dict[str, Any] = {"finished": finished, "planned": planned, **extra}
    last = out.last_words
    detail = last[:300] if last else None
    if isinstance(f, SpawnFailed):
        return Stop(StopCause.START_FAILED, detail=f.error, **base)
    if isinstance(f, Stopped):
        return Stop(f.cause, signal=f.signal or "SIGINT", **base)
    if isinstance(f, Timeout) or (isinstance(f, Hang) and f.idle and idle is StopCause.TIMEOUT):
        return Stop(StopCause.TIMEOUT, timeout_s=f.after_s, **base)
    if isinstance(f, Hang):
        return Stop(StopCause.HUNG, returncode=out.returncode, detail=detail, **base)
    if isinstance(f, ChildError):
        return Stop(StopCause.EXITED, returncode=out.returncode, detail=f.line[:300], **base)
    if isinstance(f, Garbage):
        return Stop(StopCause.EXITED, returncode=out.returncode, detail=f"protocol: {f.error}"[:300], **base)
    sig = f.signal
    return Stop(StopCause.CRASHED if sig else StopCause.EXITED, signal=sig, returncode=out.returncode,
                detail=detail, **base)


def to_launch(out: Outcome, argv: Sequence[str], timeout: float) -> Launch:
    """The report's ``Launch`` of one child."""
    f = out.failure
    error = f"could not start ({f.error})" if isinstance(f, SpawnFailed) else None
    return Launch(tuple(argv), out.returncode, timeout, round(out.wall_s, 3),
                  timed_out=isinstance(f, (Timeout, Hang)) and not out.done, interrupted=isinstance(f, Stopped),
                  error=error, stderr_tail=out.stderr_tail)
