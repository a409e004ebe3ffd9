"""How all_to_all's pace at 16 and 64 MiB evolves inside one long burst of graph replays, and what a warm-up
before the timed replays does to envcheck's GPU time.

    torchrun --nproc-per-node 2 scripts/diag_alltoall_ramp.py [--mib 16 64] [--trials 4] [--idle-ms 0 50 500]
                                                              [--burst-ms 600] [--communicators 3]
                                                              [--warm-us 0 50000 ...] [--rounds 6]

nccl-tests' all_to_all at 64 MiB read the slow pace (about 225 GB/s busbw against 241) in 14 of 42 cycles of
100 calls and in none of 21 cycles of 4000 (reports/device-logs/2026-11-26_1257Z_2x-h100_diag_alltoall_draws.log),
and envcheck's 24 replays of 8 calls split between the two paces in 3 of 8 node runs (1309Z-1326Z).

1. ``ramp``: on each of ``--communicators`` communicators of the same ranks, one graph per size (two sets of
   buffers cycled through, as the node sweep times these sizes; calls sized to a replay of about 1 ms), then
   ``--trials`` bursts after each idle gap of ``--idle-ms`` (a host barrier, then the host sleeps): replays back
   to back for ``--burst-ms``, a CUDA event between replays. Rank 0 prints one line per burst: the busbw of the
   median replay in each window of the burst (0-2, 2-5, 5-10, 10-20, 20-50, 50-100, 100-200, 200-400 and
   400 ms to the end) and the share of replays at the slow pace (over 3% slower than the burst's fastest
   decile).
   With ``--no-split`` every communicator is made afresh (the process group is not bound to a GPU, so
   ``new_group`` does not split from the first; nccl-tests makes its one communicator so).
2. ``measure``: ``CollectiveBench.measure`` as the node sweep calls it (six communicators), ``--rounds`` times for
   each value of ``collective_bench.GRAPH_WARM_US`` in ``--warm-us`` in turn; rank 0 prints the median GPU time's
   busbw, its replays' range and how many of them ran at the slow pace.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag_dist import alltoall_graph, start  # noqa: E402 - the project root is on the path first

MiB = 1 << 20
WINDOWS_MS = (0, 2, 5, 10, 20, 50, 100, 200, 400)
SLOW = 1.03  # a replay this much slower than the burst's fastest decile is at the slow pace


def slow_share(us: list[float]) -> tuple[int, int]:
    """(replays at the slow pace, replays) of one burst or capture pool."""
    fast = sorted(us)[max(0, len(us) // 10 - 1)]
    return sum(x > SLOW * fast for x in us), len(us)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mib", nargs="+", type=int, default=[16, 64])
    p.add_argument("--trials", type=int, default=4)
    p.add_argument("--idle-ms", nargs="+", type=float, default=[0.0, 50.0, 500.0])
    p.add_argument("--burst-ms", type=float, default=600.0)
    p.add_argument("--communicators", type=int, default=3)
    p.add_argument("--warm-us", nargs="*", type=float, default=[0.0, 50_000.0, 200_000.0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--no-split", action="store_true",
                   help="make each communicator afresh (ncclCommInitRank) rather than split from the first")
    a = p.parse_args()
    torch, dist, rank, world, local = start(split=not a.no_split)

    from envcheck.analysis.collectives import bandwidths_gbps, layout
    from envcheck.node import collective_bench
    from envcheck.node.collective_bench import CollectiveBench, calls_per_graph, whole_cycles

    bench = CollectiveBench(torch, dist, f"cuda:{local}", rank, world)
    ranks = tuple(range(world))

    def busbw(size: int, us: float) -> float:
        return bandwidths_gbps("all_to_all", layout("all_to_all", size, world, 4).size_bytes, world, us)[1] or 0.0

    def agreed_max(value: int) -> int:
        t = torch.tensor([value], dtype=torch.int64, device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    if rank == 0:
        print(f"{torch.cuda.get_device_name()} x {world}; torch {torch.__version__}, NCCL {torch.cuda.nccl.version()}",
              flush=True)
    for c in range(a.communicators):
        group = dist.new_group(list(ranks)) if c else None
        for size in (s * MiB for s in a.mib):
            lay = layout("all_to_all", size, world, 4)
            sets = [(torch.ones(lay.send, device="cuda"), torch.empty(lay.recv, device="cuda")) for _ in range(2)]
            for i in range(10):
                dist.all_to_all_single(sets[i % 2][1], sets[i % 2][0], group=group)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(20):
                dist.all_to_all_single(sets[i % 2][1], sets[i % 2][0], group=group)
            torch.cuda.synchronize()
            per_call = agreed_max(math.ceil((time.perf_counter() - t0) / 20 * 1e6))
            calls = whole_cycles(calls_per_graph(float(per_call)), 2)
            graph = alltoall_graph(torch, dist, sets, calls, group)
            replays = agreed_max(math.ceil(a.burst_ms * 1e3 / (per_call * calls)))
            for trial in range(a.trials):
                for idle in a.idle_ms:
                    dist.barrier(group=group)
                    torch.cuda.synchronize()
                    time.sleep(idle / 1e3)
                    events = [torch.cuda.Event(enable_timing=True) for _ in range(replays + 1)]
                    events[0].record()
                    for j in range(replays):
                        graph.replay()
                        events[j + 1].record()
                    torch.cuda.synchronize()
                    at_ms = [events[0].elapsed_time(e) for e in events[1:]]
                    us = [x.elapsed_time(y) * 1e3 / calls for x, y in zip(events[:-1], events[1:], strict=True)]
                    cells = []
                    for lo, hi in zip(WINDOWS_MS, (*WINDOWS_MS[1:], math.inf), strict=True):
                        inside = [u for t, u in zip(at_ms, us, strict=True) if lo <= t < hi]
                        cells.append(f"{busbw(size, statistics.median(inside)):5.1f}" if inside else "   - ")
                    slow, n = slow_share(us)
                    if rank == 0:
                        print(f"ramp comm {c} {size // MiB:>3} MiB x{calls:<3} idle {idle:5.0f} ms trial {trial}: "
                              + " ".join(cells) + f" | slow {slow:3d}/{n} | {at_ms[-1]:5.0f} ms", flush=True)
            graph.reset()
            del sets, graph
            torch.cuda.empty_cache()
        if group is not None:
            dist.destroy_process_group(group)
    if rank == 0:
        print("ramp windows (ms): " + " ".join(f"{lo}-" for lo in WINDOWS_MS), flush=True)

    more = bench.more_communicators(ranks, ("all_to_all",)) if a.warm_us else ()
    for warm in a.warm_us:
        collective_bench.GRAPH_WARM_US = warm
        for size in (s * MiB for s in a.mib):
            for i in range(a.rounds):
                t0 = time.perf_counter()
                m = bench.measure("all_to_all", size, ranks, None, warmup=5, iters=24, more_groups=more)
                took = time.perf_counter() - t0
                if rank != 0:
                    continue
                if m.error or m.skipped or not m.gpu_samples_us:
                    print(f"measure warm {warm / 1e3:5.0f} ms {size // MiB} MiB round {i}: "
                          f"{m.error or m.skipped or m.gpu_reason}", flush=True)
                    continue
                g = list(m.gpu_samples_us)
                slow, n = slow_share(g)
                print(f"measure warm {warm / 1e3:5.0f} ms {size // MiB:>3} MiB round {i}: busbw "
                      f"{busbw(size, statistics.median(g)):6.1f} GB/s (replays {busbw(size, max(g)):6.1f}-"
                      f"{busbw(size, min(g)):6.1f}, slow {slow}/{n}, x{m.gpu_calls}, {m.captures} captures) {took:5.1f} s",
                      flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
