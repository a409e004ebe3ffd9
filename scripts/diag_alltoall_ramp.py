"""How all_to_all's pace at 16 and 64 MiB evolves inside one long burst of graph replays, and what a warm-up
before the timed replays does to envcheck's GPU time.

    torchrun --nproc-per-node 2 scripts/diag_alltoall_ramp.py [--mib 16 64] [--trials 4] [--idle-ms 0 50 500]
                                                              [--burst-ms 600] [--communicators 3]
                                                              [--warm-us 0 50000 ...] [--rounds 6] [--clocks]

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
   With ``--clocks`` each rank reads its GPU's SM and memory clocks, clock event reasons and NVLink error counters
   from NVML through every burst (``diag_clocks.Poller``), and rank 0 prints each rank's lowest SM clock, the
   reasons seen and the link counters' growth in each window, then how the slow windows' clocks compare with the
   fast ones'.
   With ``--no-split`` every communicator is made afresh (the process group is not bound to a GPU, so
   ``new_group`` does not split from the first; nccl-tests makes its one communicator so).
2. ``measure``: ``CollectiveBench.measure`` as the node sweep calls it (``COMMUNICATORS`` of them), ``--rounds``
   times for each value of ``collective_bench.GRAPH_WARM_US`` in ``--warm-us`` in turn; rank 0 prints the median
   GPU time's busbw, its replays' range and how many of them ran at the slow pace.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag_dist import alltoall_graph, start  # noqa: E402 - the project root is on the path first

MiB = 1 << 20
WINDOWS_MS = (0, 2, 5, 10, 20, 50, 100, 200, 400)
SLOW = 1.03  # a replay this much slower than the burst's fastest decile is at the slow pace


def slow_share(us: list[float]) -> tuple[int, int]:
    """(replays at the slow pace, replays) of one burst or capture pool."""
    fast = sorted(us)[max(0, len(us) // 10 - 1)]
    return sum(x > SLOW * fast for x in us), len(us)


def clock_lines(dist: Any, rank: int, world: int, reads: list[Any], bws: list[float | None], end_ms: float,
                seen: list[tuple[float, list[Any]]]) -> None:
    """Each rank's clocks and link counters in each window of one burst, printed by rank 0 under its line; the
    windows past the first 2 ms join ``seen``."""
    from diag_clocks import LINK_COUNTERS, window

    mine = [window(reads, lo, hi if hi != math.inf else end_ms + 1)
            for lo, hi in zip(WINDOWS_MS, (*WINDOWS_MS[1:], math.inf), strict=True)]
    every: list[Any] = [None] * world
    dist.all_gather_object(every, mine)
    if rank != 0:
        return
    for r, windows in enumerate(every):
        sm = " ".join(f"{w[0]:5d}" if w else "   - " for w in windows)
        mem = sorted({w[1] for w in windows if w})
        reasons = sorted({w[2] for w in windows if w})
        grew = [w[3] for w in windows if w and w[3]]
        links = ({name: sum(g[i] for g in grew) for i, (name, _) in enumerate(LINK_COUNTERS)} if grew else "-")
        print(f"     rank {r} sm MHz: {sm} | mem {mem} reasons {[hex(x) for x in reasons]} links {links}", flush=True)
    for i, bw in enumerate(bws):
        if bw is not None and WINDOWS_MS[i] >= 2 and all(w[i] for w in every):
            seen.append((bw, [w[i] for w in every]))


def clock_summary(seen: list[tuple[float, list[Any]]]) -> None:
    """Slow windows (busbw over 3% below the fastest window's) against the rest: each rank's lowest SM clock,
    the reasons seen and the link counters' growth."""
    if not seen:
        return
    top = max(bw for bw, _ in seen)
    for name, keep in (("slow", lambda bw: bw < top / SLOW), ("fast", lambda bw: bw >= top / SLOW)):
        part = [ranks for bw, ranks in seen if keep(bw)]
        if not part:
            print(f"clocks {name} windows: none", flush=True)
            continue
        for r in range(len(part[0])):
            sm = sorted(w[r][0] for w in part)
            reasons = sorted({w[r][2] for w in part})
            grew = [w[r][3] for w in part if w[r][3]]
            print(f"clocks {name} windows ({len(part)}), rank {r}: lowest SM {sm[0]}-{sm[-1]} MHz "
                  f"(median {sm[len(sm) // 2]}), reasons {[hex(x) for x in reasons]}, "
                  f"windows with link counters growing {sum(any(g) for g in grew)}/{len(grew)}", flush=True)


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
    p.add_argument("--clocks", action="store_true", help="read clocks and NVLink counters through every burst")
    a = p.parse_args()
    torch, dist, rank, world, local = start(split=not a.no_split)

    from envcheck.analysis.collectives import bandwidths_gbps, layout
    from envcheck.node import collective_bench
    from envcheck.node.collective_bench import CollectiveBench, calls_per_graph, whole_cycles

    poller = None
    if a.clocks:
        from diag_clocks import Poller
        poller = Poller(local)
    seen: list[tuple[float, list[Any]]] = []  # (a window's busbw, each rank's diag_clocks.window there)
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
                    if poller is not None:
                        poller.start()
                    events[0].record()
                    for j in range(replays):
                        graph.replay()
                        events[j + 1].record()
                    torch.cuda.synchronize()
                    reads = poller.stop() if poller is not None else []
                    at_ms = [events[0].elapsed_time(e) for e in events[1:]]
                    us = [x.elapsed_time(y) * 1e3 / calls for x, y in zip(events[:-1], events[1:], strict=True)]
                    cells, bws = [], []
                    for lo, hi in zip(WINDOWS_MS, (*WINDOWS_MS[1:], math.inf), strict=True):
                        inside = [u for t, u in zip(at_ms, us, strict=True) if lo <= t < hi]
                        bws.append(busbw(size, statistics.median(inside)) if inside else None)
                        cells.append(f"{bws[-1]:5.1f}" if inside else "   - ")
                    slow, n = slow_share(us)
                    if rank == 0:
                        print(f"ramp comm {c} {size // MiB:>3} MiB x{calls:<3} idle {idle:5.0f} ms trial {trial}: "
                              + " ".join(cells) + f" | slow {slow:3d}/{n} | {at_ms[-1]:5.0f} ms", flush=True)
                    if poller is not None:
                        clock_lines(dist, rank, world, reads, bws, at_ms[-1], seen)
            graph.reset()
            del sets, graph
            torch.cuda.empty_cache()
        if group is not None:
            dist.destroy_process_group(group)
    if rank == 0:
        print("ramp windows (ms): " + " ".join(f"{lo}-" for lo in WINDOWS_MS), flush=True)
        if poller is not None:
            clock_summary(seen)

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
