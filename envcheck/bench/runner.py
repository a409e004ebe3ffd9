"""Runs the benchmark worker through the harness and gathers what it reports (the contract: protocol.py) into the
report's ``Bench``. Whatever the worker does or befalls the run (Ctrl-C, SIGTERM, SIGHUP), what finished is kept
and how it ended recorded: every planned case once, measured, skipped with a reason, or ``skip.not_run`` naming
the stop's cause. A worker is given by its command: its target, then folders for its ``sys.path`` (tests' fakes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from envcheck.bench import protocol
from envcheck.bench.suite import Plan
from envcheck.harness.env import user_path
from envcheck.harness.failures import ChildError, Hang, to_stop
from envcheck.harness.spawn import spawn
from envcheck.model import (
    Bench,
    BenchDevice,
    Case,
    CaseKey,
    CeilingRun,
    MonitorWindow,
    Note,
    Skip,
    Stop,
    StopCause,
    to_dict,
)
from envcheck.model.bench import check_phases
from envcheck.ops import PRECISIONS

WORKER_COMMAND = ("envcheck.bench.worker:main",)
TERMINATE_GRACE_S = 5.0  # SIGTERM, then SIGKILL: a worker stuck in a CUDA call ignores SIGTERM
STARTUP_S = 300.0  # with ``stall_s``: the most a worker may take to start (a loaded node took over a minute)
MAX_IGNORED_SHOWN = 3

OnEvent = Callable[[protocol.Event], None]


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
        return len(self.cases) + len(self.skips)

    @property
    def interrupted(self) -> bool:
        """Stopped by the user or a signal (exit status 130)."""
        return self.stop is not None and self.stop.cause in (StopCause.USER, StopCause.SIGNAL)

    def apply(self, ev: protocol.Event) -> None:
        """Record one event (ValueError when it contradicts what came before)."""
        if isinstance(ev, protocol.Measured):
            w = ev.case.window
            if w is not None and not 0 <= w < len(self.windows):
                raise ValueError(f"case names monitor window {w}, but {len(self.windows)} were sent")
            self.cases.append(ev.case)
        elif isinstance(ev, protocol.Skipped):
            self.skips.append(ev.skip)
        elif isinstance(ev, protocol.WindowSampled):
            if ev.index != len(self.windows):
                raise ValueError(f"monitor window {ev.index} sent as window {len(self.windows)}")
            self.windows.append(ev.window)
        elif isinstance(ev, protocol.CeilingMeasured):
            self.ceiling_runs.append(ev.run)
        elif isinstance(ev, protocol.Noted):
            self.notes.append(ev.note)
        elif isinstance(ev, protocol.Started):
            self.device = ev.device
            self.versions = dict(ev.versions)


def run_worker(plan: Plan, on_event: OnEvent, timeout: float, *, command: Sequence[str] = WORKER_COMMAND,
               grace_s: float = TERMINATE_GRACE_S, stall_s: float | None = None, startup_s: float = STARTUP_S,
               stop: threading.Event | None = None) -> BenchOutcome:
    """Run the worker on ``plan``; ``on_event`` sees every decoded event. Never raises for what the worker does;
    ``stop`` ends it too. Once it returned it is ended at once (its teardown is nothing the run waits for). With
    ``stall_s``, a started worker silent that long is stopped, ``stalled`` (``envcheck bench``: resume.py)."""
    assert plan.backend is not None, "a plan without a device has nothing to run"
    out = BenchOutcome()
    examples: list[str] = []
    ignored = 0
    current: CaseKey | None = None
    t0 = time.monotonic()

    def seen(data: object) -> bool | None:
        nonlocal current, ignored
        try:
            ev = protocol.decode(data)
            out.apply(ev)
        except ValueError:  # ProtocolError included: noted, never a traceback
            ignored += 1
            if len(examples) < MAX_IGNORED_SHOWN:
                examples.append(str(data)[:80])
            return False
        if isinstance(ev, protocol.CaseStarted):
            current = ev.case.key
        elif isinstance(ev, (protocol.Measured, protocol.Skipped)):
            current = None
        elif isinstance(ev, protocol.Started):
            out.phases.setdefault("startup", round(time.monotonic() - t0, 4))  # imports, CUDA context, NVML
        on_event(ev)
        return None

    def idle() -> float | None:
        return None if stall_s is None else stall_s if out.device is not None else startup_s

    args = to_dict(protocol.WorkerPlan(plan.backend, plan.index, plan.cases, plan.settings, plan.ops, plan.source,
                              plan.ceilings, plan.code))
    got = spawn(command[0], args, timeout=timeout, on_event=seen, idle=idle, exit_s=0.0, grace_s=grace_s,
                stop=stop, paths=(*command[1:], *(user_path() if plan.source else ())))
    out.done, out.returncode, out.stderr_tail = got.done, got.returncode, got.stderr_tail
    if got.done:
        phases = got.result if isinstance(got.result, dict) else {}
        try:
            check_phases(phases)
            out.phases.update(phases)
        except ValueError:
            ignored += 1
        out.phases["shutdown"] = round(max(got.wall_s - (got.done_s or got.wall_s), 0.0), 4)
    f = got.failure
    out.stalled = isinstance(f, Hang) and f.idle and out.device is not None
    if ignored:
        out.notes.append(Note("bench.ignored_output", {"lines": ignored, "examples": tuple(examples)}))
    if isinstance(f, ChildError):
        out.notes.append(Note("bench.worker_failed", {"detail": f.line[:300]}))
    out.stop = to_stop(got, out.finished, len(plan.cases), idle=StopCause.TIMEOUT, during=current)
    return out


def unrun_skips(plan: Plan, outcome: BenchOutcome) -> list[Skip]:
    """Planned cases the worker never reported, as skips that say why."""
    if outcome.stop is None:
        return []
    seen = {c.key for c in outcome.cases}
    for s in outcome.skips:
        # A skip of one precision says nothing of the others; one that names none (schema 1) stands for all.
        precisions = (s.precision,) if s.precision else PRECISIONS
        seen |= {(s.op, s.impl, s.dtype, p, s.shape) for p in precisions}
    reason = Note("skip.not_run", {"cause": outcome.stop.cause.value})
    return [c.skip(reason) for c in plan.cases if c.key not in seen]


def assemble(plan: Plan, outcome: BenchOutcome, started: str, duration_s: float) -> Bench:
    """The Bench of a run whose worker ran (or tried to)."""
    return Bench(
        device=outcome.device or plan.device,
        settings=plan.settings,
        cases=tuple(outcome.cases),
        skipped=tuple(plan.skips) + tuple(outcome.skips) + tuple(unrun_skips(plan, outcome)),
        ceiling_runs=tuple(outcome.ceiling_runs),
        windows=tuple(outcome.windows),
        notes=tuple(dict.fromkeys((*plan.notes, *outcome.notes))),
        stop=outcome.stop,
        started=started,
        duration_s=round(duration_s, 3),
        versions=dict(outcome.versions),
        ops=plan.ops,
        phases=dict(outcome.phases),
    )


def no_bench(plan: Plan, started: str) -> Bench:
    """The Bench of a run where nothing could be measured: the reason, and no cases."""
    return Bench(device=plan.device, settings=plan.settings, skipped=plan.skips, notes=plan.notes,
                 started=started, duration_s=0.0, ops=plan.ops)
