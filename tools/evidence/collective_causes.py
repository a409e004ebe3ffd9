"""Why envcheck's collective numbers and nccl-tests' differ, one torchrun launch (one process per GPU):
``torchrun --nproc-per-node N tools/evidence/collective_causes.py [--sizes 4M,64M,...] [--ops ...]``.

For each op and size, on two kinds of buffers:
  plain   torch's caching allocator (cudaMalloc): what an ordinary torch program passes NCCL;
  ncclmem torch's NCCL memory pool (ncclMemAlloc, cuMem): buffers NCCL may register for zero-copy
          transfers, as it registers a captured graph's buffers when it can (NCCL_GRAPH_REGISTER);
each timed three ways, every rank's time printed and their mean and max:
  loop    ITERS back-to-back calls between two CUDA events (a torch.distributed caller's loop);
  graph   CALLS calls captured in one CUDA graph, replayed REPLAYS times after WARM untimed replays;
  marks   (1 MiB and below) a CUDA event between every call, as envcheck's per-call column does, and
          the loop again on rotating buffers (L2 cold).
busbw uses nccl-tests' factors (envcheck.analysis.node). Rank 0 prints one line per (op, size, buffers, way).
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch
import torch.distributed as dist

from envcheck.analysis.collectives import bandwidths_gbps, layout

MIB = 1 << 20


def call(op: str, send: torch.Tensor, recv: torch.Tensor | None) -> None:
    if op == "all_reduce":
        dist.all_reduce(send)
    elif op == "broadcast":
        dist.broadcast(send, src=0)
    elif op == "all_gather":
        dist.all_gather_into_tensor(recv, send)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(recv, send)
    elif op == "all_to_all":
        dist.all_to_all_single(recv, send)


def timed_loop(op: str, sets: list, iters: int) -> float:
    for i in range(5):
        call(op, *sets[i % len(sets)])
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for i in range(iters):
        call(op, *sets[i % len(sets)])
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / iters


def timed_marks(op: str, sets: list, iters: int) -> float:
    for i in range(5):
        call(op, *sets[i % len(sets)])
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    ev[0].record()
    for i in range(iters):
        call(op, *sets[i % len(sets)])
        ev[i + 1].record()
    torch.cuda.synchronize()
    return statistics.fmean(x.elapsed_time(y) * 1e3 for x, y in zip(ev[:-1], ev[1:], strict=True))


def timed_graph(op: str, sets: list, calls: int, replays: int, warm: int) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call(op, *sets[0])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        for i in range(calls):
            call(op, *sets[i % len(sets)])
    for _ in range(warm):
        g.replay()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    g.reset()
    return a.elapsed_time(b) * 1e3 / (replays * calls)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1M,4M,16M,64M,256M,1G")
    p.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter,all_to_all,broadcast")
    p.add_argument("--kinds", default="plain,ncclmem")
    a = p.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device(f"cuda:{local}"))
    n, rank = dist.get_world_size(), dist.get_rank()
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cuda"))
    pool = None
    try:
        pool = torch.cuda.MemPool(backend.mem_allocator)
    except Exception as e:  # noqa: BLE001
        if rank == 0:
            print(f"no NCCL memory pool: {type(e).__name__}: {e}", flush=True)
    sizes = [int(s[:-1]) * (MIB if s[-1] == "M" else 1024 * MIB) for s in a.sizes.split(",")]
    if rank == 0:
        print(f"torch {torch.__version__} nccl {torch.cuda.nccl.version()} ranks {n} "
              f"env {[f'{k}={v}' for k, v in sorted(os.environ.items()) if k.startswith('NCCL_')]}", flush=True)
    for kind in a.kinds.split(","):
        if kind == "ncclmem" and pool is None:
            continue
        for op in a.ops.split(","):
            for size in sizes:
                lay = layout(op, size, n, 4)

                def alloc(op: str = op, lay=lay) -> tuple:  # noqa: ANN001
                    s = torch.ones(lay.send, dtype=torch.float32, device="cuda")
                    r = None if op in ("all_reduce", "broadcast") else torch.empty(lay.recv, dtype=torch.float32,
                                                                                     device="cuda")
                    return s, r
                if kind == "ncclmem":
                    with torch.cuda.use_mem_pool(pool):
                        sets = [alloc()]
                    if os.environ.get("CAUSES_REGISTER", "0") == "1":
                        backend.register_mem_pool(pool)
                else:
                    sets = [alloc()]
                rows = {}
                iters = 20 if size >= 64 * MIB else 100
                rows["loop"] = timed_loop(op, sets, iters)
                calls = max(2, min(100, int(2000 / max(rows["loop"], 1))))
                rows["graph"] = timed_graph(op, sets, calls, 10 if size < 1024 * MIB else 4, 3)
                if size <= MIB and kind == "plain":
                    rows["marks"] = timed_marks(op, sets, 20)
                    rot = sets + [alloc() for _ in range(15)]
                    rows["loop_rot16"] = timed_loop(op, rot, 32)
                    rows["marks_rot16"] = timed_marks(op, rot, 32)
                for way, us in rows.items():
                    # Every rank's time through a tensor (all_gather_object broke after graph captures of
                    # all_gather on torch 2.11: "Tried to allocate more than 1EB", the 2006Z call).
                    slot = torch.zeros(n, dtype=torch.float64, device="cuda")
                    slot[rank] = us
                    dist.all_reduce(slot)
                    got = slot.tolist()
                    if rank == 0:
                        mean, mx = statistics.fmean(got), max(got)
                        bb = bandwidths_gbps(op, lay.size_bytes, n, mean)[1]
                        print(f"{op:15s} {size >> 20:5d} MiB {kind:8s} {way:12s} mean {mean:9.2f} us  max {mx:9.2f}"
                              f"  busbw {bb:7.1f}  ranks {' '.join(f'{x:.1f}' for x in got)}", flush=True)
                del sets
                if kind == "ncclmem" and os.environ.get("CAUSES_REGISTER", "0") == "1":
                    backend.deregister_mem_pool(pool)
                torch.cuda.synchronize()
                if kind == "plain":
                    torch.cuda.empty_cache()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
