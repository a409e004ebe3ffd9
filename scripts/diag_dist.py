"""The start every torchrun diagnostic in scripts/ shares: the node sweep's graph-timing environment, this rank's
GPU, and NCCL's process group up on it."""

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
