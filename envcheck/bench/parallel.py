"""The per-GPU suite on several GPUs at once, one worker each (a thread per worker): a worker that crashes or
hangs costs only its GPU; Ctrl-C, SIGTERM and SIGHUP stop them all and keep what each finished."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from envcheck.bench import protocol, runner, suite
from envcheck.harness.signals import each, serial
from envcheck.model import Bench, Stop, StopCause
from envcheck.probes.collect import utc_now

OnGpuEvent = Callable[[int, protocol.Event], None]


@dataclass(frozen=True)
class GpuRun:
    gpu: int
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
    seen = serial(on_event)

    def run(plan: suite.Plan, stop: threading.Event) -> tuple[runner.BenchOutcome, str, float] | None:
        if not plan.runnable:
            return None
        started, t0 = utc_now(), time.monotonic()
        out = runner.run_worker(plan, functools.partial(seen, plan.index), timeout, command=command, stop=stop)
        return out, started, time.monotonic() - t0

    got, stopped = each(plans, run)
    cause = stopped.cause if stopped else None
    runs = []
    for plan, ran in zip(plans, got, strict=True):
        out, started, took = ran or (runner.BenchOutcome(stop=Stop(StopCause.START_FAILED, 0, len(plan.cases))),
                                     utc_now(), 0.0)
        if stopped is not None and cause is not None and not out.done:
            # The worker died of the SIGTERM this process sent it: the cause is what reached envcheck.
            base = out.stop or Stop(cause, out.finished, len(plan.cases))
            out.stop = replace(base, cause=cause, signal=stopped.signal, finished=out.finished,
                               planned=len(plan.cases), returncode=None)
        runs.append(GpuRun(plan.index, runner.assemble(plan, out, started, took)))
    return ParallelRun(tuple(runs), cause, stopped.signal if stopped else None)
