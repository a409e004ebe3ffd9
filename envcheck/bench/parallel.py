"""The per-GPU suite on several GPUs at once, one worker each (a thread per worker): a worker that crashes or
hangs costs only its GPU; Ctrl-C, SIGTERM and SIGHUP stop them all and keep what each finished."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from envcheck.bench import protocol, runner, suite
from envcheck.harness.signals import together
from envcheck.model import Bench, Stop, StopCause
from envcheck.probes.collect import utc_now

OnGpuEvent = Callable[[int, protocol.Event], None]


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
    """Every plan's worker at once; one ``GpuRun`` per plan, in plan order, each unfinished one with its stop."""
    outcomes: list[runner.BenchOutcome | None] = [None] * len(plans)
    started: list[str] = [""] * len(plans)
    durations: list[float] = [0.0] * len(plans)
    lock = threading.Lock()

    def seen(gpu: int, ev: protocol.Event) -> None:
        if on_event is not None:
            with lock:
                on_event(gpu, ev)

    def run(k: int, stop: threading.Event) -> None:
        started[k], t0 = utc_now(), time.monotonic()
        outcomes[k] = runner.run_worker(plans[k], functools.partial(seen, plans[k].index), timeout, command=command,
                                        stop=stop)
        durations[k] = time.monotonic() - t0

    stopped = together([functools.partial(run, k) for k, p in enumerate(plans) if p.runnable])
    cause = stopped.cause if stopped else None
    runs = []
    for k, plan in enumerate(plans):
        out = outcomes[k] or runner.BenchOutcome(stop=Stop(StopCause.START_FAILED, 0, len(plan.cases)))
        if stopped is not None and cause is not None and not out.done:
            # The worker died of the SIGTERM this process sent it: the cause is what reached envcheck.
            base = out.stop or Stop(cause, out.finished, len(plan.cases))
            out.stop = replace(base, cause=cause, signal=stopped.signal, finished=out.finished,
                               planned=len(plan.cases), returncode=None)
        bench = runner.assemble(plan, out, started[k] or utc_now(), durations[k])
        runs.append(GpuRun(plan.index, plan, out, bench))
    return ParallelRun(tuple(runs), cause, stopped.signal if stopped else None)
