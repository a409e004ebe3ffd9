"""Sampling a prepared implementation: its GPU time and launch time in ONE window, taken once
the implementation has run back to back long enough to bring the GPU to the state it keeps under it.

The graph (GPU time: replays between CUDA events) and the eager batch (launch time: back-to-back
calls between CUDA events, divided by the batch) of an implementation take their samples in
turns over the same stretch of time (timer.measure_interleaved). Sampled in two windows (the
graph, then the eager batch), a power-capped GPU drifting between them gave launch times shorter
than the GPU time of the same call (H200, matmul fp16 8192: GPU 1.89 ms, launch 1.73 ms).

The implementations of a group are sampled one after another, each in a window of its own (the
worker monitors each), once its own graph replays' time has settled (``Timer.settle``: it stops
moving between blocks of 25 ms, at most a second). Taken in turns in one shared
window, they shared the GPU's power budget too: on an H100 at its 700 W cap, cuDNN's conv2d
(64x64x128x128 by 64 7x7 filters at stride 2; 1799 MHz and 682 W on its own) ran between the turns
of the lighter Triton conv2d at 1980 MHz and read 532.0 us, 6% under the 563.7 us it takes on its
own back to back (triton.testing.do_bench_cudagraph: 568.3), and the Triton conv2d 2.4% over its
own time (evidence/device-logs/2026-11-26_0244Z_h100_conv_timer.txt.gz). An implementation's time is
now the one it keeps under its own load, as code that runs it sees and an independent timer reads:
on two H100s, cuDNN's conv2d 1.000 and 0.997 of do_bench_cudagraph this way, 0.958 and 0.944 in turns
(evidence/device-logs/2026-11-26_0420Z_h100_device_sampling.log.gz, ..._0428Z_...). The cost: a large
matmul at the power cap, sampled alone, catches its own phase of the cap, and moves more between two
runs (run-to-run floor 4.4% on the H100, 1.5% sampled in turns; compare/noise_floors.json).

A compute-bound implementation (its op judged on FLOP/s: matmul, conv2d, linear forward + backward, a
user's op declared so) whose load meets the GPU's power or thermal limit is timed sustained: it
settles at least ``SUSTAIN_SETTLE_MS`` and its GPU time's samples span ``SUSTAIN_WINDOW_MS`` (each
sample replays its graph as often as the sample cap needs), and the case says so (a note
``case.sustained``). Sampled 100 ms right after a 50 ms settle, such an implementation caught the top
clock the GPU holds for the first 100-250 ms of a load, or the power limiter cutting in, or a phase
of its one-second swing after that: cuDNN's conv2d 533 us 50 ms in and 567 us in the fourth second of
one load on an H100 (evidence/device-logs/2026-11-26_0558Z_h100_power_ramp.txt.gz), its report 3% faster
than do_bench_cudagraph minutes later, a large matmul 4.4% apart between two runs.

Which loads meet the limit is seen, not guessed: a compute-bound implementation first settles at least
``POWER_PROBE_MS`` while NVML's clock-event reasons are watched (``Runtime.limit_watch``). In the ramp
above every capped load had its clock cut within 140-240 ms of an idle start (linear forward +
backward at 140 ms, conv2d at 237 ms, matmul 8192^3 at 222 ms). A load under which no power or
thermal reason showed keeps its top clock and has no swing to span: on an H200 the matmuls below
2048^3 (odd sizes included) ran at 1980 MHz without a reason through their 1.1 s sustained windows,
their samples within 0.15% (CV) of each other (evidence/2026-11-26_0748Z_vm_2x-h200_node.json.gz), as
did the IEEE fp32 ones up to 4096^3 (FMA, 530-575 W against the 700 W cap) in the run before sustained
sampling (evidence/2026-11-26_0456Z_vm_h200.json.gz), while every 16-bit and TF32 one from 2048^3 up
showed ``sw_power_cap`` in both. Those are sampled as a memory-bound implementation is (``rep_ms``):
53 of the full suite's 80 matmul cases on an H200, 1.1 s of window and 0.1-0.6 s of settling each.
Without NVML's reasons (no NVML, an old driver) every compute-bound implementation is sustained.

An implementation that follows a sustained one within ``RECENT_MS`` (the next implementation of the
same group: they are sampled back to back) meets the GPU already in the state the limiter holds it
in: the one-second power average at the cap, the clock past its first dip. It settles at least
``RECENT_SETTLE_MS`` (and until its own time holds) and is sustained without a probe: 300 ms less
for every implementation at the cap but the first of its group (the next group's preparation, a
compile and a race, is far longer than ``RECENT_MS``).

The CPU backend has launch time only, from host-clock batches, and nothing to settle. A failure
falls on its own implementation only: a graph that fails to replay costs its case the GPU time
(a note), an eager batch that fails costs the case (its failure, or a skip when out of memory).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from envcheck.bench.device import Runtime
from envcheck.bench.failure import log, one_line
from envcheck.bench.group import Prepared
from envcheck.bench.timer import SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS, Region, calls_per_sample
from envcheck.model import Case, Note, Timing
from envcheck.ops import lookup

# How long a compute-bound implementation runs while NVML's clock-event reasons are watched before
# it is timed sustained or not: past the 140-240 ms the power limiter took to cut in from idle.
POWER_PROBE_MS = 300.0
# A sustained implementation's successor started within this long of its window's end meets the GPU
# in the limiter's state, and settles at least RECENT_SETTLE_MS (module docstring).
RECENT_MS = 100.0
RECENT_SETTLE_MS = 100.0


def _repeat(fn: Callable[[], Any], calls: int) -> Callable[[], None]:
    def region() -> None:
        for _ in range(calls):
            fn()
    return region


def sustained(region: Region, replay_us: float, max_samples: int) -> Region:
    """``region`` (a graph's replay of ``replay_us``) sampled over ``SUSTAIN_WINDOW_MS`` in at most
    ``max_samples`` samples: each sample replays it as often as that needs, and one replay is the
    spacer."""
    r = max(1, math.ceil(SUSTAIN_WINDOW_MS * 1e3 / (max_samples * max(replay_us, 1e-3))))
    return Region(_repeat(region.run, r), region.method, region.calls_per_sample * r,
                  window_ms=SUSTAIN_WINDOW_MS, spacer=region.run)


def sustains(rt: Runtime, op: str) -> bool:
    """Whether an implementation of ``op`` is timed sustained: a compute-bound op (built-in or declared) on a GPU."""
    return rt.cuda and lookup(op, rt.ops).compute_bound


def settle(rt: Runtime, p: Prepared) -> None:
    """Run one implementation back to back until its GPU time holds (``Timer.settle``; CUDA only),
    before its window opens: the window's clocks and power are those of its samples. Where it
    ``sustains``, decide whether it is timed sustained (``p.sustained``, module docstring): at
    least ``RECENT_SETTLE_MS`` after a sustained predecessor, else at least ``POWER_PROBE_MS``
    watched for power and thermal limits, then at least ``SUSTAIN_SETTLE_MS`` in all if one showed."""
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
    """Take the GPU and launch times of one implementation, interleaved; results land on ``p``.
    Where it is timed sustained (``settle`` decided; where it was not settled, where it ``sustains``),
    the time the case reports spans ``SUSTAIN_WINDOW_MS``."""
    sustain = rt.cuda and (p.sustained if p.sustained is not None else sustains(rt, p.planned.op))
    timer = rt.timer
    regions: list[Region] = []
    kinds: list[str] = []  # "gpu" | "launch" per region
    # The eager batch is sized from the per-call GPU time where there is a graph: it only sets
    # the batch length, not any reported number.
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
        return
    cap = timer.settings.max_samples
    if p.graph is not None:
        regions.append(sustained(p.graph, single * p.graph.calls_per_sample, cap) if sustain else p.graph)
        kinds.append("gpu")
    batch = calls_per_sample(single)
    window: float | None = None
    if sustain and p.graph is None:  # the launch time is the case's time: it gets the window
        batch = max(batch, math.ceil(SUSTAIN_WINDOW_MS * 1e3 / (cap * max(single, 1e-3))))
        window = SUSTAIN_WINDOW_MS
    regions.append(Region(_repeat(p.fn, batch), timer.eager_method, batch, window_ms=window))
    kinds.append("launch")
    results = timer.measure_interleaved(regions, stop_ci=None if sustain else timer.settings.stop_ci)
    if sustain:
        rt.sustained_until = timer.clock.host_s()
        p.notes.append(Note("case.sustained", {"window_ms": round(SUSTAIN_WINDOW_MS)}))
    failed = False
    for kind, got in zip(kinds, results, strict=True):
        if isinstance(got, Timing):
            setattr(p, kind, got)
        elif kind == "gpu" and not isinstance(got, rt.oom):
            log(f"{p.planned.label}: CUDA graph replay failed: {got!r}")
            p.notes.append(Note("case.no_gpu_time", {"stage": "replay", "detail": one_line(got)}))
            failed = True
        else:
            p.failure = p.failure or got
            failed = True
    p.graph = None  # the graph's memory goes with it
    if failed:
        rt.after_failure()


def to_case(p: Prepared, window: int | None) -> Case:
    """The Case of one sampled implementation (its failure, if any, is raised for failure.guarded)."""
    if p.failure is not None:
        raise p.failure
    assert p.launch is not None
    pc = p.planned
    return Case(pc.op, pc.impl, pc.dtype, pc.precision, pc.shape, gpu=p.gpu, launch=p.launch,
                compile_s=p.compile_s, accuracy=p.accuracy, outputs=p.outputs, exact=p.exact, window=window, rotation_sets=p.rotation_sets,
                kernel=p.kernel, notes=tuple(dict.fromkeys(p.notes)), phases=p.watch.rounded(), span_s=span(p))


def span(p: Prepared) -> tuple[float, float]:
    """When ``p``'s work began and ended (seconds on its stopwatch; the end: its sampling's, or now)."""
    end = p.end_s if p.end_s is not None else p.watch.now()
    return round(p.start_s, 4), round(max(end, p.start_s), 4)
