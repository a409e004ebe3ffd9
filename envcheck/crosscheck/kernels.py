"""The single-GPU cross-check: each GPU's headline cases (``headline.py``) timed again, after the suite, by
``triton.testing.do_bench_cudagraph`` in an isolated worker (``kernel_worker.py``) per GPU, the GPUs at once
as their suites ran. What each worker reported becomes ``KernelTiming`` rows, and how it ended a ``ToolRun``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.bench.timer import SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS
from envcheck.crosscheck.headline import Headline, headlines
from envcheck.crosscheck.isolated import Isolated, run_isolated
from envcheck.crosscheck.samples import good_samples
from envcheck.model import Bench
from envcheck.model.crosscheck import KernelTiming, ToolRun

WORKER_MODULE = "envcheck.crosscheck.kernel_worker"
ROUNDS = 3
# do_bench_cudagraph's ``rep``: a graph of calls lasting about this long, replayed ten times a round. A
# memory-bound case gets verify_timer.py's tenth of a 300 ms window (a graph sized to the whole window would
# hold 100,000 calls of a 3 us kernel and time the graph, not the kernel), a compute-bound one the tenth of
# envcheck's sustained window, which its timer samples such a case over (bench/timer.py).
REP_MS = 30.0
SUSTAIN_REP_MS = SUSTAIN_WINDOW_MS / 10
# Untimed, before the rounds: the GPU's clocks settle (verify_timer.py's SETTLE_MS; the timer's for a
# compute-bound case).
SETTLE_MS = 300.0
START_S = 300.0  # the worker's start: a loaded node has taken a minute to import torch and open the device
ROW_S = 60.0  # each row: Triton's first call (compile, the matmul's race), the settling and the rounds


@dataclass(frozen=True)
class GpuPlan:
    """One GPU's worker: its headline cases and the plan sent on its stdin."""

    gpu: int
    heads: tuple[Headline, ...]
    plan: dict[str, Any]

    @property
    def timeout_s(self) -> float:
        return START_S + ROW_S * len(self.heads)


def plan_gpu(bench: Bench, seed: int = 0, cuda_index: int | None = None) -> GpuPlan | None:
    """The worker's plan for ``bench``'s GPU (``cuda_index``: its CUDA index in this process where that is not its
    machine index, as under a fleet launcher's CUDA_VISIBLE_DEVICES); None for a bench without headline cases
    (the CPU, nothing timed)."""
    heads = headlines(bench)
    if not heads or bench.device.index is None:
        return None
    # Each row as the suite ran it: its sets of buffers (L2 cold alike) and its matmul race's winner.
    rows = [{"op": c.op, "impl": c.impl, "dtype": c.dtype, "precision": c.precision, "shape": list(c.shape),
             "rep_ms": SUSTAIN_REP_MS if h.compute_bound else REP_MS,
             "settle_ms": SUSTAIN_SETTLE_MS if h.compute_bound else SETTLE_MS, "sets": c.rotation_sets,
             "kernel": c.kernel} for c, h in ((h.case, h) for h in heads)]
    plan = {"gpu": bench.device.index if cuda_index is None else cuda_index, "rounds": ROUNDS, "seed": seed, "control": bench.settings.control,
            "rows": rows}
    return GpuPlan(bench.device.index, heads, plan)


def assemble(p: GpuPlan, got: Isolated) -> tuple[tuple[KernelTiming, ...], ToolRun]:
    """``KernelTiming`` rows of one GPU from its worker's events (a row it never reported is ``not_run``)."""
    by_row = {int(e["i"]): e for e in got.events if e.get("event") == "row" and isinstance(e.get("i"), int)}
    rows = []
    for i, (h, row) in enumerate(zip(p.heads, p.plan["rows"], strict=True)):
        c, ev = h.case, by_row.get(i)
        base = {"gpu": p.gpu, "op": c.op, "impl": c.impl, "dtype": c.dtype, "precision": c.precision,
                "shape": c.shape}
        kernel = ev["kernel"][:100] if ev is not None and isinstance(ev.get("kernel"), str) else None
        timing = {"rounds": p.plan["rounds"], "rep_ms": row["rep_ms"], "settle_ms": row["settle_ms"],
                  "sets": row["sets"], "kernel": kernel}
        samples = good_samples(ev.get("samples_us")) if ev is not None else None
        if ev is None:
            rows.append(KernelTiming(**base, skipped="not_run"))
        elif samples is not None:
            rows.append(KernelTiming(**base, samples_us=samples, **timing))  # type: ignore[arg-type]
        else:
            rows.append(KernelTiming(**base, error=str(ev.get("error") or "no samples"), **timing))  # type: ignore[arg-type]
    error = next((str(e.get("text")) for e in got.events if e.get("event") == "error"), None)
    launch = got.launch
    assert launch is not None
    if error is not None and not launch.stderr_tail:
        from dataclasses import replace

        launch = replace(launch, stderr_tail=error)
    return tuple(rows), ToolRun("do_bench_cudagraph", launch, p.gpu)


Runner = Callable[..., Isolated]


@dataclass(frozen=True)
class KernelChecks:
    """What the workers reported, how each ended, and whether Ctrl-C, SIGTERM or SIGHUP stopped them."""

    rows: tuple[KernelTiming, ...] = ()
    runs: tuple[ToolRun, ...] = ()
    stopped: bool = False


def run_kernels(benches: Sequence[Bench], command: Sequence[str] | None = None, runner: Runner = run_isolated,
                cuda_indices: Mapping[int, int] | None = None) -> KernelChecks:
    """Every GPU bench's headline cases timed by its own worker, the workers at once (``cuda_indices``: machine
    index -> CUDA index, where they differ). Ctrl-C, SIGTERM or SIGHUP (``runner.wait_for``, in the main thread)
    stops them all and keeps what they reported."""
    from envcheck.bench.runner import wait_for

    argv = list(command) if command is not None else [sys.executable, "-m", WORKER_MODULE]
    plans = [p for b in benches if (p := plan_gpu(b, cuda_index=(cuda_indices or {}).get(b.device.index or 0)))
             is not None]
    results: dict[int, Isolated] = {}
    stop = threading.Event()

    def one(p: GpuPlan) -> None:
        results[p.gpu] = runner(argv, p.plan, p.timeout_s, stop=stop)

    threads = [threading.Thread(target=one, args=(p,), daemon=True) for p in plans]
    for t in threads:
        t.start()
    stopped = wait_for(threads, stop.set)
    rows: list[KernelTiming] = []
    runs: list[ToolRun] = []
    for p in plans:
        got = results.get(p.gpu, Isolated())
        if got.launch is None:  # never started
            rows += [KernelTiming(p.gpu, h.case.op, h.case.impl, h.case.dtype, h.case.precision, h.case.shape,
                                  skipped="not_run") for h in p.heads]
            continue
        got_rows, run = assemble(p, got)
        rows += got_rows
        runs.append(run)
    return KernelChecks(tuple(rows), tuple(runs), stopped is not None)
