"""A plain ``torch.distributed`` loop at each size of the sweep (``run --crosscheck``), run by the sweep's workers
after it: what a user's loop pays per call, with none of the sweep's machinery (one pair of zeroed buffers,
``WARMUP`` calls, ``LOOPS`` times ``CALLS`` calls between two CUDA events, default group). Each rank appends::

    {"event": "crosscheck_loop", "op", "size_bytes", "ranks", "calls", "method", "samples_us" | "error" | "skipped"}

Out of memory is agreed on first (a collective waiting for a rank that skipped would hang); after an error the
loops stop."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.analysis.collectives import layout
from envcheck.bench.timer import make_clock
from envcheck.errors import one_line
from envcheck.node.collective_bench import IN_PLACE, call

if TYPE_CHECKING:
    from torch import Tensor

    from envcheck.bench.timer import Clock
    from envcheck.outside_json import Json

CALLS = 20
LOOPS = 5
WARMUP = 5
EVENT = "crosscheck_loop"

Emit = Callable[[dict[str, "Json"]], None]


def _everyone(torch: ModuleType, dist: ModuleType, device: str, ok: bool) -> bool:
    """Whether ``ok`` holds on every rank (each rank calls it)."""
    t = torch.tensor([int(ok)], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


def loop_samples(clock: Clock, dist: ModuleType, op: str, send: Tensor, recv: Tensor | None) -> list[float]:
    """``LOOPS`` samples of ``CALLS`` back-to-back calls each between two marks of ``clock``, us per call."""
    for _ in range(WARMUP):
        call(dist, op, send, recv)
    clock.synchronize()
    out = []
    for _ in range(LOOPS):
        start = clock.mark()
        for _ in range(CALLS):
            call(dist, op, send, recv)
        end = clock.mark()
        clock.synchronize()
        out.append(max(clock.elapsed_us(start, end) / CALLS, 1e-3))
    return out


def run_loops(torch: ModuleType, dist: ModuleType, device: str, world: int, plan: dict[str, Json], emit: Emit) -> None:
    """The loop at every (op, size) of ``plan`` (``ops``, ``sizes``: nccl-tests' S), every rank in step."""
    method = "cuda_events" if device.startswith("cuda") else "host_clock"
    clock = make_clock("cuda" if method == "cuda_events" else "cpu")
    for op, size in itertools.product(plan["ops"], plan["sizes"]):
        lay = layout(op, int(size), world, 4)
        ev: dict[str, Json] = {"event": EVENT, "op": op, "size_bytes": lay.size_bytes, "ranks": list(range(world)),
                              "calls": CALLS, "method": method}
        send = recv = None
        try:
            try:
                send = torch.zeros(lay.send, dtype=torch.float32, device=device)
                recv = None if op in IN_PLACE else torch.empty(lay.recv, dtype=torch.float32, device=device)
            except RuntimeError:  # torch.cuda.OutOfMemoryError is a RuntimeError
                send = recv = None
            if not _everyone(torch, dist, device, send is not None):
                emit({**ev, "skipped": "out_of_memory"})
                continue
            ev["samples_us"] = loop_samples(clock, dist, op, send, recv)
            emit(ev)
        except Exception as e:  # noqa: BLE001 - a failed loop is its row's result; the communicator may be gone
            emit({**ev, "error": one_line(e)})
            return
        finally:
            send = recv = None
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
