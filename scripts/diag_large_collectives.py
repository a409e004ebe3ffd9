"""Where all_gather and reduce_scatter at 1-4 GiB move from run to run: the buffers, the clocks, or the process.

    torchrun --nproc-per-node 2 scripts/diag_large_collectives.py [--rounds 5] [--ops OP ...] [--mib S ...]

On 2 x H100 (reports/device-logs/2026-11-26_0759Z_2x-h100_node_vs_nccl-tests.md) reduce_scatter at 4 GiB read
304.5 GB/s busbw in one node run and 275.5 in the next, nccl-tests' own three runs 283.4-289.6; all_gather at 1 GiB
267.5 against 269.3-275.3. For each of the two ops at 1 and 4 GiB, rank 0 prints one line per round:

- ``fresh``: ``CollectiveBench.measure`` as the node sweep calls it, on one communicator (its own buffers,
  allocated and freed each round, cudaFree'd by ``empty_cache``): median GPU time per call and its busbw, the
  per-call (eager) median;
- ``single`` (with ``--single``): one fresh set of buffers a round (the last freed and the cache emptied first),
  no rotation, a one-call graph replayed ``REPLAYS`` times;
- ``same``: one set of buffers for every round, a one-call graph replayed ``REPLAYS`` times a round;
- ``held`` and ``new`` (with ``--held``): on one set of buffers, one graph captured once and replayed ``REPLAYS``
  times in every round (``held``), and in each round after it a graph captured afresh, replayed as often and
  dropped (``new``): ``held`` steady while ``new`` moves ties a pace to the capture, not to the time;

each with this rank's SM and memory clocks, power draw and NVML's throttle reasons read just after the round.
Rounds of ``fresh`` (or ``single``) apart by more than ``same`` point at where the buffers land; ``same`` moving
too points at the GPU or its links over time. ``--ops`` and ``--mib`` pick other collectives and sizes (all_to_all
at 16-256 MiB for scripts/diag_alltoall_mid.sh).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag_dist import start  # noqa: E402 - the project root is on the path first

REPLAYS = 20
MiB = 1 << 20


def main() -> int:
    import pynvml

    from envcheck.analysis.collectives import bandwidths_gbps, layout
    from envcheck.node.collective_bench import CollectiveBench

    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ops", nargs="+", default=["all_gather", "reduce_scatter"])
    p.add_argument("--mib", nargs="+", type=int, default=[1024, 4096])
    p.add_argument("--single", action="store_true")
    p.add_argument("--held", action="store_true")
    a = p.parse_args()
    torch, dist, rank, world, local = start()
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
            print(f"{op:<15}{size // MiB:>5} MiB {mode:<6} round {i}: GPU {gpu_us:8.1f} us busbw {busbw:6.1f} GB/s"
                  f"{eager} | " + " | ".join(f"r{r} {s}" for r, s in enumerate(states)), flush=True)

    if rank == 0:
        print(f"{torch.cuda.get_device_name()} x {world}; torch {torch.__version__}, NCCL {torch.cuda.nccl.version()}",
              flush=True)
    def one_set(op: str, size: int) -> tuple[object, object]:
        lay = layout(op, size, world, 4)
        send, recv = torch.ones(lay.send, device="cuda"), torch.empty(lay.recv, device="cuda")
        for _ in range(5):
            bench._call(op, send, recv, None, 0)
        torch.cuda.synchronize()
        return send, recv

    def replayed(op: str, size: int, mode: str, i: int, send: object, recv: object) -> None:
        samples, _reason, error = bench._gpu_time(op, [(send, recv)], None, 0, 1, REPLAYS)
        if samples:
            line(op, size, mode, i, statistics.median(samples), None)
        elif rank == 0:
            print(f"{op} {size // MiB} MiB {mode} round {i}: {error}")

    for op in a.ops:
        for size in (s * MiB for s in a.mib):
            for i in range(a.rounds):
                m = bench.measure(op, size, ranks, None, warmup=5, iters=REPLAYS)
                if m.error or m.skipped or not m.gpu_samples_us:
                    if rank == 0:
                        print(f"{op} {size // MiB} MiB fresh round {i}: {m.error or m.skipped or m.gpu_reason}")
                    continue
                line(op, size, "fresh", i, statistics.median(m.gpu_samples_us), statistics.median(m.samples_us))
            for i in range(a.rounds if a.single else 0):
                send, recv = one_set(op, size)
                replayed(op, size, "single", i, send, recv)
                del send, recv
                torch.cuda.empty_cache()
            send, recv = one_set(op, size)
            for i in range(a.rounds):
                replayed(op, size, "same", i, send, recv)
            if a.held:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                    bench._call(op, send, recv, None, 0)
                graph.replay()
                for i in range(a.rounds):
                    events = [torch.cuda.Event(enable_timing=True) for _ in range(REPLAYS + 1)]
                    events[0].record()
                    for j in range(REPLAYS):
                        graph.replay()
                        events[j + 1].record()
                    torch.cuda.synchronize()
                    line(op, size, "held", i, statistics.median(x.elapsed_time(y) * 1e3 for x, y in
                                                                zip(events[:-1], events[1:], strict=True)), None)
                    replayed(op, size, "new", i, send, recv)
                graph.reset()
            del send, recv
            torch.cuda.empty_cache()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
