"""The benchmark worker (its contract: protocol.py): the device, the measured ceilings, then each group of cases
prepared (group.py) and sampled under an NVML window each (sampling.py). One case failing never ends the run."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from envcheck.bench import ceilings, compile_ahead, compile_cache, device, protocol
from envcheck.bench.group import Prepared, Stopwatch, guarded, log, open_group, prepare
from envcheck.bench.impls import tf32_matmul
from envcheck.bench.l2 import ROTATE_L2_MULTIPLE, SMALL_BYTES
from envcheck.bench.sampling import POWER_PROBE_MS, sample, settle, span, to_case
from envcheck.bench.suite import PlannedCase
from envcheck.bench.timer import SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS, Timer
from envcheck.errors import one_line
from envcheck.model import BenchDevice, Case, Note, Skip
from envcheck.model.codec import JSON
from envcheck.ops import lookup

if TYPE_CHECKING:
    from envcheck.bench.monitor import Monitor
    from envcheck.probes.nvml import NvmlLike

Emit = Callable[[protocol.Event], None]
MONITOR_INTERVAL_S = 0.05  # NVML's power is itself an average, and the clock swings worth seeing take 100s of ms
CEILING_SEED = 1


class Worker:
    """Runs one plan, emitting protocol events through ``emit``."""

    def __init__(self, plan: protocol.WorkerPlan, emit: Emit) -> None:
        self.plan = plan
        self.emit = emit
        self._monitor_factory: Callable[[], Monitor] | None = None
        self._nvml: NvmlLike | None = None
        self._windows = 0
        self.watch = Stopwatch()  # the phases of no one case (model.BENCH_PHASES); spans' zero

    def note(self, note: Note) -> None:
        self.emit(protocol.Noted(note))

    def run(self) -> dict[str, float]:
        """Every case of the plan; the seconds of the phases of no one case."""
        import torch

        plan = self.plan
        if plan.backend == "cuda":
            reason = device.cuda_unusable(torch, plan.index)
            if reason:
                unusable = BenchDevice("cuda", f"CUDA device {plan.index}", plan.index)
                self.emit(protocol.Started(unusable, device.versions(torch)))
                self.note(reason)
                for c in plan.cases:
                    self.emit(protocol.Skipped(c.skip(reason)))
                return self.watch.rounded()
            torch.cuda.set_device(plan.index)
            self._nvml, error = device.open_nvml()
            if error:
                self.note(Note("bench.nvml_unavailable", {"detail": error}))
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
        self.emit(protocol.Started(dev, device.versions(torch)))
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
            first = 0
            for g, (_, run) in enumerate(itertools.groupby(plan.cases, key=lambda c: c.group)):
                cases = list(run)
                self._run_group(rt, first, cases, plan.settings.seed + g)
                rt.after_failure()  # the group's tensors go back to the device before the next is sized
                first += len(cases)
        finally:
            compile_ahead.stop(ahead)
            compile_cache.save()
            if self._nvml is not None:
                with contextlib.suppress(Exception):
                    self._nvml.shutdown()
        return self.watch.rounded()

    def _start_monitoring(self, dev: BenchDevice, rt: device.Runtime) -> None:
        if self._nvml is None:
            return
        from envcheck.bench.monitor import LimitWatch, Monitor

        nvml = self._nvml
        # NVML ignores CUDA_VISIBLE_DEVICES: the UUID names the same GPU in both.
        target: int | str = dev.uuid or dev.pci_bus_id or self.plan.index
        self._monitor_factory = lambda: Monitor(nvml, target, interval_s=MONITOR_INTERVAL_S)
        rt.limit_watch = lambda: LimitWatch(nvml, target)

    def _l2_note(self, rt: device.Runtime) -> None:
        if rt.settings.cold_l2:
            self.note(Note("bench.l2_cold", {"l2_bytes": rt.device.l2_bytes, "l2_multiple": ROTATE_L2_MULTIPLE,
                                             "min_bytes": SMALL_BYTES}))
        else:
            self.note(Note("bench.l2_not_cold"))

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
                    self.emit(protocol.CeilingMeasured(got))
        except Exception as e:  # noqa: BLE001 - the ceilings are optional; every case still runs
            log(f"measured {what} ceilings failed", e)
            self.note(Note("ceiling.window_failed", {"ceiling": what, "detail": one_line(e)}))
        finally:
            del kernels
            rt.after_failure()  # frees the buffers before the first group is sized

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
                self.emit(protocol.CaseStarted(first + j, total, pc))
            for pc in cases:
                self.emit(protocol.Measured(pc.failed("run", one_line(e))))
            return
        results: list[Case | Skip | Prepared] = []
        with tf32_matmul(head.precision) if lookup(head.op, self.plan.ops).compute_bound else contextlib.nullcontext():
            for j, pc in enumerate(cases):
                self.emit(protocol.CaseStarted(first + j, total, pc))
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
                self.emit(protocol.Skipped(r) if isinstance(r, Skip) else protocol.Measured(r))

    def _sample(self, rt: device.Runtime, p: Prepared) -> int | None:
        """Settle one prepared implementation, then sample it under a monitor window of its own; the window's index."""
        with p.watch.phase("settle"):
            settle(rt, p)
        monitor = self._monitor_factory() if rt.cuda and self._monitor_factory is not None else None
        with p.watch.phase("sampling"), contextlib.nullcontext() if monitor is None else monitor:
            try:
                sample(rt, p)
            except Exception as e:  # noqa: BLE001 - this implementation's measurement failed as a whole
                log(f"{p.planned.label}: sampling failed", e)
                p.failure = p.failure or e
        p.end_s = p.watch.now()
        try:  # a Monitor never raises while it samples
            samples = monitor.window() if monitor is not None else None
        except Exception as e:  # noqa: BLE001 - the window is optional; the case stands without it
            log(f"NVML samples unreadable: {one_line(e)}")
            samples = None
        if samples is None:
            return None
        window = self._windows
        self._windows += 1
        self.emit(protocol.WindowSampled(window, samples))
        return window


def _timed(result: Case | Skip | Prepared, watch: Stopwatch, start: float, end: float | None = None
           ) -> Case | Skip | Prepared:
    """A failed case with the phases and span its work took (a Case built from a Prepared has them already)."""
    if not isinstance(result, Case) or result.phases or result.span_s is not None:
        return result
    end = watch.now() if end is None else end
    return dataclasses.replace(result, phases=watch.rounded(), span_s=(round(start, 4), round(max(end, start), 4)))


def main(args: object, out: Callable[[JSON], None]) -> dict[str, float]:
    """The harness's target: the plan in, events out, the worker's phases back."""
    return Worker(protocol.decode_plan(args), lambda ev: out(protocol.encode(ev))).run()
