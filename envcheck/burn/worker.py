"""The isolated burn worker (``main``; its contract: protocol.py): on one GPU (or the CPU), telemetry throughout, the
phases in order in intervals of about ``plan.interval_s``: the checked GEMM, streaming copies, the memory test."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.burn import gemm as gemm_mod
from envcheck.burn import memtest, protocol
from envcheck.burn.telemetry import Sampler
from envcheck.model import BenchDevice, Note
from envcheck.model.burn import SLOW_GEMM_EVERY, BitErrorRange, MemtestRecord
from envcheck.probes.nvml import NvmlLike

if TYPE_CHECKING:
    from torch import Tensor
    from torch.cuda import Event

Emit = Callable[[protocol.Event], None]
Corrupt = Callable[[int, "Tensor"], None]  # (iteration, output): the tests' planted fault
Read = Callable[["Tensor"], "Tensor"]
CPU_BYTES = 16 << 20  # the CPU backend's memory when the plan gives no max_bytes
FLIP_AT = 5  # the iteration whose output the ``flip_bit`` control corrupts


def flip_once(iteration: int, out: Tensor) -> None:
    """The ``flip_bit`` control: the lowest bit of the first element of one output, once."""
    if iteration == FLIP_AT:
        import torch

        gemm_mod.bits_view(torch, out).view(-1)[0] ^= 1


class Laps:
    """Device time between ``begin()`` and ``end()``, summed over the laps when the interval ends: the GEMM's calls
    alone (the checksums between them are not its work), or a whole interval of copies as one lap."""

    def __init__(self, torch: ModuleType, cuda: bool) -> None:
        self.torch = torch
        self.cuda = cuda
        self._laps: list[tuple[Event | float, Event | float]] = []
        self._start: Event | float = 0.0

    def _mark(self) -> Event | float:
        if not self.cuda:
            return time.perf_counter()
        e = self.torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def begin(self) -> None:
        self._start = self._mark()

    def end(self) -> None:
        self._laps.append((self._start, self._mark()))

    def total(self) -> float:
        """Seconds of every call since the last total (synchronises)."""
        if self.cuda and self._laps:
            self._laps[-1][1].synchronize()
        laps, self._laps = self._laps, []
        took = sum(float(a.elapsed_time(b)) for a, b in laps) / 1e3 if self.cuda else sum(b - a for a, b in laps)
        return max(took, 1e-9)


def next_count(count: int, took_s: float, target_s: float) -> int:
    """Iterations for the next interval so it lasts about ``target_s`` (never more than 4x the last): the
    phase's time left caps it, so a phase ends near its planned time."""
    if took_s <= 0:
        return count * 2
    return max(1, min(count * 4, int(count * max(target_s, 0.0) / took_s)))


class BurnWorker:
    """Runs one plan. ``corrupt`` (a GEMM output after each iteration) and ``read`` (the memory test's read-back)
    are the fault seams of tests."""

    def __init__(self, plan: protocol.BurnPlan, emit: Emit, *, corrupt: Corrupt | None = None, read: Read | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.plan = plan
        self.emit = emit
        self.corrupt = corrupt
        self.read = read or (lambda t: t)
        self.clock = clock
        self.t0 = clock()
        self.torch: ModuleType = None  # type: ignore[assignment]  # imported by run()
        self.cuda = plan.backend == "cuda"
        self.device: object = "cpu"

    def now(self) -> float:
        return self.clock() - self.t0

    def run(self) -> None:
        import torch

        self.torch = torch
        plan = self.plan
        nvml: NvmlLike | None = None
        sampler: Sampler | None = None
        if self.cuda:
            from envcheck.bench import device

            reason = device.cuda_unusable(torch, plan.index)
            if reason:
                self.emit(protocol.Started(BenchDevice("cuda", f"CUDA device {plan.index}", plan.index)))
                self.emit(protocol.Noted(reason))
                return
            torch.cuda.set_device(plan.index)
            self.device = torch.device("cuda", plan.index)
            nvml, _ = device.open_nvml()
            dev = device.cuda_device(torch, plan.index, nvml)
            if nvml is None:
                self.emit(protocol.Noted(Note("burn.no_telemetry")))
            else:
                from envcheck.bench.monitor import _handle_call

                with contextlib.suppress(Exception):  # NVML ignores CUDA_VISIBLE_DEVICES: the UUID names the same GPU
                    handle = nvml.call(*_handle_call(dev.uuid or dev.pci_bus_id or plan.index))
                    sampler = Sampler(nvml, handle, lambda s: self.emit(protocol.Sampled(s)), self.t0,
                                      plan.telemetry_interval_s, self.clock)
        else:
            from envcheck.bench.device import cpu_name

            dev = BenchDevice("cpu", cpu_name())
        torch.use_deterministic_algorithms(True, warn_only=True)
        self.emit(protocol.Started(dev))
        if sampler is not None:
            sampler.start()
        try:
            for seconds, phase in ((plan.gemm_s, self.gemm_phase), (plan.bandwidth_s, self.bandwidth_phase),
                                   (plan.memtest_s, self.memtest_phase)):
                if seconds > 0:
                    phase()
        finally:
            if sampler is not None:
                sampler.stop()
            if nvml is not None:
                with contextlib.suppress(Exception):
                    nvml.shutdown()

    def _free_bytes(self) -> int:
        if self.cuda:
            self.torch.cuda.empty_cache()
            free = int(self.torch.cuda.mem_get_info(self.plan.index)[0])
        else:
            free = CPU_BYTES
        return min(free, self.plan.max_bytes) if self.plan.max_bytes else free

    def gemm_phase(self) -> None:
        torch, plan = self.torch, self.plan
        dtype = plan.dtype or gemm_mod.best_dtype(torch, self.cuda, plan.allow_fp8)
        n = plan.gemm_n
        k = gemm_mod.gemm_k(dtype, n)
        g = gemm_mod.Gemm.make(torch, dtype, n, k, self.device, plan.seed)
        start = self.now()
        self.emit(protocol.PhaseStarted("gemm", dtype, (n, n, k), "flop", start, plan.gemm_s))
        checker = gemm_mod.SdcChecker(torch, g, plan.seed)
        out = g()
        if self.corrupt is not None:
            self.corrupt(0, out)
        checker.first(out)
        checker.fp64(out, 0, self.now())
        checker.iterations = 1
        laps = Laps(torch, self.cuda)
        corrupt = self.corrupt or (flip_once if plan.control == "flip_bit" else None)
        slow = plan.control == "slow_gemm"
        count = 1
        while self.now() - start < plan.gemm_s:
            sums = torch.empty(count, dtype=torch.int64, device=self.device)
            first = checker.iterations
            for j in range(count):
                laps.begin()
                if slow and (first + j) % SLOW_GEMM_EVERY == 0:
                    g()  # the control's uncounted call: timed, never counted
                out = g()
                laps.end()
                if corrupt is not None:
                    corrupt(first + j, out)
                sums[j] = checker.checksum(out)
            dt = laps.total()
            t = self.now()
            checker.iterations += count
            checker.check_sums(sums, first, t)
            checker.full(out, first + count - 1, t)
            checker.fp64(out, first + count - 1, t)
            self.emit(protocol.IntervalDone("gemm", t, dt, float(g.flop * count), count))
            count = next_count(count, dt, min(plan.interval_s, start + plan.gemm_s - t))
        self.emit(protocol.PhaseEnded("gemm", sdc=checker.record()))
        del g, out, checker

    def bandwidth_phase(self) -> None:
        torch, plan = self.torch, self.plan
        half = int(self._free_bytes() * plan.stream_fraction) // 2 // 4 * 4
        src = torch.ones(half // 4, dtype=torch.float32, device=self.device)
        dst = torch.empty_like(src)
        start = self.now()
        self.emit(protocol.PhaseStarted("bandwidth", "fp32", (half * 2,), "byte", start, plan.bandwidth_s))
        laps = Laps(torch, self.cuda)
        count = 1
        while self.now() - start < plan.bandwidth_s:
            laps.begin()
            for _ in range(count):
                dst.copy_(src)
                src, dst = dst, src
            laps.end()
            dt = laps.total()
            t = self.now()  # each copy reads one half and writes the other
            self.emit(protocol.IntervalDone("bandwidth", t, dt, float(2 * half * count), count))
            count = next_count(count, dt, min(plan.interval_s, start + plan.bandwidth_s - t))
        self.emit(protocol.PhaseEnded("bandwidth"))
        del src, dst

    def memtest_phase(self) -> None:
        torch, plan = self.torch, self.plan
        free = self._free_bytes()
        words = max(1, int(free * plan.memory_fraction) // memtest.WORD_BYTES)
        buf = torch.empty(words, dtype=torch.int32, device=self.device)
        start = self.now()
        covered = words * memtest.WORD_BYTES
        self.emit(protocol.PhaseStarted("memtest", "int32", (covered,), "byte", start, plan.memtest_s))
        writes = [w for name in memtest.PATTERNS for w in memtest.sub_patterns(name)]
        laps = Laps(torch, self.cuda)
        ranges: list[BitErrorRange] = []
        bits = passes = 0
        done = False
        while not done:
            for j, (name, arg) in enumerate(writes):
                laps.begin()
                found = memtest.check_pattern(torch, buf, name, arg, plan.seed, passes, self.read,
                                              budget=memtest.MAX_RANGES - len(ranges))
                laps.end()
                dt = laps.total()
                ranges += found.ranges
                bits += found.bits
                self.emit(protocol.IntervalDone("memtest", self.now(), dt, float(2 * covered), 1))
                if self.now() - start >= plan.memtest_s and (passes or j == len(writes) - 1):
                    done = True
                    passes += j == len(writes) - 1
                    break
            else:
                passes += 1
                done = self.now() - start >= plan.memtest_s
        record = MemtestRecord(covered, free, memtest.PATTERNS, passes, self.now() - start,
                               tuple(ranges), bits)
        self.emit(protocol.PhaseEnded("memtest", memtest=record))
        del buf


def main(args: object, out: Callable[[dict[str, object]], None]) -> None:
    """The harness's target: the plan in, events out (from the load and the telemetry thread alike)."""
    # Before cuBLAS starts: a fixed workspace makes its GEMMs deterministic (cuBLAS docs, "Results reproducibility").
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    BurnWorker(protocol.decode_plan(args), lambda ev: out(protocol.encode(ev))).run()
