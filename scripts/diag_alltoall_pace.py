"""What sets the pace of all_to_all at 16-64 MiB on 2 x H100 from one burst of replays to the next.

    torchrun --nproc-per-node 2 scripts/diag_alltoall_pace.py [--rounds 8] [--mib 16 64] [--ways W ...]
                                                             [--communicators K]

Evidence (2 x H100, the processes of each call one after the other): 1123Z ``--skew-us 20`` then ``60`` (the
first three ways; its lines did not yet show the first replays), 1124Z two processes of ``--ways loose idle5
idle50 nvml warm``, 1125Z three of ``--rounds 6 --mib 64 --ways loose --communicators 6``, 1142Z four of
``--rounds 4 --mib 64 --ways loose --communicators 6`` with ``--alloc torch``, ``nccl``, ``torch``, ``nccl``:
reports/device-logs/2026-11-26_112[345]Z_* and 2026-11-26_1142Z_2x-h100_diag_alloc.log.

reports/device-logs/2026-11-26_1119Z_2x-h100_diag_alltoall_mid.log: all_to_all at 64 MiB read about 241 or about
225 GB/s busbw from one round to the next, one graph replayed in every round moving as much as graphs captured
afresh, so the pace is not the capture's; nccl-tests read the fast pace in all 42 of its cycles meanwhile. Its
rounds were apart by NVML queries and a gather of their answers. Here one graph per size (two sets of buffers
cycled through in 8 calls, as the node sweep times 64 MiB) is replayed ``REPLAYS`` times a round, the ways in
turn:

- ``loose``: after a host barrier, each rank's host queues the replays when it gets there (as the node sweep);
- ``aligned``: each GPU first sleeps about 1 ms (``torch.cuda._sleep``) while its host queues a one-element
  all_reduce (the gate) and the replays behind it, so both GPUs start the replays as the gate ends, together;
- ``skewed``: as ``aligned``, but rank 1's GPU sleeps ``--skew-us`` (20) more after the gate;
- ``idle5``, ``idle50``: as ``loose``, the GPUs idle 5 or 50 ms first (the host sleeps);
- ``nvml``: as ``loose``, after NVML's clocks, power and throttle reasons are read, as the 1119Z rounds did;
- ``warm``: as ``idle50``, then 20 untimed replays before the timed ones;

and with ``--communicators K`` (1), the whole of it again on each of K communicators of the same ranks
(``dist.new_group``: NCCL's own buffers and connections made afresh), each line naming its communicator; with
``--alloc nccl`` the buffers come from NCCL's allocator (``ncclMemAlloc``, as nccl-tests allocates them) instead
of torch's caching allocator.

Rank 0 prints one line per round: the median GPU time per call, its busbw, the fastest and slowest replay and
the first three. A way that always lands in one pace tells what moves it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag_dist import alltoall_graph, start  # noqa: E402 - the project root is on the path first

REPLAYS = 20
CALLS = 8
MiB = 1 << 20


def main() -> int:
    from envcheck.analysis.collectives import bandwidths_gbps, layout

    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--mib", nargs="+", type=int, default=[16, 64])
    p.add_argument("--skew-us", type=float, default=20.0)
    p.add_argument("--ways", nargs="+", default=["loose", "aligned", "skewed"])
    p.add_argument("--communicators", type=int, default=1)
    p.add_argument("--alloc", choices=("torch", "nccl"), default="torch")
    a = p.parse_args()
    torch, dist, rank, world, local = start()
    clock_khz = torch.cuda.get_device_properties(local).clock_rate  # the SM clock the sleep counts in
    gate = torch.zeros(1, device="cuda")
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{torch.cuda.get_device_properties(local).uuid}")

    def cycles(us: float) -> int:
        return int(us * clock_khz / 1e3)

    for c in range(a.communicators):
        group = dist.new_group(list(range(world))) if c else None
        for size in (s * MiB for s in a.mib):
            lay = layout("all_to_all", size, world, 4)
            if a.alloc == "nccl":  # ncclMemAlloc, as nccl-tests allocates its buffers
                pool = torch.cuda.MemPool(dist.group.WORLD._get_backend(torch.device("cuda")).mem_allocator)
                with torch.cuda.use_mem_pool(pool):
                    sets = [(torch.ones(lay.send, device="cuda"), torch.empty(lay.recv, device="cuda"))
                            for _ in range(2)]
            else:
                sets = [(torch.ones(lay.send, device="cuda"), torch.empty(lay.recv, device="cuda")) for _ in range(2)]
            for i in range(4):
                dist.all_to_all_single(sets[i % 2][1], sets[i % 2][0], group=group)
            torch.cuda.synchronize()
            graph = alltoall_graph(torch, dist, sets, CALLS, group)
            for i in range(a.rounds):
                for way in a.ways:
                    dist.barrier()
                    torch.cuda.synchronize()
                    if way in ("idle5", "idle50", "warm"):
                        time.sleep(0.005 if way == "idle5" else 0.05)
                    if way == "nvml":
                        pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
                        pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)
                        pynvml.nvmlDeviceGetPowerUsage(handle)
                        pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
                    if way == "warm":
                        for _ in range(REPLAYS):
                            graph.replay()
                    if way in ("aligned", "skewed"):
                        torch.cuda._sleep(cycles(1000.0))
                        dist.all_reduce(gate)
                        if way == "skewed" and rank == 1:
                            torch.cuda._sleep(cycles(a.skew_us))
                    events = [torch.cuda.Event(enable_timing=True) for _ in range(REPLAYS + 1)]
                    events[0].record()
                    for j in range(REPLAYS):
                        graph.replay()
                        events[j + 1].record()
                    torch.cuda.synchronize()
                    us = [x.elapsed_time(y) * 1e3 / CALLS for x, y in zip(events[:-1], events[1:], strict=True)]
                    med = statistics.median(us)
                    busbw = bandwidths_gbps("all_to_all", lay.size_bytes, world, med)[1] or 0.0
                    if rank == 0:
                        print(f"{a.alloc} comm {c} all_to_all {size // MiB:>3} MiB {way:<7} round {i}: GPU {med:7.1f} us busbw {busbw:6.1f}"
                              f" GB/s (replays {min(us):7.1f}-{max(us):7.1f} us, first "
                              + " ".join(f"{x:.1f}" for x in us[:3]) + ")", flush=True)
            graph.reset()
            del sets, graph
            torch.cuda.empty_cache()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
