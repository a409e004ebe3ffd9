"""Runs the benchmark worker through the harness and gathers what it reports (protocol.py) into the report's
``Bench``. Whatever befalls the run (Ctrl-C, SIGTERM, SIGHUP), every planned case is reported once: measured, skipped
with a reason, or ``skip.not_run`` naming the stop's cause. A worker's command: its target, then ``sys.path`` folders.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from envcheck.bench import protocol
from envcheck.bench.suite import Plan, PlannedCase
from envcheck.harness.env import user_path
from envcheck.harness.failures import ChildError, Hang, to_stop
from envcheck.harness.spawn import spawn
from envcheck.model import (
    Accuracy,
    Bench,
    BenchDevice,
    Case,
    CaseKey,
    CeilingRun,
    Failure,
    MonitorWindow,
    Note,
    Settings,
    Skip,
    Stop,
    StopCause,
    Timing,
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
    """Run the worker on ``plan`` (``on_event`` sees each event; never raises); ended at once when it returned (its
    teardown is nothing to wait for). With ``stall_s``, a started worker silent that long is stopped, ``stalled``."""
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


# envcheck bench: a plan run to the end through crashes and hangs of the user's code (a property of one case,
# not of the machine). Causes that belong to the case being measured; any other stop belongs to the run.
CASE_CAUSES = (StopCause.CRASHED, StopCause.EXITED, StopCause.HUNG)


def _cause(out: BenchOutcome) -> Failure:
    """Stage ``crash`` or ``hang``, and what the machine said (the last stderr line, the signal, the status)."""
    stop = out.stop
    assert stop is not None
    if out.stalled:
        return Failure("hang", f"no result within {stop.timeout_s:g} s" if stop.timeout_s else "-")
    said = stop.detail or stop.signal or (f"exit status {stop.returncode}" if stop.returncode is not None else "-")
    return Failure("crash", said)


def run_resuming(plan: Plan, on_event: OnEvent, timeout: float, stall_s: float, *,
                 command: Sequence[str] = WORKER_COMMAND,
                 clock: Callable[[], float] = time.monotonic) -> BenchOutcome:
    """Every case of ``plan`` reported (measured, skipped, or failed with its crash or hang), unless stopped."""
    merged = BenchOutcome()
    deadline = clock() + timeout
    remaining: tuple[PlannedCase, ...] = plan.cases
    first = True
    while remaining:
        part = dataclasses.replace(plan, cases=remaining, ceilings=plan.ceilings and first)
        out = run_worker(part, on_event, max(1.0, deadline - clock()), command=command, stall_s=stall_s)
        _extend(merged, out)
        reported = {c.key for c in out.cases} | {s.key for s in out.skips}
        stop = out.stop
        if stop is None or not (stop.cause in CASE_CAUSES or out.stalled):  # the run's stop, not the case's
            if stop is not None:
                merged.stop = dataclasses.replace(stop, finished=merged.finished, planned=len(plan.cases))
            break
        # With no case started, it was drawing the inputs of its first unreported case's group.
        if stop.during is None:
            group = next(pc for pc in remaining if pc.key not in reported).group
            culprits = {pc.key for pc in remaining if pc.group == group and pc.key not in reported}
        else:
            culprits = {stop.during}
        failure = _cause(out)
        for pc in remaining:
            if pc.key in culprits:
                case = pc.failed(failure.stage, failure.detail)
                merged.cases.append(case)
                on_event(protocol.Measured(case))
        remaining = tuple(pc for pc in remaining if pc.key not in reported and pc.key not in culprits)
        first = False
    return merged


def _extend(into: BenchOutcome, out: BenchOutcome) -> None:
    offset = len(into.windows)
    into.cases += [dataclasses.replace(c, window=c.window + offset) if c.window is not None else c for c in out.cases]
    into.skips += out.skips
    into.ceiling_runs += out.ceiling_runs
    into.windows += out.windows
    into.notes += [n for n in out.notes if n not in into.notes]
    into.device = into.device or out.device
    into.versions = into.versions or dict(out.versions)
    into.stderr_tail = out.stderr_tail
    into.returncode = out.returncode
    into.done = out.done


# run --repeat N: N independent repeats of every case in one report (a diff tells a change from run-to-run noise),
# each a fresh worker over the whole plan; a case keeps every repeat's samples in one Timing (``passes``), the
# worst numeric error, every note, and ``case.repeat_failed`` for a repeat in which it failed.
def pass_settings(settings: Settings, repeat: int) -> Settings:
    """Each repeat's settings: a single run's, the repeat count recorded."""
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    return settings if repeat == 1 else dataclasses.replace(settings, repeat=repeat)


def _join(timings: Sequence[Timing]) -> Timing:
    """One timing of several repeats' samples, in order, with each repeat's count."""
    first = timings[0]
    if len(timings) == 1:
        return first
    samples = [x for t in timings for x in t.samples_us]
    return Timing(first.method, samples, first.calls_per_sample, tuple(t.n for t in timings))


def _worst(accuracies: Sequence[Accuracy | None]) -> Accuracy | None:
    """The accuracy of the repeat that erred most: a verdict never passes what failed once."""
    return max((a for a in accuracies if a is not None), default=None,
               key=lambda a: (a.nonfinite or 0, a.rel_l2, a.max_rel_elem or 0.0, a.max_abs))


def merge_cases(repeats: Sequence[tuple[int, Case]]) -> Case:
    """One case from its repeats: (repeat number from 1, the case as that repeat reported it)."""
    measured = [(i, c) for i, c in repeats if c.measured]
    if not measured:
        return repeats[0][1]
    first = measured[0][1]
    notes = list(dict.fromkeys(n for _, c in measured for n in c.notes))
    notes += [Note("case.repeat_failed", {"repeat": i, "stage": c.failure.stage})
              for i, c in repeats if c.failure is not None]
    # Joined per method: the GPU time keeps only the repeats whose graph held.
    gpus = [c.gpu for _, c in measured if c.gpu is not None and c.gpu.method == (first.gpu.method if first.gpu else "")]
    launches = [c.launch for _, c in measured
                if c.launch is not None and first.launch is not None and c.launch.method == first.launch.method]
    return dataclasses.replace(
        first, gpu=_join(gpus) if gpus else None, launch=_join(launches) if launches else None,
        accuracy=_worst([c.accuracy for _, c in measured]), notes=tuple(notes),
        phases=added(c.phases for _, c in repeats), span_s=None if len(repeats) > 1 else first.span_s)


def added(phases: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Seconds per phase over the repeats (a span is one worker's: several have none in common)."""
    out: dict[str, float] = {}
    for p in phases:
        for name, s in p.items():
            out[name] = round(out.get(name, 0.0) + s, 4)
    return out


def merge(outcomes: Sequence[BenchOutcome]) -> BenchOutcome:
    """Every repeat's outcome as one: cases merged by key, windows in order, the first ceilings and stop, every note."""
    if not outcomes:
        raise ValueError("nothing to merge")
    if len(outcomes) == 1:
        return outcomes[0]
    first, last = outcomes[0], outcomes[-1]
    out = BenchOutcome(device=first.device, versions=dict(first.versions), ceiling_runs=list(first.ceiling_runs),
                       notes=list(dict.fromkeys(n for o in outcomes for n in o.notes)),
                       stop=next((o.stop for o in outcomes if o.stop is not None), None), stderr_tail=last.stderr_tail,
                       returncode=last.returncode, done=all(o.done for o in outcomes),
                       phases=added(o.phases for o in outcomes))
    by_key: dict[CaseKey, list[tuple[int, Case]]] = {}
    for i, o in enumerate(outcomes, start=1):
        offset = len(out.windows)
        out.windows.extend(o.windows)
        for c in o.cases:
            if c.window is not None:
                c = dataclasses.replace(c, window=c.window + offset)
            by_key.setdefault(c.key, []).append((i, c))
    out.cases = [merge_cases(v) for v in by_key.values()]
    skips: dict[CaseKey, Skip] = {}
    for s in (s for o in outcomes for s in o.skips):
        skips.setdefault(s.key, s)  # the first repeat's skip of a case no repeat measured
    out.skips = [s for key, s in skips.items() if key not in by_key]
    return out
