"""How a collective's GPU time per call depends on how many calls one CUDA graph holds.

    torchrun --nproc-per-node 2 tools/evidence/graph_calls.py

For all_reduce and broadcast at 1 MiB and 16 MiB: graphs of 1, 4, 9, 20, 50 and 100 calls, each replayed 20
times back to back with a CUDA event between replays (envcheck's GPU time); then one replay of a 20-call
graph under the profiler, listing every GPU activity in order (kernel names, copies, sets), rank 0.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collective_gaps import capture, per_call_us  # noqa: E402 - the same recipe as envcheck's


def main() -> int:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank = dist.get_rank()
    env = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL"))}
    if rank == 0:
        print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; env {env}", flush=True)
    for op in ("all_reduce", "broadcast"):
        for size in (1 << 20, 16 << 20):
            t = torch.ones(size // 4, device="cuda")

            def call(t=t, op=op):
                if op == "all_reduce":
                    dist.all_reduce(t)
                else:
                    dist.broadcast(t, src=0)

            for _ in range(5):
                call()
            torch.cuda.synchronize()
            row = []
            for calls in (1, 4, 9, 20, 50, 100):
                row.append(per_call_us(torch, capture(torch, lambda c=calls, f=call: [f() for _ in range(c)]), calls))
            if rank == 0:
                print(f"{op} {size >> 20} MiB: us per call by calls per graph 1/4/9/20/50/100: "
                      + " ".join(f"{x:.2f}" for x in row), flush=True)
            if size == 1 << 20:
                g = capture(torch, lambda f=call: [f() for _ in range(20)])
                g.replay()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    g.replay()
                    torch.cuda.synchronize()
                g.reset()
                with tempfile.TemporaryDirectory() as d:
                    prof.export_chrome_trace(f"{d}/t.json")
                    evs = json.loads(Path(f"{d}/t.json").read_text()).get("traceEvents", [])
                acts = sorted((float(e["ts"]), float(e.get("dur", 0)), e.get("cat"), e.get("name", "")[:60])
                              for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"))
                if rank == 0 and acts:
                    t0 = acts[0][0]
                    print(f"  one replay of 20 calls, rank 0: {len(acts)} GPU activities", flush=True)
                    for ts, dur, cat, name in acts[:12]:
                        print(f"    +{ts - t0:8.2f} us  {dur:7.2f} us  {cat:<10} {name}", flush=True)
            del t
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
