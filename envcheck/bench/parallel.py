"""The per-GPU suite on several GPUs at once: one isolated worker per GPU (``runner.run_worker``, each in
its own thread), so a node's GPUs take about as long as one.

Every worker gets envcheck's child environment (NVLink multicast off), as every worker does, from
``WorkerProcess.start``. Ctrl-C, SIGTERM and SIGHUP stop every worker's process tree and keep what
each finished; a worker that crashes or hangs costs only its own GPU.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from envcheck.bench import runner, suite
from envcheck.bench.assemble import assemble
from envcheck.bench.process import stop_tree
from envcheck.model import Bench, Stop, StopCause

OnGpuEvent = Callable[[int, runner.Event], None]


@dataclass
class _Procs:
    """The worker processes started so far, so an interrupt can stop them all (each worker runs
    in its own session: Ctrl-C in the terminal reaches envcheck alone, which decides)."""

    start: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = self.start(*args, **kwargs)
        with self.lock:
            self.procs.append(proc)
        return proc

    def stop(self) -> None:
        with self.lock:
            procs = list(self.procs)
        stoppers = [threading.Thread(target=stop_tree, args=(p, runner.TERMINATE_GRACE_S), daemon=True) for p in procs]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()


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
             command: Sequence[str] = runner.WORKER_COMMAND,
             popen: Callable[..., subprocess.Popen[bytes]] | None = None) -> ParallelRun:
    """Run every plan's worker at once and wait for all; one ``GpuRun`` per plan, in plan order.

    Ctrl-C, SIGTERM and SIGHUP (a batch scheduler's end of job) stop every worker's process tree
    and keep what each finished; each unfinished GPU's bench records the stop. Never raises for
    what a worker does.
    """
    procs = _Procs(popen or subprocess.Popen)
    outcomes: list[runner.BenchOutcome | None] = [None] * len(plans)
    started: list[str] = [""] * len(plans)
    durations: list[float] = [0.0] * len(plans)
    lock = threading.Lock()

    def work(k: int, plan: suite.Plan) -> None:
        def seen(ev: runner.Event) -> None:
            if on_event is not None:
                with lock:
                    on_event(plan.index, ev)

        started[k] = _utc()
        t0 = time.monotonic()
        outcomes[k] = runner.run_worker(plan, seen, timeout, procs.popen, command=command)
        durations[k] = time.monotonic() - t0

    threads = [threading.Thread(target=work, args=(k, p), daemon=True) for k, p in enumerate(plans) if p.runnable]
    for t in threads:
        t.start()
    stopped = runner.wait_for(threads, procs.stop)
    runs = []
    for k, plan in enumerate(plans):
        out = outcomes[k] or runner.BenchOutcome(stop=Stop(StopCause.START_FAILED, 0, len(plan.cases)))
        if stopped is not None and not out.done:
            # The worker died of the SIGTERM this process sent it: the cause is what reached envcheck.
            base = out.stop or Stop(stopped[0], out.finished, len(plan.cases))
            out.stop = replace(base, cause=stopped[0], signal=stopped[1], finished=out.finished,
                               planned=len(plan.cases), returncode=None)
        bench = assemble(plan, out, started[k] or _utc(), durations[k])
        runs.append(GpuRun(plan.index, plan, out, bench))
    return ParallelRun(tuple(runs), stopped[0] if stopped else None, stopped[1] if stopped else None)
