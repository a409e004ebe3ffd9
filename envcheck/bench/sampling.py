"""Sampling a prepared group: every implementation's GPU time and launch time in ONE window.

Every graph (GPU time: replays between CUDA events) and every eager batch (launch time:
back-to-back calls between CUDA events, divided by the batch) of the group take their samples
in turns over the same stretch of time (timer.measure_interleaved). Sampled in two windows
(all graphs, then all eager batches), a power-capped GPU drifting between them gave launch
times shorter than the GPU time of the same call (H200, matmul fp16 8192: GPU 1.89 ms, launch
1.73 ms). The CPU backend has launch time only, from host-clock batches.

Each region keeps its own sample count and calls per sample; a failure falls on its own
implementation only: a graph that fails to replay costs its case the GPU time (a note), an
eager batch that fails costs the case (its failure, or a skip when out of memory).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.bench.device import Runtime
from envcheck.bench.failure import log, one_line
from envcheck.bench.group import Prepared
from envcheck.bench.timer import Region, calls_per_sample
from envcheck.model import Case, Note, Timing


def _repeat(fn: Callable[[], Any], calls: int) -> Callable[[], None]:
    def region() -> None:
        for _ in range(calls):
            fn()
    return region


def sample(rt: Runtime, ready: list[Prepared]) -> None:
    """Take the GPU and launch times of ``ready``, interleaved; results land on each Prepared."""
    timer = rt.timer
    regions: list[Region] = []
    owners: list[tuple[Prepared, str]] = []  # (implementation, "gpu" | "launch") per region
    for p in ready:
        # The eager batch is sized from the per-call GPU time where there is a graph: it only
        # sets the batch length, not any reported number.
        single: float | None = None
        if p.graph is not None:
            try:
                single = timer.estimate_us(p.graph.run) / max(1, p.graph.calls_per_sample)
            except Exception:  # noqa: BLE001 - the graph's own sampling reports this failure
                single = None
        try:
            if single is None:
                single = timer.estimate_us(p.fn)
        except Exception as e:  # noqa: BLE001 - becomes this case's failure (or skip) in to_case
            p.failure, p.graph = e, None
            continue
        if p.graph is not None:
            regions.append(p.graph)
            owners.append((p, "gpu"))
        batch = calls_per_sample(single)
        regions.append(Region(_repeat(p.fn, batch), timer.eager_method, batch))
        owners.append((p, "launch"))
    results = timer.measure_interleaved(regions) if regions else []
    failed = False
    for (p, kind), got in zip(owners, results, strict=True):
        if isinstance(got, Timing):
            setattr(p, kind, got)
        elif kind == "gpu" and not isinstance(got, rt.oom):
            log(f"{p.planned.label}: CUDA graph replay failed: {got!r}")
            p.notes.append(Note("case.no_gpu_time", {"stage": "replay", "detail": one_line(got)}))
            failed = True
        else:
            p.failure = p.failure or got
            failed = True
    for p in ready:
        p.graph = None  # the graphs' memory goes with them
    if failed:
        rt.after_failure()


def to_case(p: Prepared, window: int | None) -> Case:
    """The Case of one sampled implementation (its failure, if any, is raised for failure.guarded)."""
    if p.failure is not None:
        raise p.failure
    assert p.launch is not None
    pc = p.planned
    return Case(pc.op, pc.impl, pc.dtype, pc.precision, pc.shape, gpu=p.gpu, launch=p.launch,
                compile_s=p.compile_s, accuracy=p.accuracy, window=window, rotation_sets=p.rotation_sets,
                kernel=p.kernel, notes=tuple(dict.fromkeys(p.notes)))
