"""Runs a burn: one isolated worker per GPU, all at once, gathering what each reports (``burn_gpus``). A worker
that crashes, hangs (no interval for ``stall_s``), runs past its time or prints garbage makes its GPU a failed
one with what it sent; the others finish. Ctrl-C, SIGTERM and SIGHUP stop every worker and keep what each sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from envcheck.bench.process import Ended, Popen, WorkerProcess, exit_cause
from envcheck.bench.runner import TERMINATE_GRACE_S, wait_for
from envcheck.burn import protocol
from envcheck.burn.protocol import (
    BurnPlan,
    Done,
    Event,
    IntervalDone,
    Noted,
    PhaseEnded,
    PhaseStarted,
    Sampled,
    Started,
)
from envcheck.burn.telemetry import TelemetrySample, to_telemetry
from envcheck.model import BenchDevice, Note, Stop, StopCause
from envcheck.model.burn import Burn, BurnGpu, MemtestRecord, PhaseRun, SdcRecord
from envcheck.model.node import XidEvent, XidScan

WORKER_COMMAND = tuple(protocol.worker_argv())
START_S = 180.0  # importing torch and starting CUDA on a loaded node
STALL_S = 60.0  # no interval for this long after the start: the worker is hung
SLACK_S = 120.0  # beyond the plan's seconds, before a worker that still reports is stopped
OnEvent = Callable[[int, Event], None]
XidScanner = Callable[[], XidScan]


@dataclass
class _Phase:
    started: PhaseStarted
    t_s: list[float] = field(default_factory=list)
    dt_s: list[float] = field(default_factory=list)
    work: list[float] = field(default_factory=list)
    iterations: int = 0
    finished: bool = False

    def model(self) -> PhaseRun:
        s = self.started
        n = min(len(self.t_s), len(self.dt_s), len(self.work))  # a copy taken while intervals still arrive
        return PhaseRun(s.phase, s.dtype, s.shape, s.unit, s.started_s, s.planned_s, self.t_s[:n], self.dt_s[:n],
                        self.work[:n], self.iterations, self.finished)


@dataclass
class Collected:
    """Everything one worker sent, as it came."""

    plan: BurnPlan
    device: BenchDevice | None = None
    samples: list[TelemetrySample] = field(default_factory=list)
    phases: list[_Phase] = field(default_factory=list)
    sdc: SdcRecord | None = None
    memtest: MemtestRecord | None = None
    notes: list[Note] = field(default_factory=list)
    done: bool = False
    ignored: int = 0

    def apply(self, ev: Event) -> bool:
        """Record one event; whether it shows progress (anything but a telemetry sample or a note)."""
        if isinstance(ev, Sampled):
            self.samples.append(ev.sample)
            return False
        if isinstance(ev, Noted):
            self.notes.append(ev.note)
            return False
        if isinstance(ev, Started):
            self.device = ev.device
        elif isinstance(ev, PhaseStarted):
            self.phases.append(_Phase(ev))
        elif isinstance(ev, IntervalDone):
            if not self.phases or self.phases[-1].started.phase != ev.phase:
                raise ValueError(f"interval of phase {ev.phase!r} outside it")
            p = self.phases[-1]
            p.t_s.append(ev.t_s)
            p.dt_s.append(ev.dt_s)
            p.work.append(ev.work)
            p.iterations += ev.iterations
        elif isinstance(ev, PhaseEnded):
            if self.phases and self.phases[-1].started.phase == ev.phase:
                self.phases[-1].finished = True
            self.sdc = ev.sdc or self.sdc
            self.memtest = ev.memtest or self.memtest
        elif isinstance(ev, Done):
            self.done = True
        return True

    def gpu(self, stop: Stop | None) -> BurnGpu:
        """What was gathered so far (copies: a worker's thread may still be adding to it)."""
        notes = list(self.notes)
        if self.ignored:
            notes.append(Note("burn.ignored_output", {"lines": self.ignored}))
        return BurnGpu(self.plan.index, self.device, tuple(p.model() for p in list(self.phases)),
                       to_telemetry(list(self.samples), self.plan.telemetry_interval_s), self.sdc, self.memtest,
                       stop, tuple(notes), self.plan.control)

    @property
    def planned_phases(self) -> int:
        p = self.plan
        return sum(s > 0 for s in (p.gemm_s, p.bandwidth_s, p.memtest_s))

    @property
    def finished_phases(self) -> int:
        return sum(p.finished for p in self.phases)


class _Workers:
    """The started workers, so an interrupt can stop them all."""

    def __init__(self) -> None:
        self.procs: list[WorkerProcess] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def add(self, proc: WorkerProcess) -> None:
        with self.lock:
            self.procs.append(proc)

    def stop_all(self) -> None:
        self.stopping.set()
        with self.lock:
            procs = list(self.procs)
        threads = [threading.Thread(target=p.stop, args=(TERMINATE_GRACE_S,), daemon=True) for p in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def run_worker(plan: BurnPlan, on_event: Callable[[Event], None], *, command: Sequence[str] = WORKER_COMMAND,
               popen: Popen | None = None, workers: _Workers | None = None, stall_s: float = STALL_S,
               start_s: float = START_S, slack_s: float = SLACK_S,
               clock: Callable[[], float] = time.monotonic, got: Collected | None = None) -> BurnGpu:
    """One GPU's worker, start to end; never raises for what the worker does. ``got``: where what it
    sends is gathered (the caller's, so what was seen survives even if this thread is cut short)."""
    got = got if got is not None else Collected(plan)
    try:
        proc = WorkerProcess.start(command, popen) if popen else WorkerProcess.start(command)
    except OSError as e:
        return got.gpu(Stop(StopCause.START_FAILED, 0, got.planned_phases, detail=f"{type(e).__name__}: {e}"))
    if workers is not None:
        workers.add(proc)
    proc.send(protocol.encode_plan(plan))
    started = last = clock()
    deadline = started + plan.seconds + slack_s + start_s
    ended: StopCause | None = None
    eof = False
    while True:
        now = clock()
        if workers is not None and workers.stopping.is_set():
            break
        if now >= deadline:
            ended = StopCause.TIMEOUT
            break
        if now - last > (stall_s if got.device is not None else start_s):
            ended = StopCause.HUNG
            break
        line = proc.next_line(0.2)
        if line is None:
            continue
        if isinstance(line, Ended):  # output closed, or the worker exited and a leftover held it open
            eof = line is Ended.EOF
            break
        try:
            ev = protocol.decode(line)
            if got.apply(ev):
                last = clock()
        except ValueError:
            if line.strip():
                got.ignored += 1
            continue
        on_event(ev)
    if ended is not None or not eof or not proc.wait(TERMINATE_GRACE_S):
        proc.stop(TERMINATE_GRACE_S)
    proc.join_readers()
    for line in proc.drain():  # lines written before it stopped still count
        try:
            got.apply(protocol.decode(line))
        except ValueError:
            pass
    return got.gpu(_stop(got, proc, ended, deadline - started))


def _stop(got: Collected, proc: WorkerProcess, ended: StopCause | None, timeout_s: float) -> Stop | None:
    if got.done and ended is None:
        return None
    base = {"finished": got.finished_phases, "planned": got.planned_phases}
    last = proc.last_words()
    detail = last[:300] if last else None
    if ended == StopCause.TIMEOUT:
        return Stop(StopCause.TIMEOUT, timeout_s=timeout_s, **base)  # type: ignore[arg-type]
    if ended == StopCause.HUNG:
        return Stop(StopCause.HUNG, detail=detail, **base)  # type: ignore[arg-type]
    if got.done:
        return None
    cause, sig = exit_cause(proc.returncode)
    return Stop(cause, signal=sig, returncode=proc.returncode, detail=detail, **base)  # type: ignore[arg-type]


def _utc() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_xid_scanner() -> XidScan:
    from envcheck.node.xid import scan_xids
    from envcheck.probes.host import default_host

    return scan_xids(default_host())


def new_xids(before: XidScan, after: XidScan) -> tuple[XidEvent, ...]:
    """Xid lines in ``after`` that ``before`` did not have (the kernel log is read whole each time)."""
    seen = {(e.uptime_s, e.line) for e in before.events}
    return tuple(e for e in after.events if (e.uptime_s, e.line) not in seen)


def burn_node(gpus: Sequence[int], minutes: float, *, cpu: bool = False, on_event: OnEvent | None = None,
              command: Sequence[str] = WORKER_COMMAND, **options: object) -> Burn:
    """The burn of this machine's ``gpus`` for ``minutes`` each, all at once: what ``envcheck burn``,
    ``run --burn`` and a fleet's node call. ``options``: BurnPlan fields (tiny sizes in tests);
    ``cpu``: the CPU at tiny sizes instead (CI)."""
    from envcheck.burn.plan import CPU_OPTIONS, plans

    opts = {**(CPU_OPTIONS if cpu else {}), **options}
    return burn_gpus(plans(gpus, minutes, "cpu" if cpu else "cuda", **opts), minutes, on_event, command=command)


def burn_gpus(plans: Sequence[BurnPlan], minutes: float, on_event: OnEvent | None = None, *,
              command: Sequence[str] = WORKER_COMMAND, popen: Popen | None = None,
              xid_scanner: XidScanner | None = default_xid_scanner, stall_s: float = STALL_S,
              start_s: float = START_S) -> Burn:
    """Every plan's worker at once; one ``BurnGpu`` per plan, in plan order. Never raises for what a
    worker does; Ctrl-C, SIGTERM and SIGHUP stop every worker and keep what each sent."""
    before = xid_scanner() if xid_scanner else XidScan(None)
    workers = _Workers()
    results: list[BurnGpu | None] = [None] * len(plans)
    collected = [Collected(p) for p in plans]
    lock = threading.Lock()
    started, t0 = _utc(), time.monotonic()

    def work(k: int, plan: BurnPlan) -> None:
        def seen(ev: Event) -> None:
            if on_event is not None:
                with lock:
                    on_event(plan.index, ev)

        results[k] = run_worker(plan, seen, command=command, popen=popen, workers=workers, stall_s=stall_s,
                                start_s=start_s, got=collected[k])

    threads = [threading.Thread(target=work, args=(k, p), daemon=True) for k, p in enumerate(plans)]
    for t in threads:
        t.start()
    stopped = wait_for(threads, workers.stop_all)
    gpus = []
    for k, got in enumerate(collected):
        g = results[k]
        if g is None:  # its thread did not finish in time: what it gathered still stands
            g = got.gpu(Stop(StopCause.HUNG, got.finished_phases, got.planned_phases))
        if stopped is not None and g.stop is not None:
            g = replace(g, stop=Stop(stopped[0], g.stop.finished, g.stop.planned, signal=stopped[1]))
        gpus.append(g)
    after = xid_scanner() if xid_scanner else XidScan(None)
    return Burn(minutes, started, time.monotonic() - t0, tuple(gpus), after.source, after.reasons,
                new_xids(before, after), stopped[0] if stopped else None, stopped[1] if stopped else None)
