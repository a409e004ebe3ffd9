"""The benchmark worker (its contract: protocol.py): the device, the measured ceilings, then each group of cases
prepared (group.py) and sampled under an NVML window each (sampling.py). One case failing never ends the run."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.bench import compile_ahead, compile_cache, device, impls, protocol
from envcheck.bench.graphs import graph_region
from envcheck.bench.group import Prepared, Stopwatch, guarded, log, open_group, prepare
from envcheck.bench.impls import tf32_matmul
from envcheck.bench.l2 import DEFAULT_L2_BYTES, ROTATE_L2_MULTIPLE, SMALL_BYTES
from envcheck.bench.sampling import POWER_PROBE_MS, sample, settle, span, to_case
from envcheck.bench.suite import PlannedCase
from envcheck.bench.timer import SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS, Region, Timer
from envcheck.errors import one_line
from envcheck.model import BenchDevice, Case, CeilingRun, Note, Skip, Timing
from envcheck.model.codec import JSON
from envcheck.ops import ITEMSIZE, lookup

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
        """The bandwidth window, then the matmul window (the ceilings' section below says why two, and when)."""
        precisions = tuple(dict.fromkeys(c.precision for c in self.plan.cases
                                         if lookup(c.op, self.plan.ops).compute_bound))
        self._ceiling_window(rt, lambda free: bandwidth_kernels(free, rt.device.l2_bytes), "bandwidth")
        if precisions:
            self._ceiling_window(rt, lambda free: matmul_kernels(precisions, free, CEILING_SEED), "matmul")

    def _ceiling_window(self, rt: device.Runtime, make: Callable[[int], list[Kernel]], what: str) -> None:
        kernels: list[Kernel] = []
        try:
            free = rt.free_bytes() or 0
            kernels = make(free)
            if not kernels:
                self.note(Note("ceiling.no_memory", {"ceiling": what, "free_bytes": free}))
            for got in measure(rt.timer, kernels):
                if isinstance(got, tuple):
                    kernel, error = got
                    log(f"ceiling {kernel.kernel} {kernel.precision or kernel.dtype} failed", error)
                    self.note(failure_note(kernel, one_line(error)))
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


# The measured ceilings (no case may beat one): bandwidth kernels far past L2 and cuBLAS matmuls per precision
# measured, timed as cases are in two windows warmed ``WARMUP_MS`` each (memory-bound never beside tensor-core load).
BANDWIDTH_BUFFER_BYTES = 1 << 30
MIN_L2_MULTIPLE = 8
MATMUL_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 16384))
WARMUP_MS = 500.0
MEMORY_FRACTION = 0.5  # of free memory: the CUDA context, cuBLAS workspaces and the graphs' pools need the rest
TRIAD_SCALAR = 0.5


@dataclass(frozen=True)
class Kernel:
    """One ceiling kernel bound to its buffers, and what its CeilingRun records."""

    kernel: str
    dtype: str
    shape: tuple[int, ...]
    fn: Callable[[], object]
    precision: str | None = None


def bandwidth_kernels(free_bytes: int, l2_bytes: int | None) -> list[Kernel]:
    """copy, read, fill and triad over three fp32 buffers from free memory; [] where they cannot be far past L2."""
    import torch

    per_buffer = min(BANDWIDTH_BUFFER_BYTES, int(MEMORY_FRACTION * free_bytes) // 3)
    if per_buffer < MIN_L2_MULTIPLE * (l2_bytes or DEFAULT_L2_BYTES):
        return []
    n = per_buffer // (1 << 20) * (1 << 20) // 4
    a = torch.empty(n, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a).normal_()
    c = torch.empty_like(a).normal_()
    total = torch.empty((), dtype=torch.float32, device="cuda")
    shape = (n,)
    return [
        Kernel("copy", "fp32", shape, lambda: a.copy_(b)),
        Kernel("read", "fp32", shape, lambda: torch.sum(b, dim=0, out=total)),
        Kernel("fill", "fp32", shape, lambda: a.fill_(1.0)),
        Kernel("triad", "fp32", shape, lambda: torch.add(b, c, alpha=TRIAD_SCALAR, out=a)),
    ]


def matmul_kernels(precisions: tuple[str, ...], free_bytes: int, seed: int) -> list[Kernel]:
    """cuBLAS at each of MATMUL_SHAPES for each precision while they all fit, smaller shapes first."""
    kernels: list[Kernel] = []
    budget = MEMORY_FRACTION * free_bytes
    for m, n, k in MATMUL_SHAPES:
        for precision in precisions:
            need = (m * k + k * n + m * n) * ITEMSIZE[_dtype(precision)]
            if need <= budget:
                kernels.append(matmul_kernel(precision, (m, n, k), seed))
                budget -= need
    return kernels


def _dtype(precision: str) -> str:
    return "fp32" if precision in ("fp32", "tf32") else precision


def matmul_kernel(precision: str, shape: tuple[int, int, int], seed: int) -> Kernel:
    import torch

    dtype = _dtype(precision)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    inputs = impls.make_inputs("matmul", shape, dtype, "cuda", gen)
    out = impls.make_output("matmul", shape, dtype, "cuda")
    return Kernel("matmul", dtype, shape, impls.torch_impl("matmul", inputs, out), precision)


def measure(timer: Timer, kernels: list[Kernel], capture: Callable[[Timer, Kernel], Region] | None = None
            ) -> Iterator[CeilingRun | tuple[Kernel, BaseException]]:
    """Each kernel's CeilingRun, or the kernel and what stopped it, from one interleaved window (``capture``: the
    graph Region seam, under the TF32 switch cuBLAS reads at capture)."""
    capture = capture or _capture
    regions: list[tuple[Kernel, Region]] = []
    for k in kernels:
        try:
            regions.append((k, capture(timer, k)))
        except Exception as e:  # noqa: BLE001 - one kernel's failure; the others are still measured
            yield k, e
    if not regions:
        return
    timer.warmup(lambda: [r.run() for _, r in regions], budget_ms=WARMUP_MS)
    for (k, _), got in zip(regions, timer.measure_interleaved([r for _, r in regions]), strict=True):
        if isinstance(got, Timing):
            yield CeilingRun(k.kernel, k.dtype, k.shape, got, k.precision)
        else:
            yield k, got


def _capture(timer: Timer, k: Kernel) -> Region:
    with tf32_matmul(k.precision or k.dtype):
        k.fn()  # cuBLAS handle and workspace, before the capture
        timer.clock.synchronize()
        return graph_region(timer, k.fn)


def failure_note(k: Kernel, detail: str) -> Note:
    """What the report says of a ceiling kernel that could not be measured."""
    precision = {"precision": k.precision} if k.precision else {}
    return Note("ceiling.failed", {"kernel": k.kernel, "dtype": k.dtype, "shape": k.shape, "detail": detail,
                                   **precision})
