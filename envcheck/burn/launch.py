"""Runs a burn: one worker per GPU through the harness, all at once. A worker that crashes, hangs (no interval
for ``stall_s``), overruns or sends garbage fails its GPU with what it sent; Ctrl-C, SIGTERM and SIGHUP stop
every worker and keep what each sent."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from envcheck.burn import protocol
from envcheck.burn.telemetry import TelemetrySample, to_telemetry
from envcheck.harness.failures import ChildError, to_stop
from envcheck.harness.signals import each, serial
from envcheck.harness.spawn import spawn
from envcheck.model import BenchDevice, Note, Stop, StopCause, to_dict
from envcheck.model.burn import Burn, BurnGpu, MemtestRecord, PhaseRun, SdcRecord
from envcheck.model.node import XidEvent, XidScan
from envcheck.probes.collect import utc_now

WORKER_COMMAND = ("envcheck.burn.worker:main",)  # the target, then folders for its sys.path (tests' fakes)
START_S = 180.0  # importing torch and starting CUDA on a loaded node
STALL_S = 60.0  # no interval for this long after the start: the worker is hung
SLACK_S = 120.0  # beyond the plan's seconds, before a worker that still reports is stopped
OnEvent = Callable[[int, protocol.Event], None]
XidScanner = Callable[[], XidScan]


@dataclass
class _Phase:
    started: protocol.PhaseStarted
    intervals: list[protocol.IntervalDone] = field(default_factory=list)
    finished: bool = False

    def model(self) -> PhaseRun:
        s, done = self.started, list(self.intervals)  # a copy: intervals may still arrive
        return PhaseRun(s.phase, s.dtype, s.shape, s.unit, s.started_s, s.planned_s, [i.t_s for i in done],
                        [i.dt_s for i in done], [i.work for i in done], sum(i.iterations for i in done), self.finished)


@dataclass
class Collected:
    """Everything one worker sent, as it came."""

    plan: protocol.BurnPlan
    device: BenchDevice | None = None
    samples: list[TelemetrySample] = field(default_factory=list)
    phases: list[_Phase] = field(default_factory=list)
    sdc: SdcRecord | None = None
    memtest: MemtestRecord | None = None
    notes: list[Note] = field(default_factory=list)
    done: bool = False
    ignored: int = 0

    def apply(self, ev: protocol.Event) -> bool:
        """Record one event; whether it shows progress (anything but a telemetry sample or a note)."""
        if isinstance(ev, protocol.Sampled):
            self.samples.append(ev.sample)
            return False
        if isinstance(ev, protocol.Noted):
            self.notes.append(ev.note)
            return False
        if isinstance(ev, protocol.Started):
            self.device = ev.device
        elif isinstance(ev, protocol.PhaseStarted):
            self.phases.append(_Phase(ev))
        elif isinstance(ev, protocol.IntervalDone):
            if not self.phases or self.phases[-1].started.phase != ev.phase:
                raise ValueError(f"interval of phase {ev.phase!r} outside it")
            self.phases[-1].intervals.append(ev)
        elif isinstance(ev, protocol.PhaseEnded):
            if self.phases and self.phases[-1].started.phase == ev.phase:
                self.phases[-1].finished = True
            self.sdc = ev.sdc or self.sdc
            self.memtest = ev.memtest or self.memtest
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


def run_worker(plan: protocol.BurnPlan, on_event: Callable[[protocol.Event], None], *,
               command: Sequence[str] = WORKER_COMMAND, stop: threading.Event | None = None, stall_s: float = STALL_S,
               start_s: float = START_S, slack_s: float = SLACK_S, got: Collected | None = None) -> BurnGpu:
    """One GPU's worker, start to end; never raises for what it does. ``got``: where what it sends is gathered (the
    caller's, so it survives this thread being cut short)."""
    got = got if got is not None else Collected(plan)

    def seen(data: object) -> bool:
        try:
            ev = protocol.decode(data)
            progress = got.apply(ev)
        except ValueError:
            got.ignored += 1
            return False
        on_event(ev)
        return progress

    timeout = plan.seconds + slack_s + start_s
    out = spawn(command[0], to_dict(plan), timeout=timeout, on_event=seen, paths=command[1:], stop=stop,
                idle=lambda: stall_s if got.device is not None else start_s)
    got.done = out.done
    if isinstance(out.failure, ChildError):
        got.notes.append(Note("burn.worker_failed", {"detail": out.failure.line[:300]}))
    return got.gpu(to_stop(out, got.finished_phases, got.planned_phases))


def default_xid_scanner() -> XidScan:
    from envcheck.probes.host import default_host
    from envcheck.probes.xid import scan_xids

    return scan_xids(default_host())


def new_xids(before: XidScan, after: XidScan) -> tuple[XidEvent, ...]:
    """Xid lines in ``after`` that ``before`` did not have (the kernel log is read whole each time)."""
    seen = {(e.uptime_s, e.line) for e in before.events}
    return tuple(e for e in after.events if (e.uptime_s, e.line) not in seen)


def burn_node(gpus: Sequence[int], minutes: float, *, cpu: bool = False, on_event: OnEvent | None = None,
              command: Sequence[str] = WORKER_COMMAND, **options: object) -> Burn:
    """The burn of this machine's ``gpus`` for ``minutes`` each, all at once (``envcheck burn``, ``run --burn``, a
    fleet's node). ``options``: protocol.BurnPlan fields; ``cpu``: the CPU at tiny sizes instead (CI)."""
    opts = {**(protocol.CPU_OPTIONS if cpu else {}), **options}
    return burn_gpus(protocol.plans(gpus, minutes, "cpu" if cpu else "cuda", **opts), minutes, on_event, command=command)


def burn_gpus(plans: Sequence[protocol.BurnPlan], minutes: float, on_event: OnEvent | None = None, *,
              command: Sequence[str] = WORKER_COMMAND, xid_scanner: XidScanner | None = default_xid_scanner,
              stall_s: float = STALL_S, start_s: float = START_S) -> Burn:
    """Every plan's worker at once; one ``BurnGpu`` per plan, in plan order."""
    before = xid_scanner() if xid_scanner else XidScan(None)
    collected = [Collected(p) for p in plans]
    seen = serial(on_event)
    started, t0 = utc_now(), time.monotonic()

    def run(got: Collected, stop: threading.Event) -> BurnGpu:
        return run_worker(got.plan, functools.partial(seen, got.plan.index), command=command, stop=stop,
                          stall_s=stall_s, start_s=start_s, got=got)

    results, stopped = each(collected, run)
    cause = stopped.cause if stopped else None
    gpus = []
    for got, g in zip(collected, results, strict=True):
        if g is None:  # its thread did not finish in time: what it gathered still stands
            g = got.gpu(Stop(StopCause.HUNG, got.finished_phases, got.planned_phases))
        if cause is not None and g.stop is not None:
            g = replace(g, stop=Stop(cause, g.stop.finished, g.stop.planned, signal=stopped.signal if stopped else None))
        gpus.append(g)
    after = xid_scanner() if xid_scanner else XidScan(None)
    return Burn(minutes, started, time.monotonic() - t0, tuple(gpus), after.source, after.reasons,
                new_xids(before, after), cause, stopped.signal if stopped else None)
