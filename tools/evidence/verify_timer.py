"""Check envcheck's GPU timer against ``triton.testing.do_bench_cudagraph`` on the same callables.

    python tools/evidence/verify_timer.py [--workloads | --user FILE.py]

Each row is one group of the suite (op, dtype, shape) with its torch and Triton
implementations, taken through the worker's own path: the group's tensors (``open_group``),
each implementation prepared (first call, checked call, warm-up, CUDA graph: ``prepare``),
then each implementation settled and its GPU time and launch time sampled in a window of its own
(``settle``, ``sample``). Against it, ``do_bench_cudagraph`` (``return_mode="median"``) on the same
bound call after ``SETTLE_MS`` of the call back to back (it settles nothing itself), in alternating
rounds, over about the same window (for a compute-bound op, which envcheck samples sustained:
``SUSTAIN_SETTLE_MS`` and ``SUSTAIN_WINDOW_MS`` of envcheck/bench/timer.py on both sides).
L2 is not kept cold here (``do_bench_cudagraph`` replays one set of buffers too): like is
compared with like.

What it shows, per row and implementation:

* envcheck's GPU time over ``do_bench_cudagraph``'s: every row must agree within 1%. Both
  replay CUDA graphs of back-to-back calls lasting about a millisecond or more (graphs.py says
  why envcheck's replays are that long: the replay's own ~3 us would otherwise bias the time);
* the sample statistics the analysis flags a row *noisy* on (CV above 5% or IQR above 10%
  of the median, for the GPU time and the launch time), and the GPU-time samples more than 5%
  above their median (``spikes``: the turn-boundary spikes the spacer rule removes, timer.py);
* how far each timer's rounds spread (``spread% e|c``: (largest - smallest) / median of envcheck's
  and of ``do_bench_cudagraph``'s rounds): where the reference's own rounds spread about as far as
  the bar (a power-capped GPU's clock moving), the ratio says as much about the GPU as the timers;
* the mean SM clock and power of each timer's runs (NVML): the state the GPU was in.

``--workloads``: the headline cases of the first users' workloads instead (conv2d, layer norm, the
reductions over leading axes, softmax and linear forward + backward), within 3%: envcheck's timer and
``do_bench_cudagraph`` on the same tensors in one process, alternated, so a difference between a
report and ``tools/evidence/verify_ops.py`` (two processes, minutes apart) can be told from one between
the timers.

``--user FILE.py`` (or ``module:object``, as ``envcheck bench`` takes it): a user's ops declared with
``envcheck.userbench.Op`` instead, found the way ``envcheck bench`` finds them (userbench/discover.py, in
a subprocess: a missing file, one that cannot be imported or one declaring no ``Op`` is the same one
line, exit status 2). One row per op and dtype it declares, at its largest shape (by element count)
and only where that shape's working set is at least 3x this GPU's L2 (as
``tools/evidence/userbench_do_bench.py`` compares; the rows left out are named; none left: exit status 2), with
every implementation the op declares, its baseline first. Each row is measured twice through envcheck's
path, with this script's sampling window both times: with L2 not kept cold as above, then with cold L2
as ``envcheck bench`` runs it (``cold_l2=True``: rotating buffer sets; those rows' labels end in
``cold-L2``, and the ``sets`` column gives the rotation sets used: l2.py rotates only working sets below
3x L2, so at these rows expect 1). ``do_bench_cudagraph`` is the reference of both, within 3%; the
cold-L2 rows are printed, but only the others decide the exit status. So a difference between a report
of ``envcheck bench`` and ``tools/evidence/userbench_do_bench.py`` (a second process, minutes later) can be told
from one between the timers.

Exit status: 0 every judged row within the tolerance (1%, 3% with ``--workloads`` or ``--user``), 1 one
is not (or failed), 2 a usage error (one line on stderr: bad flags, a missing file or one declaring no
``Op``, no row at 3x L2 or an unknown L2 size) or no CUDA GPU / torch / Triton.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run from a checkout without installing: the package sits beside this folder.
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TOLERANCE = 0.01
NOISY_CV = 0.05  # the analysis's definition of a noisy row
NOISY_IQR = 0.10
SPIKE = 1.05
ROUNDS = 5
# Before do_bench_cudagraph runs, the call runs back to back this long: a power-capped GPU settles
# to its steady clock within a few hundred ms, so the reference starts from that state instead of
# whatever ran before it (envcheck's side settles as the worker does: Timer.settle).
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
BUILTIN_IMPLS = ("torch", "triton")
# --user: rows whose working set is at least this multiple of L2, where envcheck's cold L2 and
# do_bench_cudagraph's one set of buffers both read DRAM (as tools/evidence/userbench_do_bench.py compares).
USER_L2_MULTIPLE = 3
USER_TOLERANCE = WORKLOAD_TOLERANCE
COLD = " cold-L2"  # the label suffix of the rows measured as `envcheck bench` runs (cold_l2=True)
USAGE = "usage: python tools/evidence/verify_timer.py [--workloads | --user FILE.py]"

# One row: op, dtype, shape and the implementations measured (the baseline first).
Row = tuple[str, str, tuple[int, ...], tuple[str, ...]]


@dataclass(frozen=True)
class Args:
    """What the command line asks for: ``mode`` is ``suite``, ``workloads`` or ``user``; ``source``
    (``user`` only) the file, made absolute as ``envcheck bench`` makes it, or ``module:object``;
    ``given``: the argument as typed, the one printed (an absolute path would name this machine's folders)."""

    mode: str
    source: str | None = None
    given: str | None = None


def parse_args(argv: Sequence[str]) -> Args | str:
    """The mode ``argv`` asks for, or the one line to print on stderr (exit status 2)."""
    from envcheck.errors import UsageError
    from envcheck.userbench.discover import source_argument

    args = list(argv)
    if not args:
        return Args("suite")
    if args == ["--workloads"]:
        return Args("workloads")
    if len(args) == 1 and args[0].startswith("--user="):
        args = ["--user", args[0].removeprefix("--user=")]
    if len(args) == 2 and args[0] == "--user" and args[1]:
        try:
            return Args("user", source_argument(args[1]), args[1])
        except UsageError as e:
            return f"verify_timer: {e}"
    return USAGE


def discover_ops(source: str) -> tuple[Any, ...] | str:
    """The ``OpSpec`` of every op ``source`` declares, found as ``envcheck bench`` finds them (a
    subprocess, userbench/discover.py), or its one-line error."""
    from envcheck.errors import UsageError
    from envcheck.userbench.discover import discover

    # The subprocess imports envcheck too: from this checkout, installed or not.
    path = os.environ.get("PYTHONPATH", "")
    if not any(Path(p).resolve() == ROOT for p in path.split(os.pathsep) if p):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), path) if p)
    try:
        return discover(source)
    except UsageError as e:
        return f"verify_timer: {e}"


def largest_shapes(ops: Sequence[Any]) -> list[tuple[Row, int]]:
    """Every declared (op, dtype) at its largest shape (by element count; the first declared of
    equals), with its working set in bytes; the implementations the op declares, baseline first."""
    out: list[tuple[Row, int]] = []
    for spec in ops:
        assert spec.declared is not None, f"{spec.name} is not a declared op"
        impls = (spec.baseline, *(i for i in spec.impls if i != spec.baseline))
        for dtype in dict.fromkeys(c.dtype for c in spec.declared.costs):
            shapes = [c.shape for c in spec.declared.costs if c.dtype == dtype]
            shape = max(shapes, key=math.prod)
            out.append(((spec.name, dtype, shape, impls), spec.working_set_bytes(shape, dtype)))
    return out


def user_rows(ops: Sequence[Any], l2_bytes: int) -> list[Row]:
    """The --user rows: of ``largest_shapes``, those whose working set is at least
    USER_L2_MULTIPLE x ``l2_bytes`` (the others would read L2 in one timer and not the other)."""
    return [row for row, ws in largest_shapes(ops) if ws >= USER_L2_MULTIPLE * l2_bytes]


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


def spread_pct(values: Sequence[float]) -> float:
    """How far one timer's rounds spread: (largest - smallest) / median, in percent. Where the
    reference's own rounds spread about as far as the bar, the row's ratio says as much about the
    GPU's state (a power-capped clock) as about either timer."""
    return 100.0 * (max(values) - min(values)) / statistics.median(values)


@dataclass
class Result:
    """One implementation of one row: envcheck's timings of every round, do_bench_cudagraph's medians."""

    label: str
    impl: str
    rotation_sets: int = 1
    gpu: list[Any] = field(default_factory=list)
    launch: list[Any] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    ours_state: str = "n/a"
    their_state: str = "n/a"


def measure_row(rt: Any, nvml: Any, target: Any, op: str, dtype: str, shape: tuple[int, ...],
                impls: Sequence[str] = BUILTIN_IMPLS) -> list[Result]:
    """The implementations ``impls`` of one group through the worker's own path (L2 kept cold or not
    as ``rt.settings.cold_l2`` says: then the labels end in COLD), alternated with
    do_bench_cudagraph over ROUNDS rounds."""
    import triton.testing

    from envcheck.bench.graphs import graph_region
    from envcheck.bench.group import Prepared, open_group, prepare
    from envcheck.bench.impls import tf32_matmul
    from envcheck.bench.monitor import Monitor, window_state
    from envcheck.bench.sampling import sample, settle, sustains
    from envcheck.bench.suite import PlannedCase
    from envcheck.bench.timer import SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS, Timer
    from envcheck.model import Settings

    # A compute-bound op may be sampled sustained on envcheck's side (sampling.py: where the GPU slowed
    # for power or heat): the reference always gets the sustained settling and window, so where envcheck
    # sampled over rep_ms only (a load that held its clock), a second's reference shows that was enough.
    sustain = sustains(rt, op)
    settle_ms, window_ms = (SUSTAIN_SETTLE_MS, SUSTAIN_WINDOW_MS) if sustain else (SETTLE_MS, WINDOW_MS)
    warm = Timer("cuda", Settings(warmup_ms=settle_ms))  # do_bench_cudagraph has no settling of its own
    planned = [PlannedCase(op, impl, dtype, dtype, shape) for impl in impls]
    label = planned[0].group_label + (COLD if rt.settings.cold_l2 else "")
    results = {pc.impl: Result(label, pc.impl) for pc in planned}
    group = open_group(rt, planned[0], seed=0)
    with tf32_matmul(dtype) if op == "matmul" else contextlib.nullcontext():
        ready = [prepare(rt, pc, group) for pc in planned]
        if not all(isinstance(p, Prepared) for p in ready):
            raise RuntimeError(f"{planned[0].group_label}: could not be prepared: {ready}")
        prepared = [p for p in ready if isinstance(p, Prepared)]
        for p in prepared:
            results[p.planned.impl].rotation_sets = p.rotation_sets
        ours = {pc.impl: Monitor(nvml, target, 0.01) for pc in planned}
        theirs = {pc.impl: Monitor(nvml, target, 0.01) for pc in planned}
        for _ in range(ROUNDS):
            # The worker's path: each implementation's graph captured, settled, then sampled in a
            # window of its own (sampling.settle, sampling.sample).
            for p in prepared:
                p.graph = graph_region(rt.timer, p.fn, p.rotation_sets)
                settle(rt, p)
                with ours[p.planned.impl]:
                    sample(rt, p)
                if p.gpu is None or p.launch is None:
                    raise RuntimeError(f"{p.planned.label}: not measured ({p.failure!r}, {p.notes})")
                results[p.planned.impl].gpu.append(p.gpu)
                results[p.planned.impl].launch.append(p.launch)
            for p in prepared:
                warm.warmup(p.fn)
                with theirs[p.planned.impl]:
                    ms = triton.testing.do_bench_cudagraph(p.fn, rep=round(window_ms) // 10, return_mode="median")
                results[p.planned.impl].theirs.append(float(ms) * 1e3)
    for impl, r in results.items():
        r.ours_state, r.their_state = window_state(ours[impl].window()), window_state(theirs[impl].window())
    return list(results.values())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv or [])
    if isinstance(args, str):
        print(args, file=sys.stderr)
        return 2
    ops: tuple[Any, ...] = ()
    if args.mode == "user":
        assert args.source is not None
        found = discover_ops(args.source)
        if isinstance(found, str):
            print(found, file=sys.stderr)
            return 2
        ops = found
    reason = _unusable()
    if reason:
        print(f"verify_timer: needs a CUDA GPU with torch and Triton: {reason}", file=sys.stderr)
        return 2
    import torch
    import triton

    from envcheck import units
    from envcheck.bench import device
    from envcheck.bench.monitor import LimitWatch
    from envcheck.bench.timer import Timer
    from envcheck.model import Settings
    from envcheck.probes.nvml import Nvml
    from envcheck.userbench.discover import CODE

    settings = Settings(warmup_ms=25, rep_ms=WINDOW_MS, min_samples=30, max_samples=1000, cold_l2=False)
    index = torch.cuda.current_device()
    nvml = Nvml()
    nvml.init()
    dev = device.cuda_device(torch, index, nvml)
    user = args.mode == "user"
    l2 = dev.l2_bytes or 0
    rows: Sequence[Row]
    if user:
        rows = user_rows(ops, l2) if l2 else []
        if not rows:
            nvml.shutdown()
            why = (f"no op's largest shape has a working set of at least {USER_L2_MULTIPLE}x this GPU's L2 "
                   f"({l2 / 2**20:.0f} MiB)" if l2 else "this GPU's L2 size is unknown")
            print(f"verify_timer: {args.given}: {why}: nothing to compare", file=sys.stderr)
            return 2
        tolerance = USER_TOLERANCE
        # Like with like (one set of buffers, as do_bench_cudagraph replays), then as `envcheck bench` runs.
        variants = (settings, dataclasses.replace(settings, cold_l2=True))
    else:
        table = WORKLOAD_ROWS if args.mode == "workloads" else ROWS
        rows = [(op, dtype, shape, BUILTIN_IMPLS) for op, dtype, shape in table]
        tolerance = WORKLOAD_TOLERANCE if args.mode == "workloads" else TOLERANCE
        variants = (settings,)
    runtimes = [device.Runtime(torch, "cuda", index, dev, Timer("cuda", s), s, ops=ops, source=args.source,
                                code=CODE)
                for s in variants]
    for rt in runtimes:  # the worker's rule for which compute-bound implementations are sustained (sampling.py)
        rt.limit_watch = lambda: LimitWatch(nvml, dev.uuid or index)

    print(f"GPU: {dev.name} ({dev.pci_bus_id})  torch {torch.__version__}  triton {triton.__version__}")
    if user:
        print(f"{args.given}: every declared op and dtype at its largest shape, where its working set is at least "
              f"{USER_L2_MULTIPLE}x L2 ({l2 / 2**20:.0f} MiB); each measured with L2 not kept cold, then cold "
              f"(rows labelled{COLD}, as `envcheck bench` runs: printed, not judged)")
        for (op, dtype, shape, _), ws in largest_shapes(ops):
            if (op, dtype, shape) not in {r[:3] for r in rows}:
                size = f"{ws / 2**20:.1f} MiB" if ws >= 1 << 17 else f"{ws} bytes"
                print(f"  left out: {op} {dtype} {units.shape(shape)} (working set {size})")
    width = max(26, *(len(f"{op} {dtype} {units.shape(shape)}{COLD if user else ''}") for op, dtype, shape, _ in rows))
    iw = max(6, *(len(i) for *_, impls in rows for i in impls))
    sets_head = f" {'sets':>4}" if user else ""
    print(f"{'case':<{width}} {'impl':<{iw}} {'envcheck':>9} {'cudagraph':>9} {'ratio':>6}{sets_head} {'spread% e|c':>11}"
          f"  {'n':>4} "
          f"{'cv%':>5} {'iqr%':>5} {'spikes':>6}  {'launch':>8} {'cv%':>5}  {'noisy (gpu | launch)':<20} "
          f"SM MHz / W (envcheck | cudagraph)")
    worst = worst_cold = 0.0
    noisy_rows: list[str] = []
    for op, dtype, shape, impls in rows:
        for rt in runtimes:
            judged = not rt.settings.cold_l2
            try:
                results = measure_row(rt, nvml, dev.uuid or index, op, dtype, shape, impls)
            except Exception as e:  # noqa: BLE001 - one row's failure is printed; the others still run
                print(f"{op} {dtype} {shape}{'' if judged else COLD}: failed: {type(e).__name__}: {e}"
                      f"{'' if judged else ' (not judged)'}")
                if judged:
                    worst = max(worst, 1.0)
                continue
            finally:
                rt.after_failure()
            for r in results:
                ours, ref = statistics.median(t.median_us for t in r.gpu), statistics.median(r.theirs)
                ratio = ours / ref
                if judged:
                    worst = max(worst, abs(ratio - 1))
                else:
                    worst_cold = max(worst_cold, abs(ratio - 1))
                last = r.gpu[-1]
                spikes = sum(1 for t in r.gpu for x in t.samples_us if x > SPIKE * t.median_us)
                gpu_fired = [f for f in map(_noisy, r.gpu) if f]
                launch_fired = [f for f in map(_noisy, r.launch) if f]
                fired = f"{len(gpu_fired)}/{ROUNDS} | {len(launch_fired)}/{ROUNDS}"
                if gpu_fired or launch_fired:
                    noisy_rows.append(f"{r.label} {r.impl}: GPU time {'; '.join(gpu_fired) or '-'} | "
                                      f"launch time {'; '.join(launch_fired) or '-'}")
                mark = "" if abs(ratio - 1) <= tolerance else f"  <-- off by more than {100 * tolerance:.0f}%"
                if mark and not judged:
                    mark += " (not judged)"
                sets = f" {r.rotation_sets:4d}" if user else ""
                spread = f"{spread_pct([t.median_us for t in r.gpu]):.1f}|{spread_pct(r.theirs):.1f}"
                print(f"{r.label:<{width}} {r.impl:<{iw}} {ours:9.2f} {ref:9.2f} {ratio:6.3f}{sets} {spread:>11}  "
                      f"{sum(t.n for t in r.gpu):4d} {100 * last.cv:5.1f} {100 * last.iqr_us / last.median_us:5.1f} "
                      f"{spikes:6d}  {r.launch[-1].median_us:8.2f} {100 * r.launch[-1].cv:5.1f}  {fired:<20} "
                      f"{r.ours_state} | {r.their_state}{mark}")
    nvml.shutdown()
    judged_rows = "; only the rows with L2 not kept cold decide" if user else ""
    print(f"largest deviation from do_bench_cudagraph: {100 * worst:.2f}% (allowed {100 * tolerance:.0f}%"
          f"{judged_rows})")
    if user:
        print(f"largest deviation of the{COLD} rows: {100 * worst_cold:.2f}% (printed, not judged)")
    print(f"rows the noisy flag fires on (CV > {100 * NOISY_CV:.0f}% or IQR > {100 * NOISY_IQR:.0f}% of the median, "
          f"GPU or launch time, in any of {ROUNDS} rounds): {len(noisy_rows)}")
    for row in noisy_rows:
        print(f"  {row}")
    return 0 if worst <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
