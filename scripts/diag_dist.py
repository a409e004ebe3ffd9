"""What the torchrun diagnostics in scripts/ that time graphs as the node sweep does share: their start (the
sweep's graph-timing environment, this rank's GPU, NCCL's process group up on it) and an all_to_all graph."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def start(split: bool = True) -> tuple[Any, Any, int, int, int]:
    """(torch, torch.distributed, rank, world size, local rank) in a torchrun worker, the process group up: bound
    to this rank's GPU (NCCL's communicator made at once, and every ``new_group`` split from it, as the node sweep
    does), or with ``split`` False unbound, so that each group's communicator is made afresh on its first call."""
    from envcheck.node.collective_worker import GRAPH_TIMING_ENV

    os.environ.update(GRAPH_TIMING_ENV)
    import torch
    import torch.distributed as dist

    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", **({"device_id": torch.device("cuda", local)} if split else {}))
    return torch, dist, rank, world, local


def alltoall_graph(torch: Any, dist: Any, sets: list[tuple[Any, Any]], calls: int, group: Any) -> Any:
    """A CUDA graph of ``calls`` all_to_all calls cycling through ``sets`` of (input, output) buffers on
    ``group``, captured as the node sweep captures (thread-local) and replayed once, untimed."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for i in range(calls):
            send, recv = sets[i % len(sets)]
            dist.all_to_all_single(recv, send, group=group)
    graph.replay()
    torch.cuda.synchronize()
    return graph
