"""Running a plan to the end through crashes and hangs of the code it measures.

``envcheck run`` measures envcheck's own kernels: a worker that dies ends the run, and what
finished is kept (runner.py). ``envcheck bench`` measures a user's code, where a crash
(``os._exit``, a segfault) or a hang is a property of one case, not of the machine: the case
the worker was on fails with the cause, and a fresh worker goes on with the cases left (the
rest of that group included: a group is measured together, so its results died with the
worker), without measuring the ceilings again. A crash while the group's shared inputs were
drawn (no case started) fails the whole group. A case that crashes only while the group is
sampled is blamed on the group's last-started case; run again, the real culprit crashes again
and is blamed in turn, so every restart removes at least one case and the loop ends. A stop
by the user, a signal, the run's own time limit or a worker that cannot start ends the run.

The restarted workers' monitor windows are renumbered after the earlier ones', so every case
still points at its own window in the one ``Bench``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from envcheck.bench import runner
from envcheck.bench.protocol import Measured
from envcheck.bench.runner import BenchOutcome, OnEvent
from envcheck.bench.suite import Plan, PlannedCase
from envcheck.model import Failure, StopCause

# Causes that belong to the case being measured; any other stop belongs to the run.
CASE_CAUSES = (StopCause.CRASHED, StopCause.EXITED, StopCause.HUNG)


def _cause(out: BenchOutcome) -> Failure:
    """The failure of the cases a dead or stalled worker was on: stage ``crash`` or ``hang``, and
    what the machine said (the worker's last stderr line, else its signal or exit status)."""
    stop = out.stop
    assert stop is not None
    if out.stalled:
        return Failure("hang", f"no result within {stop.timeout_s:g} s" if stop.timeout_s else "-")
    said = stop.detail or stop.signal or (f"exit status {stop.returncode}" if stop.returncode is not None else "-")
    return Failure("crash", said)


def run_resuming(plan: Plan, on_event: OnEvent, timeout: float, stall_s: float, *,
                 command: Sequence[str] = runner.WORKER_COMMAND,
                 clock: Callable[[], float] = time.monotonic) -> BenchOutcome:
    """Every case of ``plan`` reported (measured, skipped, or failed with its crash or hang),
    unless the run itself was stopped (``stop`` says how, as for ``run_worker``)."""
    merged = BenchOutcome()
    deadline = clock() + timeout
    remaining: tuple[PlannedCase, ...] = plan.cases
    first = True
    while remaining:
        part = dataclasses.replace(plan, cases=remaining, ceilings=plan.ceilings and first)
        out = runner.run_worker(part, on_event, max(1.0, deadline - clock()), command=command, stall_s=stall_s)
        _merge(merged, out)
        reported = {c.key for c in out.cases} | {s.key for s in out.skips}
        stop = out.stop
        own = stop is not None and (stop.cause in CASE_CAUSES or out.stalled)
        if stop is None or not own:
            if stop is not None:
                merged.stop = dataclasses.replace(stop, finished=merged.finished, planned=len(plan.cases))
            break
        # The worker goes through the plan in order: with no case started, it was drawing the
        # inputs of the group of its first unreported case.
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
                on_event(Measured(case))
        remaining = tuple(pc for pc in remaining if pc.key not in reported and pc.key not in culprits)
        first = False
    return merged


def _merge(into: BenchOutcome, out: BenchOutcome) -> None:
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

