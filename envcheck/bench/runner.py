"""Runs the isolated benchmark worker and gathers what it reports (the contract: protocol.py).

Feeds the worker its plan, decodes its events as they come, and survives whatever the worker does
(crash, hang, garbage) and what happens to ``envcheck run`` (Ctrl-C, a scheduler's SIGTERM, SIGHUP):
each stops the worker's process tree and keeps what finished, with the ``StopCause`` recorded.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from envcheck.bench import protocol
from envcheck.bench.process import Ended, Popen, WorkerProcess, exit_cause
from envcheck.bench.protocol import (
    CaseStarted,
    CeilingMeasured,
    Done,
    Event,
    Measured,
    Noted,
    Skipped,
    Started,
    WindowSampled,
    WorkerPlan,
)
from envcheck.bench.suite import Plan
from envcheck.model import BenchDevice, Case, CaseKey, CeilingRun, MonitorWindow, Note, Skip, Stop, StopCause

WORKER_COMMAND = tuple(protocol.worker_argv())
TERMINATE_GRACE_S = 5.0  # SIGTERM, then SIGKILL: a worker stuck in a CUDA call ignores SIGTERM
# With a per-case limit (``stall_s``): the most a worker may take to start (a loaded node took a minute).
STARTUP_S = 300.0
MAX_IGNORED_SHOWN = 3
# A batch scheduler's end of job (SIGTERM) or a closed terminal (SIGHUP): treated like Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

OnEvent = Callable[[Event], None]


@dataclass
class BenchOutcome:
    """Everything the worker reported, and how it ended (``stop`` is None when it finished)."""

    cases: list[Case] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    ceiling_runs: list[CeilingRun] = field(default_factory=list)
    windows: list[MonitorWindow] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    device: BenchDevice | None = None
    versions: dict[str, str] = field(default_factory=dict)
    stop: Stop | None = None
    stderr_tail: str = ""
    returncode: int | None = None
    done: bool = False
    stalled: bool = False  # stopped because no event came for ``stall_s``: the current case hung
    phases: dict[str, float] = field(default_factory=dict)  # model.BENCH_PHASES: the worker's, startup, shutdown

    @property
    def finished(self) -> int:
        """Planned cases the worker finished: measured or skipped by it."""
        return len(self.cases) + len(self.skips)

    @property
    def interrupted(self) -> bool:
        """Stopped by the user or by a signal to ``envcheck run`` (exit status 130)."""
        return self.stop is not None and self.stop.cause in (StopCause.USER, StopCause.SIGNAL)

    def apply(self, ev: Event) -> None:
        """Record one event (ValueError when it contradicts what came before)."""
        if isinstance(ev, Measured):
            w = ev.case.window
            if w is not None and not 0 <= w < len(self.windows):
                raise ValueError(f"case names monitor window {w}, but {len(self.windows)} were sent")
            self.cases.append(ev.case)
        elif isinstance(ev, Skipped):
            self.skips.append(ev.skip)
        elif isinstance(ev, WindowSampled):
            if ev.index != len(self.windows):
                raise ValueError(f"monitor window {ev.index} sent as window {len(self.windows)}")
            self.windows.append(ev.window)
        elif isinstance(ev, CeilingMeasured):
            self.ceiling_runs.append(ev.run)
        elif isinstance(ev, Noted):
            self.notes.append(ev.note)
        elif isinstance(ev, Started):
            self.device = ev.device
            self.versions = dict(ev.versions)
        elif isinstance(ev, Done):
            self.done = True
            self.phases.update(ev.phases)


class Signalled(BaseException):
    """SIGTERM or SIGHUP reached ``envcheck run``: unwinds like KeyboardInterrupt does."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class StopSignals:
    """While armed, SIGTERM and SIGHUP raise ``raise_as`` (their name) in the main thread, as Ctrl-C raises
    KeyboardInterrupt, once; later ones are only recorded, so a second signal never cuts the saving of
    what finished short. Outside the main thread nothing is installed."""

    def __init__(self, raise_as: Callable[[str], BaseException] = Signalled) -> None:
        self.armed = False
        self.received: str | None = None
        self._previous: dict[int, object] = {}
        self._raise_as = raise_as

    def _handle(self, signum: int, frame: object) -> None:
        if self.received is None:
            self.received = signal.Signals(signum).name
        if self.armed:
            self.armed = False
            raise self._raise_as(signal.Signals(signum).name)

    @contextmanager
    def installed(self) -> Iterator[StopSignals]:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}
        self.armed = True
        try:
            yield self
        finally:
            self.armed = False
            for sig, old in self._previous.items():
                signal.signal(sig, old)  # type: ignore[arg-type]


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt, once, for steps that stop on Ctrl-C and keep what finished
    (the node tests under ``envcheck run --gpus``)."""
    with StopSignals(KeyboardInterrupt).installed():
        yield


def run_worker(plan: Plan, on_event: OnEvent, timeout: float, popen: Popen | None = None, *,
               command: Sequence[str] = WORKER_COMMAND, grace_s: float = TERMINATE_GRACE_S,
               clock: Callable[[], float] = time.monotonic, stall_s: float | None = None,
               startup_s: float = STARTUP_S) -> BenchOutcome:
    """Run the worker on ``plan``; ``on_event`` sees every decoded event as it arrives.

    Never raises for anything the worker does. Ctrl-C (KeyboardInterrupt, here or in ``on_event``),
    SIGTERM and SIGHUP stop the worker and return what finished, with ``stop`` saying why. Once the
    worker has sent ``done`` it is ended at once: its teardown (CUDA, Inductor's compile workers) is
    nothing the run waits for. With ``stall_s``, a started worker that sends no event for that long
    is stopped as timed out with ``stalled`` set (``envcheck bench``: a user's case that hangs); its
    start-up has its own limit, ``startup_s``. What the worker writes is redacted as it is decoded.
    """
    assert plan.backend is not None, "a plan without a device has nothing to run"
    out = BenchOutcome()
    spawned = clock()
    try:
        proc = WorkerProcess.start(command, popen) if popen else WorkerProcess.start(command)
    except OSError as e:
        out.stop = Stop(StopCause.START_FAILED, 0, len(plan.cases), detail=f"{type(e).__name__}: {e}")
        return out

    ignored = 0
    done_seen: float | None = None  # when its ``done`` came
    examples: list[str] = []
    current: CaseKey | None = None
    ended_by: tuple[StopCause, str | None] | None = None  # stopped here, and by which signal
    stop_after = timeout  # the limit that stopped it, as the report gives it

    def handle(line: str) -> None:
        nonlocal current, last_event, ignored, done_seen
        last_event = clock()
        text = line.strip()
        if not text:
            return
        try:
            ev = protocol.decode(text, proc.clean)
            out.apply(ev)
        except ValueError:  # ProtocolError included: a malformed line is noted, never a traceback
            ignored += 1
            if len(examples) < MAX_IGNORED_SHOWN:
                examples.append(proc.redactor.text(text[:4096])[:80])  # a stray line may be 8 MiB
            return
        if isinstance(ev, CaseStarted):
            current = ev.case.key
        elif isinstance(ev, (Measured, Skipped)):
            current = None
        elif isinstance(ev, Started):
            out.phases.setdefault("startup", round(last_event - spawned, 4))  # imports, CUDA context, NVML
        elif isinstance(ev, Done):
            done_seen = last_event
        on_event(ev)

    deadline = clock() + timeout
    last_event = clock()
    eof = False
    signals = StopSignals()
    with signals.installed():
        try:
            proc.send(protocol.encode_plan(WorkerPlan(plan.backend, plan.index, plan.cases, plan.settings,
                                                      plan.ops, plan.source, plan.ceilings, plan.code)))
            while not out.done:
                now = clock()
                if now >= deadline:
                    ended_by = (StopCause.TIMEOUT, None)
                    break
                if stall_s is not None:
                    started = out.device is not None
                    if now - last_event >= (stall_s if started else startup_s):
                        ended_by = (StopCause.TIMEOUT, None)
                        out.stalled = started
                        stop_after = stall_s if started else startup_s
                        break
                line = proc.next_line(min(0.2, max(deadline - now, 0.001)))
                if line is None:
                    continue
                if line is Ended.EXITED:
                    ended_by = (StopCause.HUNG, None)
                    break
                if line is Ended.EOF:
                    eof = True
                    break
                handle(line)
        except KeyboardInterrupt:
            ended_by = (StopCause.USER, "SIGINT")
        except Signalled as s:
            ended_by = (StopCause.SIGNAL, s.name)
        finally:
            signals.armed = False
            if ended_by is None and signals.received is not None and not out.done:
                ended_by = (StopCause.SIGNAL, signals.received)  # arrived between two checks
            if ended_by is not None or not eof:
                proc.stop(grace_s)  # done, or on_event raised: never leave the worker running
            elif not proc.wait(grace_s):  # its output closed: it is exiting, or hung
                proc.stop(grace_s)
            proc.join_readers()
            # Events written before the worker stopped still count.
            for line in proc.drain():
                try:
                    handle(line)
                except KeyboardInterrupt:
                    break
            if done_seen is not None:  # its last event until it was ended
                out.phases["shutdown"] = round(max(clock() - done_seen, 0.0), 4)

    out.returncode = proc.returncode
    out.stderr_tail = "\n".join(proc.tail)
    if ignored:
        out.notes.append(Note("bench.ignored_output", {"lines": ignored, "examples": tuple(examples)}))
    out.stop = _stop(plan, out, proc, ended_by, current, stop_after)
    return out


def _stop(plan: Plan, out: BenchOutcome, proc: WorkerProcess, ended_by: tuple[StopCause, str | None] | None,
          during: CaseKey | None, timeout: float) -> Stop | None:
    """How the run ended early, or None when every case was reported."""
    if out.done:
        return None
    base = {"finished": out.finished, "planned": len(plan.cases), "during": during}
    if ended_by is not None and ended_by[0] in (StopCause.USER, StopCause.SIGNAL):
        return Stop(ended_by[0], signal=ended_by[1], **base)  # type: ignore[arg-type]
    if ended_by is not None and ended_by[0] == StopCause.TIMEOUT:
        return Stop(StopCause.TIMEOUT, timeout_s=timeout, **base)  # type: ignore[arg-type]
    last = proc.last_words()
    detail = last[:300] if last else None
    if ended_by is not None:  # the worker exited but its output never closed
        return Stop(StopCause.HUNG, returncode=proc.returncode, detail=detail, **base)  # type: ignore[arg-type]
    cause, sig = exit_cause(proc.returncode)
    return Stop(cause, signal=sig, returncode=proc.returncode, detail=detail, **base)  # type: ignore[arg-type]


def wait_for(threads: Sequence[threading.Thread], stop: Callable[[], None]) -> tuple[StopCause, str | None] | None:
    """Wait in the main thread for the threads that drive the workers, one per GPU; None once they all
    finished. Signal handlers exist in the main thread only, so this is where Ctrl-C, SIGTERM and SIGHUP
    arrive: the first of them calls ``stop`` (every worker stopped), waits for the threads to hand over what
    they gathered, and is returned as the cause (``USER``, or ``SIGNAL`` with its name)."""
    stopped: tuple[StopCause, str | None] | None = None
    signals = StopSignals()
    with signals.installed():
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)
        except KeyboardInterrupt:
            stopped = (StopCause.USER, "SIGINT")
        except Signalled as s:
            stopped = (StopCause.SIGNAL, s.name)
        finally:
            signals.armed = False
    if stopped is None and signals.received is not None:
        stopped = (StopCause.SIGNAL, signals.received)
    if stopped is not None:
        stop()
        for t in threads:
            t.join(timeout=TERMINATE_GRACE_S * 2)
    return stopped
