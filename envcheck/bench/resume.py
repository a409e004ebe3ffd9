"""``envcheck bench``: a plan run to the end through crashes and hangs of the user's code, a property of one case,
not of the machine. The case the worker was on fails with the cause (every case of its group, where it was
drawing the group's inputs) and a fresh worker goes on with the cases left, without the ceilings. Every restart
removes at least one case, so the loop ends; a stop by the user, a signal or the time limit ends the run.
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
    """Stage ``crash`` or ``hang``, and what the machine said (the last stderr line, the signal, the status)."""
    stop = out.stop
    assert stop is not None
    if out.stalled:
        return Failure("hang", f"no result within {stop.timeout_s:g} s" if stop.timeout_s else "-")
    said = stop.detail or stop.signal or (f"exit status {stop.returncode}" if stop.returncode is not None else "-")
    return Failure("crash", said)


def run_resuming(plan: Plan, on_event: OnEvent, timeout: float, stall_s: float, *,
                 command: Sequence[str] = runner.WORKER_COMMAND,
                 clock: Callable[[], float] = time.monotonic) -> BenchOutcome:
    """Every case of ``plan`` reported (measured, skipped, or failed with its crash or hang), unless stopped."""
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

