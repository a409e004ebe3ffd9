"""Where a small collective's GPU time goes: NCCL's kernel, or the gap before the next one.

    torchrun --nproc-per-node 2 scripts/diag_collective_gaps.py [--sizes 1M,4M,16M]

For each collective and size, on every rank's GPU (the table is rank 0's):

- ``envcheck``: the GPU time per call envcheck's node sweep measures (``CollectiveBench.measure``:
  calls captured in a CUDA graph, replays timed with CUDA events);
- ``kernel`` and ``gap``: the same calls captured ``CALLS`` times in one graph and replayed under
  ``torch.profiler`` (CUPTI): the median duration of NCCL's kernels, and the median time from one
  kernel's end to the next one's start inside a replay;
- ``async``: the per-call time of a graph of the same calls made with ``async_op=True`` (torch adds
  no wait on the caller's stream per call; one wait at the end), timed as envcheck times its graphs.

A GPU time above nccl-tests' (-G) at small sizes comes either from a longer kernel (a different
configuration of NCCL) or from the gap between kernels (what torch puts between two captured calls).
Run on 2 x H200 with NCCL's defaults: evidence/device-logs/2026-11-26_0004Z_2x-h200_nccl-tests.tgz
(collective_gaps.txt: gaps of 5-24 us between kernels of 8-12 us); scripts/diag_graph_calls.py found
which setting makes them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CALLS = 50
REPLAYS = 20


def main() -> int:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from envcheck.analysis.collectives import layout
    from envcheck.node.collective_bench import CollectiveBench

    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1M,4M,16M")
    a = p.parse_args()
    sizes = [int(s[:-1]) << 20 for s in a.sizes.split(",")]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl", device_id=torch.device("cuda", int(os.environ["LOCAL_RANK"])))
    bench = CollectiveBench(torch, dist, f"cuda:{int(os.environ['LOCAL_RANK'])}", rank, world)
    ranks = tuple(range(world))
    if rank == 0:
        print(f"{torch.cuda.get_device_name()} x {world}; torch {torch.__version__}, NCCL {torch.cuda.nccl.version()}")
        print(f"{'op':<15}{'size':>6}{'envcheck us':>13}{'calls':>7}{'kernel us':>11}{'gap us':>8}{'async us':>10}")
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"):
        for size in sizes:
            m = bench.measure(op, size, ranks, None, 5, 20)
            envcheck = statistics.median(m.gpu_samples_us) if m.gpu_samples_us else float("nan")
            lay = layout(op, size, world, 4)
            send = torch.ones(lay.send, device="cuda")
            recv = torch.empty(lay.recv, device="cuda") if op not in ("all_reduce", "broadcast") else None

            def call(async_op: bool = False, send=send, recv=recv, op=op):
                return _call(dist, op, send, recv, async_op)

            for _ in range(3):
                call()
            torch.cuda.synchronize()
            kernel, gap = _profiled(torch, profile, ProfilerActivity, call)
            per_async = _async_graph(torch, call)
            if rank == 0:
                print(f"{op:<15}{size >> 20:>5}M{envcheck:>13.2f}{m.gpu_calls:>7}{kernel:>11.2f}{gap:>8.2f}"
                      f"{per_async:>10.2f}", flush=True)
            del send, recv
    dist.destroy_process_group()
    return 0


def _call(dist, op, send, recv, async_op):
    if op == "all_reduce":
        return dist.all_reduce(send, async_op=async_op)
    if op == "broadcast":
        return dist.broadcast(send, src=0, async_op=async_op)
    if op == "all_gather":
        return dist.all_gather_into_tensor(recv, send, async_op=async_op)
    if op == "reduce_scatter":
        return dist.reduce_scatter_tensor(recv, send, async_op=async_op)
    return dist.all_to_all_single(recv, send, async_op=async_op)


def capture(torch, body):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        body()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        body()
    return g


def _profiled(torch, profile, activity, call):
    """(median NCCL kernel duration, median gap between consecutive NCCL kernels), us, over 2 replays."""
    g = capture(torch, lambda: [call() for _ in range(CALLS)])
    g.replay()
    torch.cuda.synchronize()
    with profile(activities=[activity.CUDA]) as prof:
        g.replay()
        g.replay()
        torch.cuda.synchronize()
    g.reset()
    with tempfile.TemporaryDirectory() as d:
        prof.export_chrome_trace(f"{d}/trace.json")
        trace = json.loads(Path(f"{d}/trace.json").read_text())
    ks = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in trace.get("traceEvents", [])
                if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower())
    if len(ks) < 2:
        return float("nan"), float("nan")
    durations = [e - s for s, e in ks]
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(ks) if b[0] - a[1] < 100]  # within a replay
    return statistics.median(durations), statistics.median(gaps) if gaps else float("nan")


def _async_graph(torch, call):
    def body():
        works = [call(async_op=True) for _ in range(CALLS)]
        works[-1].wait()

    return per_call_us(torch, capture(torch, body), CALLS)


def per_call_us(torch, g, calls: int) -> float:
    """Median time per call of ``REPLAYS`` back-to-back replays of ``g`` (``calls`` calls each), after one
    untimed replay; the graph is freed."""
    g.replay()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(REPLAYS + 1)]
    ev[0].record()
    for i in range(REPLAYS):
        g.replay()
        ev[i + 1].record()
    torch.cuda.synchronize()
    g.reset()
    return statistics.median(a.elapsed_time(b) * 1e3 / calls for a, b in itertools.pairwise(ev))


if __name__ == "__main__":
    sys.exit(main())
