"""The collective sweep, one process per rank under torchrun (which starts the ranks, not the harness):
``python -m torch.distributed.run ... -m envcheck.node.collective_worker --plan PLAN.json --out DIR``.

Each rank appends JSON lines to ``DIR/rank<r>.jsonl`` as it goes, so what finished before a crash or a hang
is kept (the reader: ``envcheck.node.collective_run``)::

    {"event": "start", "rank", "local_rank", "world_size", "host", "pid"}        first, before torch
    {"event": "ready", "backend", "device", "nccl_version"}                      process group up
    {"event": "result", "at_s", "phase": "sweep" | "narrow", **collective_bench.Measured}
    {"event": "crosscheck_loop", ...}        with the plan's crosscheck_loop: envcheck.node.crosscheck_loop
    {"event": "error", "text"} | {"event": "done"}                               last

``--learn`` runs each (op, size) once, untimed, with NCCL's debug log on (``DIR/nccl.rank<r>.log`` names each
call's algorithm), events in ``DIR/learn.rank<r>.jsonl``: NCCL reads its debug settings once per process, so
the timed sweep runs in a launch of its own with the log off.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from envcheck.errors import one_line
from envcheck.node.events import Emitter

if TYPE_CHECKING:
    from envcheck.analysis.narrowing import NarrowStep

LEARN_PREFIX = "learn."  # the learning launch's event files: learn.rank<r>.jsonl
NCCL_DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,TUNING,COLL"}
# The timed sweep (read at NCCL's start): no graphs mixed with eager calls in flight (envcheck never mixes
# them) and no flight recorder, under both its names; left on, they doubled a graph's per-call time.
GRAPH_TIMING_ENV = {"NCCL_GRAPH_MIXING_SUPPORT": "0", "TORCH_FR_BUFFER_SIZE": "0", "TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}
# Test hook, "RANK:MICROSECONDS": every collective of one rank slowed (narrowing tests on the CPU).
SLOW_RANK_ENV = "ENVCHECK_TEST_SLOW_RANK"


def _measured_event(m: Any, phase: str, started: float | None = None) -> dict[str, Any]:
    at = {} if started is None else {"at_s": round(time.monotonic() - started, 3)}  # when it finished, for reading logs
    return {"event": "result", **at, "phase": phase, **dataclasses.asdict(m)}


def _slow_hook(bench: Any, rank: int) -> None:
    who, _, delay_us = os.environ.get(SLOW_RANK_ENV, "").partition(":")
    if not delay_us or int(who) != rank:
        return
    call = bench._call

    def slow_call(*a: Any, **k: Any) -> None:
        time.sleep(float(delay_us) / 1e6)
        call(*a, **k)

    bench._call = slow_call


def _destroy_group(dist: Any, sub: Any) -> None:
    """Free a sub-group or an extra communicator; its results are shared already, so a failure is only said."""
    try:
        dist.destroy_process_group(sub)
    except Exception as e:  # noqa: BLE001
        print(f"envcheck: could not destroy a sub-group ({type(e).__name__}: {e})", file=sys.stderr)


def run_narrowing(measure: Callable[[tuple[int, ...]], float | None], world: tuple[int, ...], hosts: Sequence[str],
                  margin: float | None = None) -> tuple[NarrowStep, ...]:
    """Narrowing a slow collective: ``measure`` (busbw in GB/s, None when the run failed) each sub-group the
    bisection (``analysis.narrowing``) asks for, in its order, every rank in step (``new_group`` needs every rank)."""
    from envcheck.analysis.narrowing import DEFAULT_NARROW_MARGIN, NarrowStep, next_narrowing_group

    steps: list[NarrowStep] = []
    margin = DEFAULT_NARROW_MARGIN if margin is None else margin
    while (group := next_narrowing_group(steps, world, hosts, margin)) is not None:
        steps.append(NarrowStep(group, measure(group)))
    return tuple(steps)


def run(plan: dict[str, Any], out_dir: str, emit: Emitter, learn: bool = False) -> None:
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = plan.get("device") == "cuda"
    if cuda and learn:
        os.environ.update(NCCL_DEBUG_ENV)
        os.environ["NCCL_DEBUG_FILE"] = os.path.join(out_dir, f"nccl.rank{rank}.log")
    elif cuda:
        for k in (*NCCL_DEBUG_ENV, "NCCL_DEBUG_FILE"):  # a parent's NCCL_DEBUG would be timed with every call
            os.environ.pop(k, None)
        os.environ.update(GRAPH_TIMING_ENV)
    import torch
    import torch.distributed as dist

    from envcheck.analysis.collectives import bandwidths_gbps, layout
    from envcheck.analysis.narrowing import DEFAULT_NARROW_MARGIN
    from envcheck.node.collective_bench import CollectiveBench

    timeout = timedelta(seconds=float(plan.get("pg_timeout_s", 300)))
    if cuda:
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
        dist.init_process_group("nccl", timeout=timeout, device_id=torch.device(device))
        nccl = ".".join(str(x) for x in torch.cuda.nccl.version())
    else:
        device = "cpu"
        dist.init_process_group("gloo", timeout=timeout)
        nccl = None
    emit({"event": "ready", "backend": dist.get_backend(), "device": device, "nccl_version": nccl})
    hosts: list[Any] = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())

    started = time.monotonic()  # each result says when it finished (``at_s``): where a sweep's time goes
    bench = CollectiveBench(torch, dist, device, rank, world)
    if cuda and not learn:
        bench.use_registered_buffers()  # where it cannot, each size says why (reg_reason)
    _slow_hook(bench, rank)
    everyone = tuple(range(world))
    warmup, iters = int(plan.get("warmup", 5)), int(plan.get("iters", 20))
    if learn:
        warmup, iters = 0, 1  # one logged call per (op, size): NCCL decides per call, nothing is timed here
    more = () if learn else bench.more_communicators(everyone, tuple(plan["ops"]))
    broken = False
    for op, size in itertools.product(plan["ops"], plan["sizes"]):
        m = bench.measure(op, int(size), everyone, None, warmup, iters, graph=not learn, more_groups=more)
        emit(_measured_event(m, "sweep", started))
        if m.error:  # a failed collective can leave the communicator unusable
            broken = True
            break
    if plan.get("crosscheck_loop") and not broken and not learn:  # run --crosscheck: a user's plain loop
        from envcheck.node.crosscheck_loop import run_loops

        run_loops(torch, dist, device, world, plan, emit)
    narrow = plan.get("narrow") or {}
    if not broken and not learn and narrow.get("enabled") and world >= 3:
        op, size = narrow.get("op", "all_reduce"), int(narrow.get("size_bytes", 1 << 28))
        margin = float(narrow.get("margin", DEFAULT_NARROW_MARGIN))

        def measure_group(group: tuple[int, ...]) -> float | None:
            # Every rank creates (and destroys) each sub-group, members or not; torch requires it.
            sub = dist.new_group(ranks=list(group))
            mean = 0.0
            if rank in group:
                m = bench.measure(op, size, group, sub, warmup, iters)
                emit(_measured_event(m, "narrow"))
                # The GPU time where there is one (the links, not the host), as the sweep's busbw.
                timed = m.gpu_samples_us or m.samples_us
                mean = statistics.fmean(timed) if timed else 0.0
            # Every rank learns every member's mean time, so every rank takes the same next step.
            means = torch.zeros(world, dtype=torch.float64, device=device)
            means[rank] = mean
            dist.all_reduce(means)
            _destroy_group(dist, sub)
            member = [float(means[r]) for r in group]
            if any(x <= 0 for x in member):
                return None
            t = statistics.fmean(member)
            return bandwidths_gbps(op, layout(op, size, len(group), 4).size_bytes, len(group), t)[1]

        run_narrowing(measure_group, everyone, [str(h) for h in hosts], margin)
    for g in more:
        _destroy_group(dist, g)
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="envcheck.node.collective_worker")
    p.add_argument("--plan", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--learn", action="store_true", help="only learn NCCL's algorithms (debug output on, untimed)")
    args = p.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    events = f"{LEARN_PREFIX if args.learn else ''}rank{rank}.jsonl"
    with open(os.path.join(args.out, events), "a", encoding="utf-8") as f:
        emit = Emitter(f)
        emit({"event": "start", "rank": rank, "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
              "world_size": int(os.environ.get("WORLD_SIZE", "1")), "host": socket.gethostname(), "pid": os.getpid()})
        try:
            with open(args.plan, encoding="utf-8") as pf:
                plan = json.load(pf)
            run(plan, args.out, emit, learn=args.learn)
        except BaseException as e:  # noqa: BLE001 - the parent reads the reason from the file
            text = one_line(e)
            emit({"event": "error", "text": text})
            print(f"rank {rank}: {text}", file=sys.stderr)
            return 1
        emit({"event": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
