"""The isolated benchmark worker: ``python -m envcheck.bench.worker`` (protocol in protocol.py).

Everything that can crash or hang happens here, never in the ``envcheck run`` process:
importing torch, initialising CUDA, compiling Triton kernels and ``torch.compile``. One case
failing never ends the run: its exception becomes a Case with status ``error`` (traceback on
stderr) and out-of-memory becomes a Skip.

What one group of cases (one op, dtype, precision and shape: torch, Triton, torch.compile)
measures (CUDA backend). Per implementation, one after the other:
1. first call, timed on the host until done: ``compile_s`` for Triton (JIT + the matmul race) and
   torch.compile (graph capture + Inductor), kept apart from every measurement;
2. the checked call: output poisoned with NaN, one call, compared with the float64 reference;
3. warm-up calls for ``warmup_ms`` (at least 3), then the CUDA graph for step 4: ``k`` calls
   per graph so a sample lasts >= 100 us and the replay's own launch latency is amortised;
   the time is divided by ``k``. Memory-bound cases above 1 MiB and below 3x L2 are kept out
   of L2 with rotating buffers: the group holds R = ceil(3x L2 / working set) sets of inputs
   and outputs (flags.rotation_sets; the extra R - 1 drawn from the same generator, outside
   any timing), each implementation cycles through them (timer.Rotation) in its warm-up, its
   graph (``k`` = whole cycles) and its eager calls, so every call meets data that the other
   sets have evicted; the first set is the one checked in step 2. flags.py says why cases of
   1 MiB and less are left L2-resident.
Then for all the group's implementations together, steps 4 and 5 in ONE window: every
graph and every eager batch of the group takes its samples in turns of a few ms (timer.py
says why: a power-capped GPU drifts, and a block measured second would meet a hotter, slower
GPU; GPU time and launch time sampled in two windows once gave a launch time shorter than the
GPU time of the same call):
4. GPU time: the graphs replayed between CUDA events;
5. launch time: batches of eager calls between CUDA events, divided by the batch size;
6. NVML sampled through 4 and 5 (clocks, temperature, power, throttle reasons). Every case of
   the group carries this one summary of the group's window: its samples are interleaved far
   more finely than NVML's 20 ms sampling could tell apart, and all of them ran under it.
A failure or OOM of one implementation in any step becomes its error case or skip; the other
implementations of the group are measured all the same. Events stay one per case in plan
order (torch first): ``case_start`` as each implementation is prepared (a hang there names
it), the ``case`` / ``skip`` events once the group is measured: its members' samples are
interleaved, so none is complete before the last turn of step 5, and a worker killed during
a group's sampling loses that group's cases only (the runner reports them as not run).
The CPU backend times eager calls with ``perf_counter`` (method ``host_clock``) only.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from envcheck.bench import accuracy, ceilings, flags, ops, protocol
from envcheck.bench.timer import Region, Rotation, Timer, TimerSettings, calls_per_sample, graph_region
from envcheck.model import BenchDevice, Case, Ceiling, MonitorSummary, Skip, Timing

GIB = 1 << 30
# Share of free device memory one group of cases may use (the CUDA context, allocator slack
# and cuBLAS workspaces need the rest). Rotating buffers get half of what the group leaves
# of it: the other half stays for the outputs an allocating implementation (torch.compile)
# keeps per set, and for the graphs' pools.
MEMORY_FRACTION = 0.8
COPY_BYTES = 1 << 30  # each side of the device-to-device copy that measures bandwidth
MATMUL_CEILING_SIZES = (8192, 4096, 2048)  # largest that fits is timed for the measured TFLOP/s
# An eager batch should last at least this long so launch overhead, not event resolution, is measured.
LAUNCH_TARGET_US = 100.0
MAX_LAUNCH_BATCH = 100

Emit = Callable[[dict[str, Any]], None]


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (compiler errors run to pages; the report wants one line)."""
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    line = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


@dataclass
class Group:
    """Tensors shared by the cases of one (op, dtype, precision, shape): same inputs for every impl."""

    key: tuple[Any, ...]
    inputs: dict[str, Any] = field(default_factory=dict)
    out: Any = None
    # Further (inputs, output) sets for rotating buffers (empty: the case is timed on the
    # first set only); the first set is ``inputs`` / ``out``, the one checked.
    extra_sets: list[tuple[dict[str, Any], Any]] = field(default_factory=list)
    skip_reason: str | None = None
    torch_time: Timing | None = None  # torch's quoted time: the others' speedups divide it


class _SafeMonitor:
    """NVML sampling around a measurement that never raises: any failure gives samples=0."""

    def __init__(self, factory: Callable[[], Any] | None) -> None:
        self._factory = factory
        self._monitor: Any = None

    def __enter__(self) -> _SafeMonitor:
        if self._factory is not None:
            try:
                self._monitor = self._factory()
                self._monitor.__enter__()
            except Exception as e:  # noqa: BLE001 - monitoring is optional; the case is measured regardless
                print(f"envcheck worker: NVML monitor unavailable: {one_line(e)}", file=sys.stderr)
                self._monitor = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._monitor is not None:
            try:
                self._monitor.__exit__(None, None, None)
            except Exception as e:  # noqa: BLE001
                print(f"envcheck worker: NVML monitor stop failed: {one_line(e)}", file=sys.stderr)

    def summary(self) -> MonitorSummary:
        if self._monitor is None:
            return MonitorSummary(samples=0)
        try:
            s = self._monitor.summary()
            return s if isinstance(s, MonitorSummary) else MonitorSummary(samples=0)
        except Exception:  # noqa: BLE001
            return MonitorSummary(samples=0)


class Worker:
    """Runs one plan, emitting protocol events through ``emit``."""

    def __init__(self, plan: dict[str, Any], emit: Emit) -> None:
        self.plan = protocol.validate_plan(plan)
        self.emit = emit
        self.settings = self.plan["settings"]
        self.gpu_facts: dict[str, Any] = self.plan["gpu"]
        self.backend: str = self.plan["device"]
        self.index: int = self.plan["index"]
        self.torch: Any = None
        self.device: BenchDevice | None = None
        self.timer: Timer | None = None
        self.cold_l2 = False  # rotating buffers for mid-size memory-bound cases (flags.rotation_sets)
        self.ceilings: list[Ceiling] = []
        self._monitor_factory: Callable[[], Any] | None = None
        self._nvml: Any = None
        self._group: Group | None = None
        self._groups_made = 0
        self.oom: type[BaseException] = MemoryError

    # ----------------------------------------------------------------------- set-up

    def note(self, text: str) -> None:
        self.emit({"event": "note", "text": " ".join(text.split())})

    def _versions(self) -> dict[str, Any]:
        try:
            triton_version: str | None = importlib.metadata.version("triton")
        except importlib.metadata.PackageNotFoundError:
            triton_version = None
        return {"torch": self.torch.__version__, "triton": triton_version, "cuda": self.torch.version.cuda}

    def _cuda_unusable(self) -> str | None:
        torch = self.torch
        if torch.version.cuda is None:
            return f"PyTorch {torch.__version__} is a CPU-only build"
        if not torch.cuda.is_available():
            return "torch.cuda.is_available() is False (driver missing, or no GPU visible)"
        if self.index >= torch.cuda.device_count():
            return f"CUDA device {self.index} does not exist ({torch.cuda.device_count()} visible)"
        return None

    def _cuda_device(self) -> BenchDevice:
        torch = self.torch
        props = torch.cuda.get_device_properties(self.index)
        cc = f"{props.major}.{props.minor}"
        return BenchDevice(
            backend="cuda", name=str(props.name), index=self.index,
            sm_count=int(props.multi_processor_count),
            l2_bytes=int(getattr(props, "L2_cache_size", 0)) or None,
            memory_total_bytes=int(props.total_memory), compute_capability=cc,
        )

    @staticmethod
    def _cpu_name() -> str:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                for line in f:
                    if line.startswith("model name"):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return platform.processor() or platform.machine() or "CPU"

    def _setup_monitor(self) -> None:
        try:
            from envcheck.bench.monitor import Monitor
            from envcheck.probes.nvml import Nvml

            nvml = Nvml()
            error = nvml.init()
        except Exception as e:  # noqa: BLE001 - no NVML means no clock samples, not no benchmark
            error = one_line(e)
        if error:
            self.note(f"NVML monitoring unavailable ({error}): clocks and throttling not sampled")
            return
        self._nvml = nvml
        # NVML numbers GPUs by PCI bus and ignores CUDA_VISIBLE_DEVICES; the UUID names the
        # same GPU in both, so CUDA device 0 is monitored even when it is NVML device 3.
        uuid = getattr(self.torch.cuda.get_device_properties(self.index), "uuid", None)
        target: int | str = str(uuid) if uuid else self.index
        self._monitor_factory = lambda: Monitor(nvml, target, interval_s=0.02)

    # ----------------------------------------------------------------------- run

    def run(self) -> None:
        import torch

        self.torch = torch
        # torch.OutOfMemoryError is new in torch 2.4; older versions only have the cuda alias.
        self.oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
        cases = self.plan["cases"]
        if self.backend == "cuda":
            reason = self._cuda_unusable()
            if reason:
                name = self.gpu_facts.get("name") or f"CUDA device {self.index}"
                self.emit({"event": "start", "device": BenchDevice("cuda", str(name), self.index),
                           "versions": self._versions()})
                self.note(f"nothing measured: {reason}")
                for c in cases:
                    self._emit_skip(c, f"no usable CUDA GPU: {reason}")
                self.emit({"event": "done"})
                return
            torch.cuda.set_device(self.index)
            self.device = self._cuda_device()
            self.timer = Timer("cuda", TimerSettings.from_plan(self.settings))
        else:
            self.device = BenchDevice("cpu", self._cpu_name())
            self.timer = Timer("cpu", TimerSettings.from_plan(self.settings).scaled_for_cpu())
        self.emit({"event": "start", "device": self.device, "versions": self._versions()})
        if self.backend == "cpu":
            # Why there is no GPU run is the plan's note (it knows the probes); this one says how
            # the CPU times were taken.
            self.note("CPU baseline: PyTorch timed with a host clock (time.perf_counter) around synchronous calls")
        else:
            self._setup_monitor()
            self._setup_cold_l2()
            self._measure_ceilings(cases)
        try:
            for first, specs in groups_in_order(cases):
                self._run_group(first, len(cases), specs)
        finally:
            if self._nvml is not None:
                with contextlib.suppress(Exception):
                    self._nvml.shutdown()
        self._release_group()
        self.emit({"event": "done"})

    def _setup_cold_l2(self) -> None:
        assert self.device is not None
        if not self.settings.get("cold_l2", True):
            self.note("L2 not kept cold (cold_l2 off): memory-bound cases smaller than L2 may report "
                      "L2 bandwidth (flagged)")
            return
        self.cold_l2 = True
        l2 = self.device.l2_bytes or flags.DEFAULT_L2_BYTES
        mib = l2 / (1 << 20)
        example = flags.rotation_sets(12 << 20, l2, memory_bound=True)
        self.note(f"L2 kept cold for memory-bound cases from 1 MiB to {flags.ROTATE_L2_MULTIPLE}x L2 "
                  f"({mib:.0f} MiB L2) by rotating buffers: each implementation cycles through R = "
                  f"ceil({flags.ROTATE_L2_MULTIPLE}x L2 / working set) >= 2 sets of inputs and outputs "
                  f"(R = {example} for 12 MiB) in its CUDA graph and its eager calls, so the other sets evict a "
                  f"set from L2 before it is used again; time per call = replay time / calls (whole cycles); "
                  f"the first set is the one checked; cases of 1 MiB and less are L2-resident (flagged)")

    # ----------------------------------------------------------------------- ceilings

    def _measure_ceilings(self, cases: list[dict[str, Any]]) -> None:
        assert self.device is not None
        found: list[Ceiling] = []
        bw = ceilings.theoretical_bandwidth({**self.gpu_facts, "name": self.gpu_facts.get("name") or self.device.name})
        if bw:
            found.append(bw)
        else:
            self.note("theoretical bandwidth unknown: NVML gave no memory clock or bus width")
        try:
            found.append(self._copy_bandwidth())
        except Exception as e:  # noqa: BLE001 - the ceiling is optional; every case still runs
            self.note(f"measured bandwidth unavailable: {one_line(e)}")
            self._after_failure()
        clock = self.gpu_facts.get("sm_clock_max_mhz")
        if not clock:
            # torch reports the max clock in kHz on recent versions; NVML's value is preferred.
            khz = getattr(self.torch.cuda.get_device_properties(self.index), "clock_rate", None)
            clock = khz / 1000 if khz else None
        found.extend(ceilings.compute_ceilings(
            self.gpu_facts.get("name") or self.device.name,
            self.gpu_facts.get("compute_capability") or self.device.compute_capability,
            self.gpu_facts.get("sm_count") or self.device.sm_count, clock))
        precisions = dict.fromkeys(c["precision"] for c in cases if c["op"] == "matmul")
        for p in precisions:
            try:
                c = self._matmul_rate(p)
                if c:
                    found.append(c)
            except Exception as e:  # noqa: BLE001
                self.note(f"measured {p} matmul rate unavailable: {one_line(e)}")
                self._after_failure()
        self.ceilings = found
        for c in found:
            self.emit({"event": "ceiling", "ceiling": c})

    def _free_bytes(self) -> int:
        free, _total = self.torch.cuda.mem_get_info(self.index)
        return int(free)

    def _copy_bandwidth(self) -> Ceiling:
        torch = self.torch
        assert self.timer is not None
        timer = self.timer
        nbytes = min(COPY_BYTES, int(self._free_bytes() * 0.25)) // 4 * 4

        def timed_copy() -> Timing:
            # The buffers live only in this call, so they are freed before empty_cache below.
            src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").normal_()
            dst = torch.empty_like(src)
            timer.warmup(lambda: dst.copy_(src))
            return timer.measure(lambda: dst.copy_(src), method="cuda_events")

        timing = timed_copy()
        torch.cuda.empty_cache()
        return ceilings.measured_bandwidth(2 * nbytes, timing.median_us, timing.n)

    def _matmul_rate(self, precision: str) -> Ceiling | None:
        torch = self.torch
        assert self.timer is not None
        dtype = "fp32" if precision in ("fp32", "tf32") else precision
        free = self._free_bytes()
        for size in ceilings_sizes(free, ops.ITEMSIZE[dtype]):
            gen = torch.Generator(device="cuda").manual_seed(1)
            inputs = ops.make_inputs("matmul", (size, size, size), dtype, "cuda", gen)
            out = ops.make_output("matmul", (size, size, size), dtype, "cuda")
            fn = ops.torch_impl("matmul", inputs, out)
            with ops.tf32_matmul(precision):
                self.timer.warmup(fn)
                timing = self.timer.measure(fn, method="cuda_events")
            del inputs, out
            torch.cuda.empty_cache()
            tflops = 2 * size**3 / (timing.median_us * 1e-6) / 1e12
            return ceilings.measured_matmul(precision, size, tflops, timing.n)
        return None

    # ----------------------------------------------------------------------- groups

    def _release_group(self) -> None:
        self._group = None
        if self.backend == "cuda" and self.torch is not None:
            self.torch.cuda.empty_cache()

    def _group_for(self, spec: dict[str, Any]) -> Group:
        key = _group_key(spec)
        if self._group is not None and self._group.key == key:
            return self._group
        self._release_group()
        group = Group(key)
        self._group = group
        op, dtype, shape = spec["op"], spec["dtype"], tuple(spec["shape"])
        device = "cuda" if self.backend == "cuda" else "cpu"
        need = ops.memory_needed_bytes(op, shape, dtype)
        spare: float | None = None
        if self.backend == "cuda":
            free = self._free_bytes()
            if need > MEMORY_FRACTION * free:
                group.skip_reason = oom_reason(op, shape, need, free)
                return group
            spare = (MEMORY_FRACTION * free - need) / 2
        sets = self._rotation_sets(op, shape, dtype, spare)
        torch = self.torch
        seed = int(self.settings.get("seed", 0)) + self._groups_made
        self._groups_made += 1
        gen = torch.Generator(device=device).manual_seed(seed)
        try:
            group.inputs = ops.make_inputs(op, shape, dtype, device, gen)
            group.out = ops.make_output(op, shape, dtype, device)
        except self.oom:
            group.inputs, group.out = {}, None
            self._release_group()
            self._group = group
            group.skip_reason = oom_reason(op, shape, need, self._free_bytes() if self.backend == "cuda" else 0)
            return group
        try:
            # Rotating buffers: fresh random data for every set from the group's generator (never
            # copies of the first set), drawn here, outside every timed region.
            for _ in range(sets - 1):
                group.extra_sets.append((ops.make_inputs(op, shape, dtype, device, gen),
                                         ops.make_output(op, shape, dtype, device)))
        except self.oom:
            group.extra_sets = []
            self._after_failure()
            self.note(f"{op} {dtype} {ops.describe_size(shape)}: no memory for {sets} rotating buffer sets; "
                      f"timed on one set (may be served partly from L2)")
        return group

    def _rotation_sets(self, op: str, shape: tuple[int, ...], dtype: str, spare_bytes: float | None) -> int:
        """Sets of inputs and outputs for a group (flags.rotation_sets; 1 unless the CUDA set-up
        turned ``cold_l2`` on), with a note when free memory alone stops a case from being kept cold."""
        if not self.cold_l2 or self.device is None:
            return 1
        ws = ops.working_set_bytes(op, shape, dtype)
        kw = {"memory_bound": op in ops.MEMORY_BOUND, "enabled": self.cold_l2}
        sets = flags.rotation_sets(ws, self.device.l2_bytes, spare_bytes=spare_bytes, **kw)
        wanted = flags.rotation_sets(ws, self.device.l2_bytes, **kw)
        if wanted > sets:
            self.note(f"{op} {dtype} {ops.describe_size(shape)}: {wanted} rotating buffer sets of "
                      f"{ws / (1 << 20):.1f} MiB do not fit in free memory; timed on one set (may be served "
                      f"partly from L2)")
        return sets

    def _emit_skip(self, spec: dict[str, Any], reason: str) -> None:
        self.emit({"event": "skip", "skip": self._skip(spec, reason)})

    def _after_failure(self) -> None:
        if self.backend == "cuda":
            with contextlib.suppress(Exception):
                self.torch.cuda.synchronize()
            with contextlib.suppress(Exception):
                self.torch.cuda.empty_cache()

    # ----------------------------------------------------------------------- one group of cases

    def _run_group(self, first: int, total: int, specs: list[dict[str, Any]]) -> None:
        """Measure the implementations of one group together and emit a result for each, in plan order.

        Each is built, compiled, checked, warmed up and its graph captured on its own (a failure
        or OOM there ends only that implementation); then all are sampled interleaved (GPU time
        and launch time together, in one window) under one NVML monitor, so drift of clocks and
        power reaches them alike.
        """
        group = self._group_for(specs[0])
        op, precision = specs[0]["op"], specs[0]["precision"]
        results: list[Case | Skip | _Prepared] = []
        switch = ops.tf32_matmul(precision) if op == "matmul" else contextlib.nullcontext()
        with switch:
            for j, spec in enumerate(specs):
                self.emit({"event": "case_start", "i": first + j, "n": total, "label": protocol.case_label(spec)})
                if group.skip_reason:
                    results.append(self._skip(spec, group.skip_reason))
                else:
                    results.append(self._guarded(spec, lambda s=spec: self._prepare(s, group)))
            ready = [r for r in results if isinstance(r, _Prepared)]
            summary = MonitorSummary(samples=0)
            if ready:
                with _SafeMonitor(self._monitor_factory if self.backend == "cuda" else None) as monitor:
                    self._sample(ready)
                summary = monitor.summary()
            for r in results:
                if isinstance(r, _Prepared):
                    r = self._guarded(r.spec, lambda p=r: self._case(p, group, summary))
                if isinstance(r, Skip):
                    self.emit({"event": "skip", "skip": r})
                    continue
                assert isinstance(r, Case)
                if r.impl == "torch" and r.status != "error":
                    group.torch_time = r.best_time
                self.emit({"event": "case", "case": r})

    def _skip(self, spec: dict[str, Any], reason: str) -> Skip:
        return Skip(spec["op"], spec["impl"], spec["dtype"], tuple(spec["shape"]), reason, precision=spec["precision"])

    def _guarded(self, spec: dict[str, Any], step: Callable[[], Case | _Prepared]) -> Case | Skip | _Prepared:
        """``step()``, with out-of-memory turned into a Skip and any other exception into an error Case."""
        try:
            return step()
        except self.oom:
            free = self._free_bytes() if self.backend == "cuda" else 0
            self._after_failure()
            return self._oom_skip(spec, free)
        except Exception as e:  # noqa: BLE001 - one case's failure is that case's result, never the run's end
            print(f"envcheck worker: {protocol.case_label(spec)} failed:", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
            self._after_failure()
            return self.error_case(spec, one_line(e))

    def _oom_skip(self, spec: dict[str, Any], free: int) -> Skip:
        op, shape = spec["op"], tuple(spec["shape"])
        return self._skip(spec, oom_reason(op, shape, ops.memory_needed_bytes(op, shape, spec["dtype"]), free))

    def _base(self, spec: dict[str, Any]) -> dict[str, Any]:
        op, dtype, precision, shape = spec["op"], spec["dtype"], spec["precision"], tuple(spec["shape"])
        t = ops.traffic(op, shape, dtype)
        l2 = self.device.l2_bytes if self.device else None
        return {"op": op, "impl": spec["impl"], "dtype": dtype, "precision": precision, "shape": shape,
                "category": flags.category(ops.working_set_bytes(op, shape, dtype), l2),
                "bytes": t.bytes, "flops": t.flops, "tf32": op == "matmul" and precision == "tf32"}

    def error_case(self, spec: dict[str, Any], message: str, compile_s: float | None = None) -> Case:
        return Case(**self._base(spec), status="error", message=message, compile_s=compile_s)

    def _impls(self, spec: dict[str, Any], group: Group) -> list[Callable[[], Any]]:
        """The implementation bound to each set of the group, the checked (first) set first."""
        op, impl = spec["op"], spec["impl"]
        sets = [(group.inputs, group.out), *group.extra_sets]
        if impl == "torch":
            return [ops.torch_impl(op, inputs, out) for inputs, out in sets]
        if impl == "triton":
            return [ops.triton_impl(op, inputs, out, spec["precision"]) for inputs, out in sets]
        if len(sets) == 1:
            return [ops.compile_impl(op, group.inputs)]
        return _compiled_on_sets(self.torch, op, [inputs for inputs, _ in sets])

    def _prepare(self, spec: dict[str, Any], group: Group) -> Case | _Prepared:
        """Steps 1-3 and the graph capture of one implementation (exceptions: see ``_guarded``)."""
        assert self.timer is not None and self.device is not None
        op, impl, dtype, precision = spec["op"], spec["impl"], spec["dtype"], spec["precision"]
        shape = tuple(spec["shape"])
        timer = self.timer
        try:
            fns = self._impls(spec, group)
            fn = fns[0]
            first_s = timer.first_call_s(fn)
        except self.oom:
            raise
        except Exception as e:  # noqa: BLE001 - a compile or launch failure of this implementation
            print(f"envcheck worker: {protocol.case_label(spec)}: first call failed:", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
            self._after_failure()
            what = "torch.compile failed" if impl == "compile" else "first call failed"
            return self.error_case(spec, f"{what}: {one_line(e)}")

        # The checked call: NaN everywhere first, so elements the implementation never writes show.
        accuracy.poison(group.out)
        result = fn()
        timer.clock.synchronize()
        tol = accuracy.tolerance(op, dtype, precision, ops.accumulation_length(op, shape))
        check = accuracy.compare(result, ops.reference_chunks(op, group.inputs), precision, tol)
        del result

        # From here on (warm-up, graph, eager calls) the implementation cycles through the sets.
        run = Rotation(fns) if len(fns) > 1 else fn
        timer.warmup(run)
        prepared = _Prepared(spec, run, first_s if impl != "torch" else None, check, message=check.message,
                             cold=len(fns) > 1,
                             kernel=ops.triton_kernel(op, shape, dtype, precision) if impl == "triton" else None)
        if self.backend == "cuda":
            try:
                prepared.graph = graph_region(timer, run, len(fns))
            except self.oom:
                raise
            except Exception as e:  # noqa: BLE001 - e.g. an op that cannot be captured: launch time still stands
                print(f"envcheck worker: {protocol.case_label(spec)}: CUDA graph capture failed:", file=sys.stderr)
                traceback.print_exc(file=sys.stderr)
                self._after_failure()
                prepared.message = prepared.message or f"no GPU time: CUDA graph capture failed ({one_line(e)})"
        return prepared

    def _sample(self, ready: list[_Prepared]) -> None:
        """Steps 4 and 5 in ONE interleaved window: every implementation's graph (GPU time) and
        eager batches (launch time) take their samples in turns over the same stretch of time.

        Sampled in two windows (all graphs, then all eager batches), a power-capped GPU drifting
        between them gave launch times shorter than the GPU time of the same call (H200, matmul
        fp16 8192: GPU 1.89 ms, launch 1.73 ms). Each region keeps its own sample count and
        calls per sample; a failure falls on its own implementation only. The graphs are freed after.
        """
        assert self.timer is not None
        timer = self.timer
        method = "cuda_events" if self.backend == "cuda" else "host_clock"
        regions: list[Region] = []
        owners: list[tuple[_Prepared, str]] = []  # (implementation, "gpu" | "launch") per region
        for r in ready:
            if r.failure is not None:
                continue
            # The eager batch is sized from the per-call GPU time (graph estimate) where there is a
            # graph, as before: it only sets the batch length, not any reported number.
            single: float | None = None
            if r.graph is not None:
                try:
                    single = timer.estimate_us(r.graph.run) / max(1, r.graph.calls_per_sample)
                except Exception:  # noqa: BLE001 - the graph's own sampling reports this failure
                    single = None
            try:
                if single is None:
                    single = timer.estimate_us(r.fn)
            except Exception as e:  # noqa: BLE001 - becomes this case's error (or skip) in _case
                r.failure = e
                r.graph = None
                continue
            if r.graph is not None:
                regions.append(r.graph)
                owners.append((r, "gpu"))
            batch = calls_per_sample(single, target_us=LAUNCH_TARGET_US, cap=MAX_LAUNCH_BATCH)
            regions.append(Region(_repeat(r.fn, batch), method, batch))
            owners.append((r, "launch"))
        results = timer.measure_interleaved(regions) if regions else []
        failed = False
        for (r, kind), got in zip(owners, results, strict=True):
            if kind == "gpu":
                if isinstance(got, Timing):
                    r.gpu = got
                elif isinstance(got, self.oom):
                    r.failure = r.failure or got
                    failed = True
                else:
                    print(f"envcheck worker: {protocol.case_label(r.spec)}: CUDA graph replay failed: {got!r}",
                          file=sys.stderr)
                    r.message = r.message or f"no GPU time: CUDA graph replay failed ({one_line(got)})"
                    failed = True
            elif isinstance(got, Timing):
                r.launch = got
            else:
                r.failure = r.failure or got
                failed = True
        for r in ready:
            r.graph = None
        if failed:
            self._after_failure()

    def _case(self, r: _Prepared, group: Group, summary: MonitorSummary) -> Case:
        """The Case of one sampled implementation (its failure, if any, is raised for ``_guarded``)."""
        assert self.device is not None
        if r.failure is not None:
            raise r.failure
        assert r.launch is not None
        spec = r.spec
        op, precision = spec["op"], spec["precision"]
        base = self._base(spec)
        gpu, launch = r.gpu, r.launch
        quoted = gpu or launch
        seconds = quoted.median_us * 1e-6
        gbps = base["bytes"] / seconds / 1e9
        tflops = base["flops"] / seconds / 1e12
        if op in ops.MEMORY_BOUND:
            pct_t = ceilings.percent(gbps, self._ceiling("bandwidth", "theoretical"))
            pct_m = ceilings.percent(gbps, self._ceiling("bandwidth", "measured"))
        else:
            pct_t = ceilings.percent(tflops, self._ceiling(precision, "theoretical"))
            pct_m = ceilings.percent(tflops, self._ceiling(precision, "measured"))
        speedup = None
        if spec["impl"] != "torch" and group.torch_time is not None and group.torch_time.method == quoted.method:
            speedup = group.torch_time.median_us / quoted.median_us
        ws = ops.working_set_bytes(op, tuple(spec["shape"]), spec["dtype"])
        monitor = summary if self.backend == "cuda" else None
        return Case(
            **base,
            status="pass" if r.check.error.passed else "fail",
            gpu=gpu, launch=launch, compile_s=r.compile_s, error=r.check.error,
            monitor=monitor,
            flags=flags.case_flags(gpu=gpu, launch=launch, monitor=monitor, working_set_bytes=ws,
                                   l2_bytes=self.device.l2_bytes, cold=r.cold, backend=self.backend),
            message=r.message, gbps=gbps, tflops=tflops, pct_theoretical=pct_t, pct_measured=pct_m, speedup=speedup,
            kernel=r.kernel,
        )

    def _ceiling(self, name: str, kind: str) -> Ceiling | None:
        for c in self.ceilings:
            if c.name == name and c.kind == kind:
                return c
        return None


@dataclass
class _Prepared:
    """One implementation of a group: built, first-called, checked, warmed up; its timings land here."""

    spec: dict[str, Any]
    fn: Callable[[], Any]
    compile_s: float | None
    check: Any  # accuracy.Comparison
    message: str | None = None
    graph: Region | None = None  # the captured CUDA graph to replay, until the GPU time is taken
    cold: bool = False  # cycled through rotating buffers (GPU and launch time alike)
    kernel: str | None = None  # Case.kernel
    gpu: Timing | None = None
    launch: Timing | None = None
    failure: BaseException | None = None  # raised while sampling: the case's error, or skip if OOM


def _compiled_on_sets(torch: Any, op: str, sets: list[dict[str, Any]]) -> list[Callable[[], Any]]:
    """torch.compile of ``op`` (as ops.compile_impl does it) ONCE, bound to each set's inputs.

    One compiled function for all sets: the extra sets pass its guards (same shapes, dtypes,
    strides) and reuse its code. ops.compile_impl per set would reset Dynamo for each (the
    checked set's function would recompile, possibly inside a graph capture) and make every
    set a new compile; past Dynamo's cache_size_limit it would fall back to eager.
    """
    with contextlib.suppress(Exception):  # a private API: see ops.compile_impl
        torch._dynamo.reset()
    compiled = torch.compile(ops._eager(op), dynamic=False)
    # make_inputs builds each set's dict in the eager function's argument order (x, y / a, b / x).
    return [functools.partial(compiled, *inputs.values()) for inputs in sets]


def _repeat(fn: Callable[[], Any], calls: int) -> Callable[[], None]:
    def region() -> None:
        for _ in range(calls):
            fn()
    return region


def groups_in_order(cases: list[dict[str, Any]]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Runs of consecutive cases of one group (op, dtype, precision, shape), with the first's index."""
    start = 0
    while start < len(cases):
        key = _group_key(cases[start])
        end = start + 1
        while end < len(cases) and _group_key(cases[end]) == key:
            end += 1
        yield start, cases[start:end]
        start = end


def _group_key(spec: dict[str, Any]) -> tuple[Any, ...]:
    return (spec["op"], spec["dtype"], spec["precision"], tuple(spec["shape"]))


def ceilings_sizes(free_bytes: int, itemsize: int) -> Iterator[int]:
    """Square matmul sizes for the measured TFLOP/s ceiling that fit in free memory, largest first."""
    for size in MATMUL_CEILING_SIZES:
        if 3 * size * size * itemsize < 0.5 * free_bytes:
            yield size


def oom_reason(op: str, shape: tuple[int, ...], need: int, free: int) -> str:
    return (f"out of memory at {ops.describe_size(shape)}: needs {need / GIB:.1f} GiB, "
            f"{free / GIB:.1f} GiB free")


def _protocol_stream() -> TextIO:
    """The real stdout, kept for events; anything else written to fd 1 goes to stderr.

    Compilers, Triton's autotuner and CUDA libraries may print to stdout (from C as well as
    Python); one stray line in the event stream would be a protocol error in the parent.
    """
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", encoding="utf-8", buffering=1)


def main() -> int:
    stream = _protocol_stream()

    def emit(event: dict[str, Any]) -> None:
        stream.write(protocol.encode(event))
        stream.flush()

    try:
        plan = protocol.validate_plan(protocol.decode_plan(sys.stdin.read()))
    except protocol.ProtocolError as e:
        print(f"envcheck worker: bad plan: {e}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        Worker(plan, emit).run()
    except Exception as e:  # noqa: BLE001 - the parent gets one line; the traceback goes to stderr
        traceback.print_exc(file=sys.stderr)
        with contextlib.suppress(Exception):
            emit({"event": "note", "text": f"benchmark worker failed: {one_line(e)}"})
        return 1
    print(f"envcheck worker: finished in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
