"""The isolated benchmark worker, ``main`` run by the harness (its contract: protocol.py).

Everything that can crash or hang happens here, never in the ``envcheck run`` process. The
run, in order: the device (device.py), the measured ceilings (ceilings.py), then each group
of cases: prepared one implementation at a time (group.py), then sampled one implementation at a
time, each under an NVML monitor window of its own (sampling.py, monitor.py), reported in plan
order. One case failing never ends the run (failure.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from envcheck.bench import ceilings, compile_ahead, compile_cache, device, protocol
from envcheck.bench.failure import guarded, log, one_line
from envcheck.bench.group import Prepared, open_group, prepare
from envcheck.bench.impls import tf32_matmul
from envcheck.bench.l2 import ROTATE_L2_MULTIPLE, SMALL_BYTES
from envcheck.bench.phases import Stopwatch
from envcheck.bench.protocol import (
    CaseStarted,
    CeilingMeasured,
    Event,
    Measured,
    Noted,
    Skipped,
    Started,
    WindowSampled,
    WorkerPlan,
)
from envcheck.bench.sampling import POWER_PROBE_MS, sample, settle, span, to_case
from envcheck.bench.suite import PlannedCase
from envcheck.bench.timer import SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS, Timer
from envcheck.model import BenchDevice, Case, MonitorWindow, Note, Skip
from envcheck.ops import lookup

Emit = Callable[[Event], None]
# NVML's power reading is itself an average over tens of ms to a second (driver-dependent), and
# the clock swings worth seeing take hundreds of ms: 50 ms samples show them and keep a
# group's window to a few dozen samples.
MONITOR_INTERVAL_S = 0.05
CEILING_SEED = 1


class _SafeMonitor:
    """NVML sampling around a measurement that never raises: any failure gives no window."""

    def __init__(self, factory: Callable[[], Any] | None) -> None:
        self._factory = factory
        self._monitor: Any = None

    def __enter__(self) -> _SafeMonitor:
        if self._factory is not None:
            try:
                self._monitor = self._factory()
                self._monitor.__enter__()
            except Exception as e:  # noqa: BLE001 - monitoring is optional; the cases are measured regardless
                log(f"NVML monitor unavailable: {one_line(e)}")
                self._monitor = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._monitor is not None:
            try:
                self._monitor.__exit__(None, None, None)
            except Exception as e:  # noqa: BLE001
                log(f"NVML monitor stop failed: {one_line(e)}")

    def window(self) -> MonitorWindow | None:
        if self._monitor is None:
            return None
        try:
            return self._monitor.window()
        except Exception as e:  # noqa: BLE001
            log(f"NVML samples unreadable: {one_line(e)}")
            return None


def groups_in_order(cases: tuple[PlannedCase, ...]) -> Iterator[tuple[int, list[PlannedCase]]]:
    """Runs of consecutive cases of one group, with the first's index in the plan."""
    start = 0
    while start < len(cases):
        end = start + 1
        while end < len(cases) and cases[end].group == cases[start].group:
            end += 1
        yield start, list(cases[start:end])
        start = end


class Worker:
    """Runs one plan, emitting protocol events through ``emit``."""

    def __init__(self, plan: WorkerPlan, emit: Emit) -> None:
        self.plan = plan
        self.emit = emit
        self._monitor_factory: Callable[[], Any] | None = None
        self._nvml: Any = None
        self._windows = 0
        self.watch = Stopwatch()  # the run's phases that belong to no one case (model.BENCH_PHASES); spans' zero

    def note(self, note: Note) -> None:
        self.emit(Noted(note))

    def run(self) -> dict[str, float]:
        """Every case of the plan; the seconds spent on what belongs to no one case (model.BENCH_PHASES)."""
        import torch

        plan = self.plan
        if plan.backend == "cuda":
            reason = device.cuda_unusable(torch, plan.index)
            if reason:
                self.emit(Started(BenchDevice("cuda", f"CUDA device {plan.index}", plan.index), device.versions(torch)))
                self.note(reason)
                for c in plan.cases:
                    self.emit(Skipped(c.skip(reason)))
                return self.watch.rounded()
            torch.cuda.set_device(plan.index)
            self._open_nvml()
            dev = device.cuda_device(torch, plan.index, self._nvml)
            compile_cache.use_for(torch, plan.index)  # before anything compiles
        else:
            if plan.settings.threads:
                torch.set_num_threads(plan.settings.threads)
            if plan.settings.interpret:
                from envcheck.bench import interpret

                interpret.enable()  # before any kernel is decorated
            dev = BenchDevice("cpu", device.cpu_name())
        rt = device.Runtime(torch, plan.backend, plan.index, dev, Timer(plan.backend, plan.settings), plan.settings,
                            ops=plan.ops, source=plan.source, code=plan.code)
        self.emit(Started(dev, device.versions(torch)))
        ahead = compile_ahead.start(plan.cases, dev, plan.settings.control) if rt.cuda else []
        try:
            if rt.cuda:
                self._start_monitoring(dev, rt)
                if any(lookup(c.op, plan.ops).compute_bound for c in plan.cases):
                    sustained = {"settle_ms": round(SUSTAIN_SETTLE_MS), "window_ms": round(SUSTAIN_WINDOW_MS)}
                    if rt.limit_watch is None:  # every compute-bound implementation (sampling.py)
                        self.note(Note("bench.sustained", sustained))
                    else:
                        self.note(Note("bench.sustained_limited", {"probe_ms": round(POWER_PROBE_MS), **sustained}))
                if plan.ceilings:
                    self._l2_note(rt)
                    with self.watch.phase("ceilings"):
                        self._measure_ceilings(rt)
                if any(c.impl == "compile" for c in plan.cases):
                    with self.watch.phase("torch_compile"):
                        compile_ahead.warm_inductor()
            else:
                self.note(Note("bench.cpu_timing", {"threads": int(torch.get_num_threads())}))
            seed = plan.settings.seed
            for g, (first, cases) in enumerate(groups_in_order(plan.cases)):
                self._run_group(rt, first, cases, seed + g)
                rt.after_failure()  # the group's tensors go back to the device before the next is sized
        finally:
            compile_ahead.stop(ahead)
            compile_cache.save()
            if self._nvml is not None:
                with contextlib.suppress(Exception):
                    self._nvml.shutdown()
        return self.watch.rounded()

    # ----------------------------------------------------------------------- set-up

    def _open_nvml(self) -> None:
        try:
            from envcheck.probes.nvml import Nvml

            nvml = Nvml()
            error = nvml.init()
        except Exception as e:  # noqa: BLE001 - no NVML means no clock samples, not no benchmark
            error = one_line(e)
        if error:
            self.note(Note("bench.nvml_unavailable", {"detail": str(error)}))
            return
        self._nvml = nvml

    def _start_monitoring(self, dev: BenchDevice, rt: device.Runtime) -> None:
        if self._nvml is None:
            return
        from envcheck.bench.monitor import LimitWatch, Monitor

        nvml = self._nvml
        # NVML numbers GPUs by PCI bus and ignores CUDA_VISIBLE_DEVICES; the UUID names the
        # same GPU in both, so CUDA device 0 is monitored even when it is NVML device 3.
        target: int | str = dev.uuid or dev.pci_bus_id or self.plan.index
        self._monitor_factory = lambda: Monitor(nvml, target, interval_s=MONITOR_INTERVAL_S)
        rt.limit_watch = lambda: LimitWatch(nvml, target)

    def _l2_note(self, rt: device.Runtime) -> None:
        if rt.settings.cold_l2:
            self.note(Note("bench.l2_cold", {"l2_bytes": rt.device.l2_bytes, "l2_multiple": ROTATE_L2_MULTIPLE,
                                             "min_bytes": SMALL_BYTES}))
        else:
            self.note(Note("bench.l2_not_cold"))

    # ----------------------------------------------------------------------- ceilings

    def _measure_ceilings(self, rt: device.Runtime) -> None:
        """The bandwidth window, then the matmul window (ceilings.py says why two, and when)."""
        precisions = tuple(dict.fromkeys(c.precision for c in self.plan.cases
                                         if lookup(c.op, self.plan.ops).compute_bound))
        self._ceiling_window(rt, lambda free: ceilings.bandwidth_kernels(free, rt.device.l2_bytes), "bandwidth")
        if precisions:
            self._ceiling_window(rt, lambda free: ceilings.matmul_kernels(precisions, free, CEILING_SEED), "matmul")

    def _ceiling_window(self, rt: device.Runtime, make: Callable[[int], list[ceilings.Kernel]], what: str) -> None:
        kernels: list[ceilings.Kernel] = []
        try:
            free = rt.free_bytes() or 0
            kernels = make(free)
            if not kernels:
                self.note(Note("ceiling.no_memory", {"ceiling": what, "free_bytes": free}))
            for got in ceilings.measure(rt.timer, kernels):
                if isinstance(got, tuple):
                    kernel, error = got
                    log(f"ceiling {kernel.kernel} {kernel.precision or kernel.dtype} failed", error)
                    self.note(ceilings.failure_note(kernel, one_line(error)))
                else:
                    self.emit(CeilingMeasured(got))
        except Exception as e:  # noqa: BLE001 - the ceilings are optional; every case still runs
            log(f"measured {what} ceilings failed", e)
            self.note(Note("ceiling.window_failed", {"ceiling": what, "detail": one_line(e)}))
        finally:
            del kernels
            rt.after_failure()  # frees the buffers before the first group is sized

    # ----------------------------------------------------------------------- one group of cases

    def _run_group(self, rt: device.Runtime, first: int, cases: list[PlannedCase], seed: int) -> None:
        """Prepare each implementation, sample them together, emit a result for each in plan order."""
        total = len(self.plan.cases)
        head = cases[0]
        try:
            with self.watch.phase("inputs"):
                group = open_group(rt, head, seed)
        except Exception as e:  # noqa: BLE001 - e.g. an input that cannot be drawn: the group's cases fail
            log(f"{head.group_label}: setting up the group failed", e)
            rt.after_failure()
            for j, pc in enumerate(cases):
                self.emit(CaseStarted(first + j, total, pc))
            for pc in cases:
                self.emit(Measured(pc.failed("run", one_line(e))))
            return
        results: list[Case | Skip | Prepared] = []
        with tf32_matmul(head.precision) if lookup(head.op, self.plan.ops).compute_bound else contextlib.nullcontext():
            for j, pc in enumerate(cases):
                self.emit(CaseStarted(first + j, total, pc))
                if group.skip is not None:
                    results.append(pc.skip(group.skip))
                    continue
                watch, start = self.watch.child(), self.watch.now()
                got = guarded(rt, pc, "run", lambda pc=pc, g=group, w=watch: prepare(rt, pc, g, w))
                results.append(_timed(got, watch, start))
            windows = {id(r): self._sample(rt, r) for r in results if isinstance(r, Prepared)}
            for r in results:
                if isinstance(r, Prepared):
                    p = r
                    r = _timed(guarded(rt, p.planned, "sample", lambda p=p: to_case(p, windows[id(p)])), p.watch,
                               p.start_s, span(p)[1])
                self.emit(Skipped(r) if isinstance(r, Skip) else Measured(r))

    def _sample(self, rt: device.Runtime, p: Prepared) -> int | None:
        """Settle one prepared implementation, then sample it under a monitor window of its own
        (sustained where its load meets the GPU's power or thermal limit: sampling.py); the window's index."""
        with p.watch.phase("settle"):
            settle(rt, p)
        monitor = _SafeMonitor(self._monitor_factory if rt.cuda else None)
        with p.watch.phase("sampling"), monitor:
            try:
                sample(rt, p)
            except Exception as e:  # noqa: BLE001 - this implementation's measurement failed as a whole
                log(f"{p.planned.label}: sampling failed", e)
                p.failure = p.failure or e
        p.end_s = p.watch.now()
        samples = monitor.window()
        if samples is None:
            return None
        window = self._windows
        self._windows += 1
        self.emit(WindowSampled(window, samples))
        return window


def _timed(result: Case | Skip | Prepared, watch: Stopwatch, start: float, end: float | None = None
           ) -> Case | Skip | Prepared:
    """A failed case with the phases and span its work took (a Prepared carries its own; a Case
    built from one has them already)."""
    if not isinstance(result, Case) or result.phases or result.span_s is not None:
        return result
    end = watch.now() if end is None else end
    return dataclasses.replace(result, phases=watch.rounded(), span_s=(round(start, 4), round(max(end, start), 4)))


def main(args: Any, out: Callable[[Any], None]) -> dict[str, float]:
    """The harness's target: the plan in, events out, the worker's phases back."""
    return Worker(protocol.decode_plan(args), lambda ev: out(protocol.encode(ev))).run()
