"""Where all_gather and reduce_scatter at 1-4 GiB move from run to run: the buffers, the clocks, or the process.

    torchrun --nproc-per-node 2 scripts/diag_large_collectives.py [--rounds 5]

On 2 x H100 (reports/device-logs/2026-11-26_0759Z_2x-h100_node_vs_nccl-tests.md) reduce_scatter at 4 GiB read
304.5 GB/s busbw in one node run and 275.5 in the next, nccl-tests' own three runs 283.4-289.6; all_gather at 1 GiB
267.5 against 269.3-275.3. For each of the two ops at 1 and 4 GiB, rank 0 prints one line per round:

- ``fresh``: ``CollectiveBench.measure`` as the node sweep calls it (its own buffers, allocated and freed each
  round, cudaFree'd by ``empty_cache``): median GPU time per call and its busbw, the per-call (eager) median;
- ``same``: one set of buffers for every round, a one-call graph replayed ``REPLAYS`` times a round;

each with this rank's SM and memory clocks, power draw and NVML's throttle reasons read just after the round.
Rounds of ``fresh`` apart by more than ``same`` point at where the buffers land; ``same`` moving too points at
the GPU or its links over time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPLAYS = 20
GiB = 1 << 30


def main() -> int:
    from envcheck.node.collective_worker import GRAPH_TIMING_ENV

    os.environ.update(GRAPH_TIMING_ENV)
    import pynvml
    import torch
    import torch.distributed as dist

    from envcheck.analysis.collectives import bandwidths_gbps, layout
    from envcheck.node.collective_bench import CollectiveBench

    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    bench = CollectiveBench(torch, dist, f"cuda:{local}", rank, world)
    pynvml.nvmlInit()
    # This rank's GPU by its UUID (NVML counts every GPU; torch only the visible ones).
    handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{torch.cuda.get_device_properties(local).uuid}")
    ranks = tuple(range(world))

    def gpu_state() -> str:
        sm = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        mem = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)
        watts = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000
        reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        return f"sm {sm} MHz mem {mem} MHz {watts:.0f} W throttle 0x{reasons:x}"

    def line(op: str, size: int, mode: str, i: int, gpu_us: float, eager_us: float | None) -> None:
        busbw = bandwidths_gbps(op, layout(op, size, world, 4).size_bytes, world, gpu_us)[1] or 0.0
        states = [None] * world
        dist.all_gather_object(states, gpu_state())
        if rank == 0:
            eager = f" eager {eager_us:8.1f} us" if eager_us is not None else ""
            print(f"{op:<15}{size // GiB:>2} GiB {mode:<6} round {i}: GPU {gpu_us:8.1f} us busbw {busbw:6.1f} GB/s"
                  f"{eager} | " + " | ".join(f"r{r} {s}" for r, s in enumerate(states)), flush=True)

    if rank == 0:
        print(f"{torch.cuda.get_device_name()} x {world}; torch {torch.__version__}, NCCL {torch.cuda.nccl.version()}",
              flush=True)
    for op in ("all_gather", "reduce_scatter"):
        for size in (GiB, 4 * GiB):
            for i in range(a.rounds):
                m = bench.measure(op, size, ranks, None, warmup=5, iters=REPLAYS)
                if m.error or m.skipped or not m.gpu_samples_us:
                    if rank == 0:
                        print(f"{op} {size // GiB} GiB fresh round {i}: {m.error or m.skipped or m.gpu_reason}")
                    continue
                line(op, size, "fresh", i, statistics.median(m.gpu_samples_us), statistics.median(m.samples_us))
            lay = layout(op, size, world, 4)
            send = torch.ones(lay.send, device="cuda")
            recv = torch.empty(lay.recv, device="cuda")

            def call(send=send, recv=recv, op=op) -> None:
                bench._call(op, send, recv, None, 0)

            for _ in range(5):
                call()
            torch.cuda.synchronize()
            for i in range(a.rounds):
                samples, _reason, error = bench._gpu_time(op, [(send, recv)], None, 0, 1, REPLAYS)
                if samples:
                    line(op, size, "same", i, statistics.median(samples), None)
                elif rank == 0:
                    print(f"{op} {size // GiB} GiB same round {i}: {error}")
            del send, recv, call
            torch.cuda.empty_cache()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
