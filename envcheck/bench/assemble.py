"""The report's ``Bench`` of one device, from the plan and what the worker reported: every planned case once,
measured, skipped with a reason, or (the run stopped early) ``skip.not_run`` naming the stop's cause."""

from __future__ import annotations

from envcheck.bench.runner import BenchOutcome
from envcheck.bench.suite import Plan
from envcheck.model import Bench, Note, Skip
from envcheck.ops import PRECISIONS


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
