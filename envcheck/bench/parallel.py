"""The per-GPU suite on several GPUs at once: one isolated worker per GPU (``runner.run_worker``, each in
its own thread), so a node's GPUs take about as long as one.

Every worker gets the node's child environment (NVLink multicast off). Ctrl-C stops every worker's
process group and keeps what each finished; a worker that crashes or hangs costs only its own GPU.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from envcheck.bench import runner, suite
from envcheck.errors import UsageError
from envcheck.model import Bench, Environment
from envcheck.node.launch import child_env

OnGpuEvent = Callable[[int, runner.Event], None]


def parse_gpus(text: str, count: int) -> tuple[int, ...]:
    """``--gpus all`` or ``--gpus 0,2``: the GPU indices, checked against the ``count`` GPUs present."""
    text = text.strip().lower()
    if text == "all":
        if count < 1:
            raise UsageError("--gpus all: no GPU found")
        return tuple(range(count))
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise UsageError(f"--gpus: {part!r} is not a GPU index (use all, or e.g. 0,2)")
        i = int(part)
        if not 0 <= i < count:
            raise UsageError(f"--gpus: GPU {i} does not exist ({count} GPU{'s' if count != 1 else ''}: "
                             f"{', '.join(map(str, range(count)))})")
        if i not in out:
            out.append(i)
    if not out:
        raise UsageError("--gpus: no GPU given")
    return tuple(out)


def plan_gpus(options: Any, env: Environment, gpus: Sequence[int]) -> tuple[suite.Plan, ...]:
    """One plan per GPU: the same options with ``device`` set to each index."""
    base = vars(options) if isinstance(options, argparse.Namespace) else dict(options.__dict__)
    return tuple(suite.plan(argparse.Namespace(**{**base, "device": g}), env) for g in gpus)


@dataclass
class _Procs:
    """The worker processes started so far, so Ctrl-C can stop them all."""

    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[str]:
        kwargs["env"] = child_env()
        proc: subprocess.Popen[str] = subprocess.Popen(*args, **kwargs)
        with self.lock:
            self.procs.append(proc)
        return proc

    def stop(self) -> None:
        with self.lock:
            procs = list(self.procs)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in procs:
                if p.poll() is None:
                    _signal_group(p, sig)
            deadline = time.monotonic() + runner.TERMINATE_GRACE_S
            while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                time.sleep(0.05)


def _signal_group(proc: subprocess.Popen[str], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the worker runs in its own session: this reaches its compile workers too
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def _utc() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class GpuRun:
    """One GPU's suite: its plan, what its worker reported, and the resulting Bench."""

    gpu: int
    plan: suite.Plan
    outcome: runner.BenchOutcome
    bench: Bench


def run_gpus(plans: Sequence[suite.Plan], timeout: float, on_event: OnGpuEvent | None = None, *,
             command: Sequence[str] = runner.WORKER_COMMAND,
             popen: Callable[..., subprocess.Popen[str]] | None = None) -> tuple[GpuRun, ...]:
    """Run every plan's worker at once and wait for all; one ``GpuRun`` per plan, in plan order.

    Raises KeyboardInterrupt after Ctrl-C only once every worker is stopped and its results kept in
    ``interrupted_runs`` of the exception (``exc.args[0]``), so the caller can still write a report.
    """
    procs = _Procs()
    starter = popen or procs.popen
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
        outcomes[k] = runner.run_worker(plan, seen, timeout, starter, command=command)
        durations[k] = time.monotonic() - t0

    threads = [threading.Thread(target=work, args=(k, p), daemon=True) for k, p in enumerate(plans) if p.runnable]
    for t in threads:
        t.start()
    interrupted = False
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
    except KeyboardInterrupt:
        interrupted = True
        procs.stop()
        for t in threads:
            t.join(timeout=runner.TERMINATE_GRACE_S * 2)
    runs = []
    for k, plan in enumerate(plans):
        out = outcomes[k] or runner.BenchOutcome(partial=True, interrupted=None if plan.runnable else "not runnable")
        if interrupted and not out.done:
            out.by_user = True
            out.partial = True
            out.interrupted = f"interrupted by the user (Ctrl-C) after {out.finished} of {len(plan.cases)} cases"
        bench = runner.assemble(plan, out, started[k] or _utc(), durations[k])
        runs.append(GpuRun(plan.index, plan, out, bench))
    if interrupted:
        raise KeyboardInterrupt(tuple(runs))
    return tuple(runs)
