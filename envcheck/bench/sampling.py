"""Sampling a prepared implementation: its GPU and launch times in turns in one window of its own, once the GPU
holds its state under it. A compute-bound one meeting the power or thermal limit (or any, without NVML) is timed
sustained, as is one within ``RECENT_MS`` of a sustained one (docs/measurement.md says why each rule).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

from envcheck.bench.device import Runtime
from envcheck.bench.group import Prepared, log
from envcheck.bench.interpret import checked_only
from envcheck.bench.timer import SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS, Region, calls_per_sample
from envcheck.errors import one_line
from envcheck.model import Case, Note, Timing
from envcheck.ops import lookup

POWER_PROBE_MS = 300.0  # past the 140-240 ms the limiter took to cut in from idle
RECENT_MS = 100.0
RECENT_SETTLE_MS = 100.0


def _repeat(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    def region() -> None:
        for _ in range(calls):
            fn()
    return region


def sustained(region: Region, replay_us: float, max_samples: int) -> Region:
    """``region`` (a replay of ``replay_us``) repeated so ``max_samples`` span ``SUSTAIN_WINDOW_MS``."""
    r = max(1, math.ceil(SUSTAIN_WINDOW_MS * 1e3 / (max_samples * max(replay_us, 1e-3))))
    return Region(_repeat(region.run, r), region.method, region.calls_per_sample * r,
                  window_ms=SUSTAIN_WINDOW_MS, spacer=region.run)


def sustains(rt: Runtime, op: str) -> bool:
    """Whether ``op`` may be timed sustained: a compute-bound op on a GPU."""
    return rt.cuda and lookup(op, rt.ops).compute_bound


def settle(rt: Runtime, p: Prepared) -> None:
    """Run one implementation until its GPU time holds (CUDA only), deciding ``p.sustained``."""
    if not rt.cuda:
        return
    region = p.graph.run if p.graph is not None else p.fn
    timer = rt.timer
    try:
        if not sustains(rt, p.planned.op):
            _settled(p, *timer.settle(region))
            return
        start = timer.clock.host_s()
        if rt.sustained_until is not None and (start - rt.sustained_until) * 1e3 <= RECENT_MS:
            p.sustained = True
            _settled(p, *timer.settle(region, min_ms=RECENT_SETTLE_MS))
            return
        if rt.limit_watch is None:
            p.sustained = True
            _settled(p, *timer.settle(region, min_ms=SUSTAIN_SETTLE_MS))
            return
        with rt.limit_watch() as watch:
            _settled(p, *timer.settle(region, min_ms=POWER_PROBE_MS))
        p.sustained = watch.limited() is not False  # unknown: sustained, as without NVML
        if p.sustained:
            ran_ms = (timer.clock.host_s() - start) * 1e3
            _settled(p, *timer.settle(region, min_ms=max(SUSTAIN_SETTLE_MS - ran_ms, 0.0)))
    except Exception:  # noqa: BLE001 - sample() meets the same failure and records it
        return


def _settled(p: Prepared, blocks: int, settled: bool) -> None:
    if not settled:
        log(f"{p.planned.label}: GPU time still moving after {blocks} blocks of settling")


def sample(rt: Runtime, p: Prepared) -> None:
    """Take the GPU and launch times of one implementation, interleaved; results land on ``p``."""
    if checked_only(rt, p.planned):  # Triton's interpreter: checked (group.prepare), not timed
        p.graph = None
        return
    sustain = rt.cuda and (p.sustained if p.sustained is not None else sustains(rt, p.planned.op))
    timer = rt.timer
    single: float | None = None
    if p.graph is not None:
        with contextlib.suppress(Exception):  # the graph's own sampling reports this failure
            single = timer.estimate_us(p.graph.run) / max(1, p.graph.calls_per_sample)
    try:
        if single is None:
            single = timer.estimate_us(p.fn)
    except Exception as e:  # noqa: BLE001 - becomes this case's failure (or skip) in to_case
        p.failure, p.graph = e, None
        return
    cap = timer.settings.max_samples
    regions: dict[str, Region] = {}  # by the field of ``p`` its timing fills
    if p.graph is not None:
        regions["gpu"] = sustained(p.graph, single * p.graph.calls_per_sample, cap) if sustain else p.graph
    batch = calls_per_sample(single)
    window: float | None = None
    if sustain and p.graph is None:  # the launch time is the case's time: it gets the window
        batch = max(batch, math.ceil(SUSTAIN_WINDOW_MS * 1e3 / (cap * max(single, 1e-3))))
        window = SUSTAIN_WINDOW_MS
    regions["launch"] = Region(_repeat(p.fn, batch), timer.eager_method, batch, window_ms=window)
    results = timer.measure_interleaved(list(regions.values()), stop_ci=None if sustain else timer.settings.stop_ci)
    p.sampled_until = timer.stopped_by
    if sustain:
        rt.sustained_until = timer.clock.host_s()
        p.notes.append(Note("case.sustained", {"window_ms": round(SUSTAIN_WINDOW_MS)}))
    for kind, got in zip(regions, results, strict=True):
        if isinstance(got, Timing):
            setattr(p, kind, got)
        elif kind == "gpu" and not isinstance(got, rt.oom):
            log(f"{p.planned.label}: CUDA graph replay failed: {got!r}")
            p.notes.append(Note("case.no_gpu_time", {"stage": "replay", "detail": one_line(got)}))
        else:
            p.failure = p.failure or got
    p.graph = None  # the graph's memory goes with it
    if not all(isinstance(got, Timing) for got in results):
        rt.after_failure()


def to_case(p: Prepared, window: int | None) -> Case:
    """The Case of one sampled implementation (its failure, if any, is raised for group.guarded)."""
    if p.failure is not None:
        raise p.failure
    pc = p.planned
    return Case(pc.op, pc.impl, pc.dtype, pc.precision, pc.shape, gpu=p.gpu, launch=p.launch,
                compile_s=p.compile_s, accuracy=p.accuracy, outputs=p.outputs, exact=p.exact, window=window,
                rotation_sets=p.rotation_sets, kernel=p.kernel, notes=tuple(dict.fromkeys(p.notes)),
                phases=p.watch.rounded(), span_s=span(p), cache=p.cache, sampled_until=p.sampled_until)


def span(p: Prepared) -> tuple[float, float]:
    """When ``p``'s work began and ended, on its stopwatch."""
    end = p.end_s if p.end_s is not None else p.watch.now()
    return round(p.start_s, 4), round(max(end, p.start_s), 4)
