"""The per-GPU suite on several GPUs at once: one isolated worker per GPU (``runner.run_worker``, each in its
own thread), so a node's GPUs take about as long as one. Ctrl-C, SIGTERM and SIGHUP stop every worker's tree
and keep what each finished; a worker that crashes or hangs costs only its own GPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from envcheck.bench import runner, suite
from envcheck.bench.assemble import assemble
from envcheck.harness.signals import together
from envcheck.model import Bench, Stop, StopCause

OnGpuEvent = Callable[[int, runner.Event], None]


def _utc() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class GpuRun:
    """One GPU's suite: its plan, what its worker reported, and the resulting Bench."""

    gpu: int
    plan: suite.Plan
    outcome: runner.BenchOutcome
    bench: Bench


@dataclass(frozen=True)
class ParallelRun:
    """Every GPU's suite; ``stopped``: Ctrl-C (``user``) or SIGTERM/SIGHUP (``signal``) ended them."""

    runs: tuple[GpuRun, ...]
    stopped: StopCause | None = None
    signal: str | None = None


def run_gpus(plans: Sequence[suite.Plan], timeout: float, on_event: OnGpuEvent | None = None, *,
             command: Sequence[str] = runner.WORKER_COMMAND) -> ParallelRun:
    """Run every plan's worker at once and wait for all; one ``GpuRun`` per plan, in plan order. Never raises
    for what a worker does; a stop signal stops them all, and each unfinished GPU's bench records it."""
    outcomes: list[runner.BenchOutcome | None] = [None] * len(plans)
    started: list[str] = [""] * len(plans)
    durations: list[float] = [0.0] * len(plans)
    lock = threading.Lock()

    def job(k: int, plan: suite.Plan) -> Callable[[threading.Event], None]:
        def seen(ev: runner.Event) -> None:
            if on_event is not None:
                with lock:
                    on_event(plan.index, ev)

        def run(stop: threading.Event) -> None:
            started[k] = _utc()
            t0 = time.monotonic()
            outcomes[k] = runner.run_worker(plan, seen, timeout, command=command, stop=stop)
            durations[k] = time.monotonic() - t0

        return run

    stopped = together([job(k, p) for k, p in enumerate(plans) if p.runnable])
    cause = stopped.cause if stopped else None
    runs = []
    for k, plan in enumerate(plans):
        out = outcomes[k] or runner.BenchOutcome(stop=Stop(StopCause.START_FAILED, 0, len(plan.cases)))
        if stopped is not None and cause is not None and not out.done:
            # The worker died of the SIGTERM this process sent it: the cause is what reached envcheck.
            base = out.stop or Stop(cause, out.finished, len(plan.cases))
            out.stop = replace(base, cause=cause, signal=stopped.signal, finished=out.finished,
                               planned=len(plan.cases), returncode=None)
        bench = assemble(plan, out, started[k] or _utc(), durations[k])
        runs.append(GpuRun(plan.index, plan, out, bench))
    return ParallelRun(tuple(runs), cause, stopped.signal if stopped else None)
