"""Check envcheck's GPU timer against ``triton.testing.do_bench_cudagraph`` on the same callables.

    python scripts/verify_timer.py [--workloads]

Each row is one group of the suite (op, dtype, shape) with its torch and Triton
implementations, taken through the worker's own path: the group's tensors (``open_group``),
each implementation prepared (first call, checked call, warm-up, CUDA graph: ``prepare``),
then GPU time and launch time of both sampled in one interleaved window (``sample``). Against
it, ``do_bench_cudagraph`` (``return_mode="median"``) on the same bound call, in alternating
rounds, each timer after ``SETTLE_MS`` of the call back to back, over about the same window.
L2 is not kept cold here (``do_bench_cudagraph`` replays one set of buffers too): like is
compared with like.

What it shows, per row and implementation:

* envcheck's GPU time over ``do_bench_cudagraph``'s: every row must agree within 1%. Both
  replay CUDA graphs of back-to-back calls lasting about a millisecond or more (graphs.py says
  why envcheck's replays are that long: the replay's own ~3 us would otherwise bias the time);
* the sample statistics the analysis flags a row *noisy* on (CV above 5% or IQR above 10%
  of the median, for the GPU time and the launch time), and the GPU-time samples more than 5%
  above their median (``spikes``: the turn-boundary spikes the spacer rule removes, timer.py);
* the mean SM clock and power of each timer's runs (NVML): the state the GPU was in.

``--workloads``: the headline cases of the first users' workloads instead (conv2d, layer norm, the
reductions over leading axes, softmax and linear forward + backward), within 3%: envcheck's timer and
``do_bench_cudagraph`` on the same tensors in one process, alternated, so a difference between a
report and ``scripts/verify_ops.py`` (two processes, minutes apart) can be told from one between
the timers.

Exit status: 0 every row within the tolerance (1%, 3% with ``--workloads``), 1 one is not, 2 no CUDA
GPU / torch / Triton.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run from a checkout without installing: the package sits beside this folder.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOLERANCE = 0.01
NOISY_CV = 0.05  # the analysis's definition of a noisy row
NOISY_IQR = 0.10
SPIKE = 1.05
ROUNDS = 5
# Before each timer runs, the call runs back to back this long: a power-capped GPU settles to
# its steady clock within a few hundred ms, and each timer starts from that state instead of
# whatever the previous timer (a shorter or gappier load) left behind.
SETTLE_MS = 300.0
WINDOW_MS = 300  # each region's sampling window; do_bench_cudagraph gets 10 replays of a tenth of it (a graph
# sized to the whole window would hold 100,000 calls of a 3 us kernel and time the graph, not the kernel)
ROWS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("vector_add", "fp32", (1 << 20,)),
    ("vector_add", "fp32", (1 << 24,)),
    ("vector_add", "fp32", (1 << 28,)),
    ("relu", "fp32", (1 << 28,)),
    ("softmax", "fp16", (8192, 4096)),
    ("row_sum", "fp32", (8192, 4096)),
    ("matmul", "fp16", (4096, 4096, 4096)),
    ("matmul", "bf16", (4096, 4096, 4096)),
)
WORKLOAD_ROWS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("conv2d", "fp16", (64, 64, 128, 128, 64, 7, 2)),
    ("layer_norm", "fp16", (32768, 8192)),
    ("sum_lead", "fp16", (64, 4096, 4096)),
    ("softmax_fwbw", "fp16", (32768, 8192)),
    ("linear_fwbw", "fp16", (4096, 4096, 4096)),
)
WORKLOAD_TOLERANCE = 0.03


def _unusable() -> str | None:
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch"
    try:
        import triton.testing  # noqa: F401
    except ImportError as e:
        return f"Triton is not usable ({e})"
    return None


def _noisy(t: Any) -> str:
    fired = []
    if t.cv > NOISY_CV:
        fired.append(f"cv {100 * t.cv:.1f}%")
    if t.iqr_us / t.median_us > NOISY_IQR:
        fired.append(f"iqr {100 * t.iqr_us / t.median_us:.1f}%")
    return ", ".join(fired)


def _state(window: Any) -> str:
    if window is None or window.sm_mhz is None:
        return "n/a"
    power = f" {statistics.fmean(window.power_w):.0f} W" if window.power_w is not None else ""
    return f"{statistics.fmean(window.sm_mhz):.0f} MHz{power}"


@dataclass
class Result:
    """One implementation of one row: envcheck's timings of every round, do_bench_cudagraph's medians."""

    label: str
    impl: str
    gpu: list[Any] = field(default_factory=list)
    launch: list[Any] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    ours_state: str = "n/a"
    their_state: str = "n/a"


def measure_row(rt: Any, nvml: Any, target: Any, op: str, dtype: str, shape: tuple[int, ...]) -> list[Result]:
    """Both implementations of one group through the worker's own path, alternated with
    do_bench_cudagraph over ROUNDS rounds."""
    import triton.testing

    from envcheck.bench.graphs import graph_region
    from envcheck.bench.group import Prepared, open_group, prepare
    from envcheck.bench.impls import tf32_matmul
    from envcheck.bench.monitor import Monitor
    from envcheck.bench.sampling import sample
    from envcheck.bench.suite import PlannedCase
    from envcheck.bench.timer import Timer
    from envcheck.model import Settings

    settle = Timer("cuda", Settings(warmup_ms=SETTLE_MS))
    planned = [PlannedCase(op, impl, dtype, dtype, shape) for impl in ("torch", "triton")]
    results = {pc.impl: Result(planned[0].group_label, pc.impl) for pc in planned}
    group = open_group(rt, planned[0], seed=0)
    with tf32_matmul(dtype) if op == "matmul" else contextlib.nullcontext():
        ready = [prepare(rt, pc, group) for pc in planned]
        if not all(isinstance(p, Prepared) for p in ready):
            raise RuntimeError(f"{planned[0].group_label}: could not be prepared: {ready}")
        prepared = [p for p in ready if isinstance(p, Prepared)]
        ours = Monitor(nvml, target, 0.01)
        theirs = {pc.impl: Monitor(nvml, target, 0.01) for pc in planned}
        for _ in range(ROUNDS):
            # The worker's path: graphs captured, both implementations sampled in one window.
            for p in prepared:
                p.graph = graph_region(rt.timer, p.fn, p.rotation_sets)
            settle.warmup(lambda: [p.fn() for p in prepared])
            with ours:
                sample(rt, prepared)
            for p in prepared:
                if p.gpu is None or p.launch is None:
                    raise RuntimeError(f"{p.planned.label}: not measured ({p.failure!r}, {p.notes})")
                results[p.planned.impl].gpu.append(p.gpu)
                results[p.planned.impl].launch.append(p.launch)
            for p in prepared:
                settle.warmup(p.fn)
                with theirs[p.planned.impl]:
                    ms = triton.testing.do_bench_cudagraph(p.fn, rep=WINDOW_MS // 10, return_mode="median")
                results[p.planned.impl].theirs.append(float(ms) * 1e3)
    for impl, r in results.items():
        r.ours_state, r.their_state = _state(ours.window()), _state(theirs[impl].window())
    return list(results.values())


def main(argv: list[str] | None = None) -> int:
    args = argv or []
    if args not in ([], ["--workloads"]):
        print("usage: python scripts/verify_timer.py [--workloads]", file=sys.stderr)
        return 2
    rows, tolerance = (WORKLOAD_ROWS, WORKLOAD_TOLERANCE) if args else (ROWS, TOLERANCE)
    reason = _unusable()
    if reason:
        print(f"verify_timer: needs a CUDA GPU with torch and Triton: {reason}", file=sys.stderr)
        return 2
    import torch
    import triton

    from envcheck.bench import device
    from envcheck.bench.timer import Timer
    from envcheck.model import Settings
    from envcheck.probes.nvml import Nvml

    settings = Settings(warmup_ms=25, rep_ms=WINDOW_MS, min_samples=30, max_samples=1000, cold_l2=False)
    index = torch.cuda.current_device()
    nvml = Nvml()
    nvml.init()
    dev = device.cuda_device(torch, index, nvml)
    rt = device.Runtime(torch, "cuda", index, dev, Timer("cuda", settings), settings)

    print(f"GPU: {dev.name} ({dev.pci_bus_id})  torch {torch.__version__}  triton {triton.__version__}")
    print(f"{'case':<26} {'impl':<6} {'envcheck':>9} {'cudagraph':>9} {'ratio':>6}  {'n':>4} {'cv%':>5} {'iqr%':>5} "
          f"{'spikes':>6}  {'launch':>8} {'cv%':>5}  {'noisy (gpu | launch)':<20} "
          f"SM MHz / W (envcheck | cudagraph)")
    worst = 0.0
    noisy_rows: list[str] = []
    for op, dtype, shape in rows:
        try:
            results = measure_row(rt, nvml, dev.uuid or index, op, dtype, shape)
        except Exception as e:  # noqa: BLE001 - one row's failure is printed; the others still run
            print(f"{op} {dtype} {shape}: failed: {type(e).__name__}: {e}")
            worst = max(worst, 1.0)
            continue
        finally:
            rt.after_failure()
        for r in results:
            ours, ref = statistics.median(t.median_us for t in r.gpu), statistics.median(r.theirs)
            ratio = ours / ref
            worst = max(worst, abs(ratio - 1))
            last = r.gpu[-1]
            spikes = sum(1 for t in r.gpu for x in t.samples_us if x > SPIKE * t.median_us)
            gpu_fired = [f for f in map(_noisy, r.gpu) if f]
            launch_fired = [f for f in map(_noisy, r.launch) if f]
            fired = f"{len(gpu_fired)}/{ROUNDS} | {len(launch_fired)}/{ROUNDS}"
            if gpu_fired or launch_fired:
                noisy_rows.append(f"{r.label} {r.impl}: GPU time {'; '.join(gpu_fired) or '-'} | "
                                  f"launch time {'; '.join(launch_fired) or '-'}")
            mark = "" if abs(ratio - 1) <= tolerance else f"  <-- off by more than {100 * tolerance:.0f}%"
            print(f"{r.label:<26} {r.impl:<6} {ours:9.2f} {ref:9.2f} {ratio:6.3f}  {sum(t.n for t in r.gpu):4d} "
                  f"{100 * last.cv:5.1f} {100 * last.iqr_us / last.median_us:5.1f} {spikes:6d}  "
                  f"{r.launch[-1].median_us:8.2f} {100 * r.launch[-1].cv:5.1f}  {fired:<20} "
                  f"{r.ours_state} | {r.their_state}{mark}")
    nvml.shutdown()
    print(f"largest deviation from do_bench_cudagraph: {100 * worst:.2f}% (allowed {100 * tolerance:.0f}%)")
    print(f"rows the noisy flag fires on (CV > {100 * NOISY_CV:.0f}% or IQR > {100 * NOISY_IQR:.0f}% of the median, "
          f"GPU or launch time, in any of {ROUNDS} rounds): {len(noisy_rows)}")
    for row in noisy_rows:
        print(f"  {row}")
    return 0 if worst <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
