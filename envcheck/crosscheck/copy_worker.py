"""A plain torch copy between every ordered pair of GPUs, in a child (``run``): the copy-engine peer copies as a
user writes them (``b.copy_(a)``, ``calls`` back to back between two CUDA events, a sample per loop). Events::

    {"event": "devices", "devices": n}
    {"event": "copy", "src", "dst", "size_bytes", "calls", "samples_us" | "error"}   CUDA indices of this process"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.errors import one_line

if TYPE_CHECKING:
    from envcheck.outside_json import Json


def time_copy(torch: ModuleType, src: int, dst: int, size_bytes: int, calls: int, loops: int, warmup: int) -> list[float]:
    """Per-copy times (us) of ``loops`` loops of ``calls`` back-to-back ``b.copy_(a)`` from GPU ``src`` to ``dst``."""
    a = torch.ones(size_bytes // 4, device=f"cuda:{src}")
    b = torch.empty(size_bytes // 4, device=f"cuda:{dst}")
    out = []
    with torch.cuda.device(src):
        for _ in range(warmup):
            b.copy_(a)
        torch.cuda.synchronize(src)
        for _ in range(loops):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                b.copy_(a, non_blocking=True)
            end.record()
            end.synchronize()
            out.append(max(start.elapsed_time(end) * 1e3 / calls, 1e-3))
    return out


def run(plan: dict[str, Json], emit: Callable[[dict[str, Json]], None]) -> None:
    import torch

    n = torch.cuda.device_count()
    emit({"event": "devices", "devices": n})
    size = int(plan["size_bytes"])
    calls, loops, warmup = int(plan.get("calls", 20)), int(plan.get("loops", 5)), int(plan.get("warmup", 3))
    for src, dst in itertools.permutations(range(n), 2):
        ev: dict[str, Json] = {"event": "copy", "src": src, "dst": dst, "size_bytes": size, "calls": calls}
        try:
            ev["samples_us"] = time_copy(torch, src, dst, size, calls, loops, warmup)
        except Exception as e:  # noqa: BLE001 - one pair's failure is that pair's result
            ev["error"] = one_line(e)
        finally:
            torch.cuda.empty_cache()
        emit(ev)
