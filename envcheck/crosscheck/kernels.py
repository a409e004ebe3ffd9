"""The single-GPU cross-check: each GPU's headline cases (per op, dtype and precision the largest shape PyTorch has
a GPU time for, each of ``IMPLS`` there) timed by ``do_bench_cudagraph`` in a worker per GPU, the GPUs at once."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.bench.timer import SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS
from envcheck.crosscheck import good_samples
from envcheck.harness.failures import to_launch
from envcheck.harness.signals import each
from envcheck.harness.spawn import spawn
from envcheck.model import Bench, Case
from envcheck.model.crosscheck import KernelTiming, ToolRun
from envcheck.model.node import Launch

if TYPE_CHECKING:
    from envcheck.outside_json import Json

WORKER_COMMAND = ("envcheck.crosscheck.kernel_worker:main",)  # the target, then folders for its sys.path
ARGV = ("python", "-m", "envcheck.crosscheck.kernel_worker")  # the run as the report names it
ROUNDS = 3
# do_bench_cudagraph's ``rep`` (a graph of calls this long, replayed ten times a round): a tenth of the window a
# case is sampled over (a graph of a whole window would time the graph, not the kernel).
REP_MS = 30.0
SUSTAIN_REP_MS = SUSTAIN_WINDOW_MS / 10
SETTLE_MS = 300.0  # untimed before the rounds, for a memory-bound case (the timer's for a compute-bound one)
START_S = 300.0  # the worker's start: a loaded node has taken a minute to import torch and open the device
ROW_S = 60.0  # each row: Triton's first call (compile, the matmul's race), the settling and the rounds
IMPLS = ("torch", "triton")


def _size(bench: Bench, c: Case) -> int:
    spec = bench.spec(c.op)
    t = spec.traffic(c.shape, c.dtype)
    return t.flops if spec.compute_bound else t.bytes


def headlines(bench: Bench) -> tuple[Case, ...]:
    """``bench``'s headline cases, in the suite's order (a CUDA bench; none on the CPU)."""
    if bench.device.backend != "cuda":
        return ()
    timed = [c for c in bench.cases if c.impl in IMPLS and c.failure is None and c.gpu is not None]
    best: dict[tuple[str, str, str], Case] = {}
    for c in timed:
        key = (c.op, c.dtype, c.precision)
        if c.impl == "torch" and (key not in best or _size(bench, c) > _size(bench, best[key])):
            best[key] = c
    return tuple(c for c in timed if (head := best.get((c.op, c.dtype, c.precision))) is not None and c.shape == head.shape)


@dataclass(frozen=True)
class GpuPlan:
    """One GPU's worker: its headline cases and the plan sent on its stdin."""

    gpu: int
    heads: tuple[Case, ...]
    plan: dict[str, Json]

    @property
    def timeout_s(self) -> float:
        return START_S + ROW_S * len(self.heads)


def plan_gpu(bench: Bench, seed: int = 0, cuda_index: int | None = None) -> GpuPlan | None:
    """The worker's plan for ``bench``'s GPU (``cuda_index``: its CUDA index in this process where that differs);
    None for a bench without headline cases."""
    heads = headlines(bench)
    if not heads or bench.device.index is None:
        return None
    rows = [{"op": c.op, "impl": c.impl, "dtype": c.dtype, "precision": c.precision, "shape": list(c.shape),
             "rep_ms": SUSTAIN_REP_MS if sustain else REP_MS, "settle_ms": SUSTAIN_SETTLE_MS if sustain else SETTLE_MS,
             "sets": c.rotation_sets, "kernel": c.kernel} for c in heads
            for sustain in (bench.spec(c.op).compute_bound,)]
    plan = {"gpu": bench.device.index if cuda_index is None else cuda_index, "rounds": ROUNDS, "seed": seed,
            "control": bench.settings.control, "rows": rows}
    return GpuPlan(bench.device.index, heads, plan)


def run_one(plan: dict[str, Json], timeout: float, command: Sequence[str] = WORKER_COMMAND,
            stop: threading.Event | None = None) -> tuple[list[dict[str, Json]], Launch]:
    """One worker on ``plan``: the events it sent (redacted) and how its run ended."""
    events: list[Json] = []
    out = spawn(command[0], plan, timeout=timeout, on_event=events.append, stop=stop, paths=command[1:])
    return [e for e in events if isinstance(e, dict)], to_launch(out, ARGV, timeout)


def assemble(p: GpuPlan, events: list[dict[str, Json]], launch: Launch) -> tuple[tuple[KernelTiming, ...], ToolRun]:
    """``KernelTiming`` rows of one GPU from its worker's events (a row it never reported is ``not_run``)."""
    by_row = {int(e["i"]): e for e in events if e.get("event") == "row" and isinstance(e.get("i"), int)}
    rows = []
    for i, (c, row) in enumerate(zip(p.heads, p.plan["rows"], strict=True)):
        ev = by_row.get(i)
        if ev is None:
            rows.append(KernelTiming(p.gpu, c.op, c.impl, c.dtype, c.precision, c.shape, skipped="not_run"))
            continue
        samples = good_samples(ev.get("samples_us"))
        rows.append(KernelTiming(p.gpu, c.op, c.impl, c.dtype, c.precision, c.shape, samples,  # type: ignore[arg-type]
                                 p.plan["rounds"], row["rep_ms"], row["settle_ms"],  # type: ignore[arg-type]
                                 None if samples is not None else str(ev.get("error") or "no samples"),
                                 sets=row["sets"], kernel=ev["kernel"][:100] if isinstance(ev.get("kernel"), str) else None))
    return tuple(rows), ToolRun("do_bench_cudagraph", launch, p.gpu)


@dataclass(frozen=True)
class KernelChecks:
    """What the workers reported, how each ended, and whether Ctrl-C, SIGTERM or SIGHUP stopped them."""

    rows: tuple[KernelTiming, ...] = ()
    runs: tuple[ToolRun, ...] = ()
    stopped: bool = False


def run_kernels(benches: Sequence[Bench], command: Sequence[str] | None = None,
                cuda_indices: Mapping[int, int] | None = None) -> KernelChecks:
    """Every GPU bench's headline cases timed by its own worker, the workers at once (``cuda_indices``: machine
    index -> CUDA index, where they differ); a stop signal keeps what they reported."""
    plans = [p for b in benches if (p := plan_gpu(b, cuda_index=(cuda_indices or {}).get(b.device.index or 0)))
             is not None]
    results, stopped = each(plans, lambda p, stop: assemble(p, *run_one(p.plan, p.timeout_s,
                                                                         command or WORKER_COMMAND, stop)))
    rows: list[KernelTiming] = []
    runs: list[ToolRun] = []
    for p, got in zip(plans, results, strict=True):
        if got is None:  # never started
            rows += [KernelTiming(p.gpu, c.op, c.impl, c.dtype, c.precision, c.shape, skipped="not_run")
                     for c in p.heads]
        else:
            rows += got[0]
            runs.append(got[1])
    return KernelChecks(tuple(rows), tuple(runs), stopped is not None)
