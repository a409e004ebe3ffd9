"""A plain ``torch.distributed`` loop at each size of the sweep: the counterpart of envcheck's per-call time
(``run --crosscheck``), run by every rank of the sweep's torchrun workers once the sweep is done
(``envcheck.node.collective_worker`` calls :func:`run_loops` when the plan has ``crosscheck_loop``).

What a user's training loop pays per call: one pair of buffers allocated once (zeros: nothing is checked,
and a sum of zeros never overflows however many calls accumulate in place), ``WARMUP`` calls, then ``LOOPS``
times ``CALLS`` calls back to back between two CUDA events (the host clock on the CPU, where gloo's calls
return when done), on the default process group. Each loop divided by its calls is one sample. Deliberately
none of the sweep's machinery: no rotating buffers, no graphs, no event between calls.

Each rank appends one event per (op, size) to its events file, after the sweep's (``collective_worker``'s
protocol)::

    {"event": "crosscheck_loop", "op", "size_bytes", "ranks", "calls", "method", "samples_us" | "error" | "skipped"}

``size_bytes`` is nccl-tests' S after its rounding (``analysis.collectives.layout``), as the sweep reports it.
Every rank of the group allocates or none times: out of memory on one rank is agreed on first (a collective
waiting for a rank that skipped would hang). After an error the communicator may be unusable: the loops stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from envcheck.analysis.collectives import layout
from envcheck.errors import one_line

CALLS = 20
LOOPS = 5
WARMUP = 5
EVENT = "crosscheck_loop"

Emit = Callable[[dict[str, Any]], None]


def call(dist: Any, op: str, send: Any, recv: Any) -> None:
    """One call of ``op`` as a user writes it, on the default group (rank 0 the root of a broadcast)."""
    if op == "all_reduce":
        dist.all_reduce(send)
    elif op == "broadcast":
        dist.broadcast(send, src=0)
    elif op == "all_gather":
        # torch 2.13 renames the single-tensor forms; 2.11 (the lent GPUs) has only the old names.
        (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(recv, send)
    elif op == "reduce_scatter":
        (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(recv, send)
    elif op == "all_to_all":
        dist.all_to_all_single(recv, send)
    else:
        raise ValueError(f"unknown collective {op!r}")


def _everyone(torch: Any, dist: Any, device: str, ok: bool) -> bool:
    """Whether ``ok`` holds on every rank (each rank calls it)."""
    t = torch.tensor([int(ok)], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


def loop_samples(torch: Any, dist: Any, device: str, op: str, send: Any, recv: Any) -> list[float]:
    """``LOOPS`` samples of ``CALLS`` back-to-back calls each, us per call."""
    cuda = device.startswith("cuda")
    for _ in range(WARMUP):
        call(dist, op, send, recv)
    if cuda:
        torch.cuda.synchronize()
    out = []
    for _ in range(LOOPS):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(CALLS):
                call(dist, op, send, recv)
            end.record()
            end.synchronize()
            us = start.elapsed_time(end) * 1e3
        else:
            t0 = time.perf_counter()
            for _ in range(CALLS):
                call(dist, op, send, recv)
            us = (time.perf_counter() - t0) * 1e6
        out.append(max(us / CALLS, 1e-3))
    return out


def run_loops(torch: Any, dist: Any, device: str, world: int, plan: dict[str, Any], emit: Emit) -> None:
    """The loop at every (op, size) of ``plan`` (``ops``, ``sizes``: nccl-tests' S), every rank in step."""
    method = "cuda_events" if device.startswith("cuda") else "host_clock"
    for op in plan["ops"]:
        for size in plan["sizes"]:
            lay = layout(op, int(size), world, 4)
            ev: dict[str, Any] = {"event": EVENT, "op": op, "size_bytes": lay.size_bytes, "ranks": list(range(world)),
                                  "calls": CALLS, "method": method}
            send = recv = None
            try:
                try:
                    send = torch.zeros(lay.send, dtype=torch.float32, device=device)
                    recv = None if op in ("all_reduce", "broadcast") else \
                        torch.empty(lay.recv, dtype=torch.float32, device=device)
                    allocated = True
                except RuntimeError:  # torch.cuda.OutOfMemoryError is a RuntimeError
                    send = recv = None
                    allocated = False
                if not _everyone(torch, dist, device, allocated):
                    emit({**ev, "skipped": "out_of_memory"})
                    continue
                ev["samples_us"] = loop_samples(torch, dist, device, op, send, recv)
                emit(ev)
            except Exception as e:  # noqa: BLE001 - a failed loop is its row's result; the communicator may be gone
                emit({**ev, "error": one_line(e)})
                return
            finally:
                send = recv = None
                if device.startswith("cuda"):
                    torch.cuda.empty_cache()
