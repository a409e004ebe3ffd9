"""What each extra communicator of the node sweep costs in GPU memory (collective_bench.COMMUNICATORS).

    torchrun --nproc-per-node N scripts/diag_comm_memory.py

Rank 0 prints the free memory of its GPU after the process group is up, then after each of
``COMMUNICATORS - 1`` communicators of every rank is made and has carried one all_reduce and one all_to_all
(NCCL connects its ring and its point-to-point channels lazily, on first use).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    import torch
    import torch.distributed as dist

    from envcheck.node.collective_bench import COMMUNICATORS

    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    x = torch.ones(world * 1024, device="cuda")
    y = torch.empty_like(x)

    def use(group: object) -> int:
        dist.all_reduce(x, group=group)
        dist.all_to_all_single(y, x, group=group)
        torch.cuda.synchronize()
        return torch.cuda.mem_get_info()[0]

    before = use(None)
    if rank == 0:
        print(f"{world} ranks; free after the sweep's own communicator: {before / 2**20:.0f} MiB", flush=True)
    groups = []
    for k in range(COMMUNICATORS - 1):
        groups.append(dist.new_group(list(range(world))))
        free = use(groups[-1])
        if rank == 0:
            print(f"after extra communicator {k + 1}: {free / 2**20:.0f} MiB free, {(before - free) / 2**20:.0f} MiB "
                  f"taken by the extra ones", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
