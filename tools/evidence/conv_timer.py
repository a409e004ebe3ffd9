"""Where envcheck's timer and ``do_bench_cudagraph`` part on the conv2d headline case (issue 22).

    python tools/evidence/conv_timer.py

scripts/verify_timer.py --workloads found, on one H100, cuDNN's conv2d 64x64x128x128 by 64 7x7 filters
at stride 2 3.7% faster in envcheck than in do_bench_cudagraph (SM clock 1980 against 1874 MHz, power
535 against 648 W) and the Triton conv2d 2.5% slower (both at 1980 MHz), when the worker sampled a
group's implementations in turns in one window. Each line below is one way of sampling that case,
against do_bench_cudagraph on the same bound call over ROUNDS rounds, with each side's SM clock and power:

* ``in turns``: both implementations' graphs and eager batches in one ``Timer.measure_interleaved``
  window, as the worker sampled a group until this diagnosis (reproduced here);
* ``worker``: the worker's path now (verify_timer's ``measure_row``): each implementation settled and
  sampled in a window of its own;
* ``worker, alone``: the same with one implementation in the group, so nothing ran before it but
  do_bench_cudagraph's own runs of it.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CASE = ("conv2d", "fp16", (64, 64, 128, 128, 64, 7, 2))


def _verify_timer() -> Any:
    spec = importlib.util.spec_from_file_location("verify_timer", ROOT / "tools" / "evidence" / "verify_timer.py")
    assert spec is not None and spec.loader is not None
    vt = importlib.util.module_from_spec(spec)
    sys.modules["verify_timer"] = vt  # its dataclasses look their module up while the class is made
    spec.loader.exec_module(vt)
    return vt


def in_turns(vt: Any, rt: Any, nvml: Any, target: Any) -> list[tuple[str, float, float, str, str]]:
    """Both implementations sampled in turns in one window (the former worker path), alternated
    with do_bench_cudagraph: (impl, envcheck us, do_bench_cudagraph us, state, their state)."""
    import triton.testing

    from envcheck.bench.graphs import graph_region
    from envcheck.bench.group import Prepared, open_group, prepare
    from envcheck.bench.monitor import Monitor, window_state
    from envcheck.bench.suite import PlannedCase
    from envcheck.bench.timer import Region, Timer, calls_per_sample
    from envcheck.model import Settings, Timing

    op, dtype, shape = CASE
    warm = Timer("cuda", Settings(warmup_ms=vt.SETTLE_MS))
    planned = [PlannedCase(op, impl, dtype, dtype, shape) for impl in ("torch", "triton")]
    group = open_group(rt, planned[0], seed=0)
    prepared = [prepare(rt, pc, group) for pc in planned]
    assert all(isinstance(p, Prepared) for p in prepared), prepared
    ours: dict[str, list[float]] = {pc.impl: [] for pc in planned}
    theirs: dict[str, list[float]] = {pc.impl: [] for pc in planned}
    ours_mon = Monitor(nvml, target, 0.01)
    their_mon = {pc.impl: Monitor(nvml, target, 0.01) for pc in planned}
    for _ in range(vt.ROUNDS):
        regions, owners = [], []
        for p in prepared:
            p.graph = graph_region(rt.timer, p.fn, p.rotation_sets)
            single = rt.timer.estimate_us(p.graph.run) / max(1, p.graph.calls_per_sample)
            batch = calls_per_sample(single)
            regions += [p.graph, Region(lambda p=p, b=batch: [p.fn() for _ in range(b)], rt.timer.eager_method, batch)]
            owners += [p.planned.impl, None]
        warm.warmup(lambda: [p.fn() for p in prepared])
        with ours_mon:
            got = rt.timer.measure_interleaved(regions)
        for impl, t in zip(owners, got, strict=True):
            if impl is not None:
                assert isinstance(t, Timing), t
                ours[impl].append(t.median_us)
        for p in prepared:
            p.graph = None
            warm.warmup(p.fn)
            with their_mon[p.planned.impl]:
                ms = triton.testing.do_bench_cudagraph(p.fn, rep=vt.WINDOW_MS // 10, return_mode="median")
            theirs[p.planned.impl].append(float(ms) * 1e3)
    return [(impl, statistics.median(ours[impl]), statistics.median(theirs[impl]), window_state(ours_mon.window()),
             window_state(their_mon[impl].window())) for impl in ours]


def main() -> int:
    vt = _verify_timer()
    reason = vt._unusable()
    if reason:
        print(f"diag_conv_timer: {reason}", file=sys.stderr)
        return 2
    import torch

    from envcheck.bench import device
    from envcheck.bench.timer import Timer
    from envcheck.model import Settings
    from envcheck.probes.nvml import Nvml

    settings = Settings(warmup_ms=25, rep_ms=vt.WINDOW_MS, min_samples=30, max_samples=1000, cold_l2=False)
    nvml = Nvml()
    nvml.init()
    index = torch.cuda.current_device()
    dev = device.cuda_device(torch, index, nvml)
    rt = device.Runtime(torch, "cuda", index, dev, Timer("cuda", settings), settings)
    target = dev.uuid or index
    print(f"GPU: {dev.name}  torch {torch.__version__}  cudnn {torch.backends.cudnn.version()}")
    print(f"{'sampled':<16} {'impl':<6} {'envcheck':>9} {'cudagraph':>9} {'ratio':>6}  SM MHz / W (envcheck | cudagraph)")
    for impl, ours, ref, state, their_state in in_turns(vt, rt, nvml, target):
        print(f"{'in turns':<16} {impl:<6} {ours:9.2f} {ref:9.2f} {ours / ref:6.3f}  {state} | {their_state}", flush=True)
    rt.after_failure()
    for label, impls in (("worker", ("torch", "triton")), ("worker, alone", ("triton",)), ("worker, alone", ("torch",))):
        for r in vt.measure_row(rt, nvml, target, *CASE, impls=impls):
            ours, ref = statistics.median(t.median_us for t in r.gpu), statistics.median(r.theirs)
            print(f"{label:<16} {r.impl:<6} {ours:9.2f} {ref:9.2f} {ours / ref:6.3f}  "
                  f"{r.ours_state} | {r.their_state}", flush=True)
        rt.after_failure()
    nvml.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
