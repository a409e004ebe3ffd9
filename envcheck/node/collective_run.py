"""Runs the collective sweep under torchrun (standalone on one node, a static rendezvous across a fleet's nodes)
through the launcher seam, and turns what the ranks wrote into a ``Collectives``. Whatever the ranks wrote
before the end is kept; a planned size never reported is ``skipped="not_run"``, never silently missing.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envcheck.analysis.narrowing import DEFAULT_NARROW_MARGIN
from envcheck.harness.env import clean_env
from envcheck.model.bench import Timing
from envcheck.model.node import (
    COLLECTIVES,
    GPU_TIME_REASONS,
    REGISTERED_REASONS,
    AlgoChoice,
    CollectiveResult,
    Collectives,
    Launch,
    RankOutcome,
    RankTiming,
)
from envcheck.node.collective_worker import GRAPH_TIMING_ENV, LEARN_PREFIX
from envcheck.node.events import read_events
from envcheck.node.launch import Launcher, envcheck_pythonpath, torchrun_argv
from envcheck.node.nccl_log import distinct, nccl_version, parse_choices

WORKER_MODULE = "envcheck.node.collective_worker"
MiB = 1 << 20
GiB = 1 << 30
NARROW_SIZE = 256 * MiB


def sizes(lo: int = MiB, hi: int = 4 * GiB, factor: int = 4) -> tuple[int, ...]:
    """nccl-tests' ``-b lo -e hi -f factor`` sweep: 1 MiB, 4 MiB, ... 4 GiB by default."""
    return tuple(itertools.takewhile(lambda s: s <= hi, (lo * factor**k for k in itertools.count())))


@dataclass(frozen=True)
class SweepPlan:
    """What the ranks run: ``ops`` x ``sizes`` (nccl-tests' S), ``warmup`` then ``iters`` timed calls each
    (nccl-tests' -w 5 -n 20), then the narrowing bisection when ``narrow``."""

    ops: tuple[str, ...] = COLLECTIVES
    sizes: tuple[int, ...] = sizes()
    warmup: int = 5
    iters: int = 20
    device: str = "cuda"
    narrow: bool = True
    narrow_op: str = "all_reduce"
    narrow_size: int = NARROW_SIZE
    narrow_margin: float = DEFAULT_NARROW_MARGIN
    pg_timeout_s: float = 300.0
    crosscheck_loop: bool = False  # run --crosscheck: a plain torch.distributed loop too (node/crosscheck_loop.py)

    def __post_init__(self) -> None:
        unknown = set(self.ops) - set(COLLECTIVES)
        if unknown:
            raise ValueError(f"unknown collectives {sorted(unknown)}")

    def to_json(self) -> dict[str, Any]:
        return {"ops": list(self.ops), "sizes": list(self.sizes), "warmup": self.warmup, "iters": self.iters,
                "device": self.device, "pg_timeout_s": self.pg_timeout_s, "crosscheck_loop": self.crosscheck_loop,
                "narrow": {"enabled": self.narrow, "op": self.narrow_op, "size_bytes": self.narrow_size,
                           "margin": self.narrow_margin}}

    def settings(self) -> dict[str, Any]:
        return {"ops": list(self.ops), "sizes": list(self.sizes), "warmup": self.warmup, "iters": self.iters,
                "dtype": "float32", "narrow_op": self.narrow_op if self.narrow else None,
                "narrow_size_bytes": self.narrow_size if self.narrow else None, "narrow_margin": self.narrow_margin,
                "timing": "mean of per-iteration times per rank, averaged over ranks (nccl-tests -a 1)",
                "gpu_time": "cuda_graph" if self.device == "cuda" else None,
                "timed_env": dict(GRAPH_TIMING_ENV) if self.device == "cuda" else None,
                "algorithms": "learn_launch" if self.device == "cuda" else None}


@dataclass(frozen=True)
class RankOutput:
    """What one rank left behind: its event lines and the decisions parsed from its NCCL log."""

    rank: int
    events_text: str
    choices: tuple[AlgoChoice, ...] = ()
    nccl_version: str | None = None


def read_outputs(out_dir: str | os.PathLike[str]) -> tuple[RankOutput, ...]:
    """Every ``rank<r>.jsonl`` in ``out_dir`` with its ``nccl.rank<r>.log`` parsed."""
    d = Path(out_dir)
    outs = []
    for p in sorted(d.glob("rank*.jsonl")):
        if not p.stem[4:].isdecimal():
            continue
        rank = int(p.stem[4:])
        text = p.read_text(encoding="utf-8", errors="replace")
        log = d / f"nccl.rank{rank}.log"
        log_text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        outs.append(RankOutput(rank, text, distinct(parse_choices(log_text, rank)), nccl_version(log_text)))
    return tuple(outs)


def worker_pids(out_dir: str | os.PathLike[str], prefix: str = "") -> list[int]:
    """Pids the workers reported (``<prefix>rank<r>.jsonl``) still running this module (not a recycled pid)."""
    pids = []
    for p in sorted(Path(out_dir).glob(f"{prefix}rank*.jsonl")):
        for ev in read_events(p.read_text(encoding="utf-8", errors="replace")):
            if ev["event"] == "start" and isinstance(ev.get("pid"), int):
                try:
                    cmd = Path(f"/proc/{ev['pid']}/cmdline").read_bytes()
                except OSError:
                    continue
                if WORKER_MODULE.encode() in cmd:
                    pids.append(ev["pid"])
    return pids


def workers_done(out_dir: str | os.PathLike[str], prefix: str, nproc: int) -> bool:
    """This node's ``nproc`` workers all said done and ended: torchrun waits only for other nodes' agents now."""
    files = list(Path(out_dir).glob(f"{prefix}rank*.jsonl"))
    return len(files) == nproc and not worker_pids(out_dir, prefix) and all(
        any(e["event"] == "done" for e in read_events(p.read_text(encoding="utf-8", errors="replace"))) for p in files)


def assemble(outputs: Sequence[RankOutput], plan: SweepPlan, world_size: int, scope: str,
             launch: Launch | None) -> Collectives:
    """A ``Collectives`` from the ranks' raw outputs (pure: the fleet run merges outputs of many nodes)."""
    by_rank = {o.rank: read_events(o.events_text) for o in outputs}
    hosts = ["?"] * world_size
    outcomes: list[RankOutcome] = []
    backend = None
    version = None
    results: dict[tuple[str, str, int, tuple[int, ...]], dict[int, dict[str, Any]]] = {}  # in the order reported
    for rank in range(world_size):
        first: dict[str, dict[str, Any]] = {}  # each kind of event's first
        for e in by_rank.get(rank, []):
            first.setdefault(e["event"], e)
            if e["event"] == "result":
                key = (str(e["phase"]), str(e["op"]), int(e["size_bytes"]), tuple(int(r) for r in e["ranks"]))
                results.setdefault(key, {})[rank] = e
        start, ready, err = first.get("start", {}), first.get("ready"), first.get("error")
        if start:
            hosts[rank] = str(start.get("host", "?"))
        if ready:
            backend = backend or ready.get("backend")
            version = version or ready.get("nccl_version")
        status = "ok" if "done" in first else "error" if err else "missing"
        outcomes.append(RankOutcome(rank, status, start.get("host"), start.get("local_rank"),
                                    str(err.get("text")) if err and status == "error" else None))
    sweep: list[CollectiveResult] = []
    narrowing: list[CollectiveResult] = []
    for (phase, op, size, ranks), got in results.items():
        first = next(iter(got.values()))
        timings = tuple(RankTiming(r, Timing.from_samples(str(e.get("method") or "cuda_events"), e["samples_us"]))
                        for r, e in sorted(got.items()) if e.get("samples_us"))
        gpu_timings = tuple(RankTiming(r, Timing.from_samples("cuda_graph", e["gpu_samples_us"],
                                                              int(e.get("gpu_calls") or 1)))
                            for r, e in sorted(got.items()) if e.get("gpu_samples_us"))
        # Every member must have a GPU time for the call to have one; else the first reason given.
        if len(gpu_timings) != len(timings) or not timings:
            gpu_timings = ()
        gpu_reason = None if gpu_timings else _first(got, "gpu_reason", GPU_TIME_REASONS) or "not_captured"
        missing = tuple(r for r in ranks if r not in got)
        wrongs = [got[r].get("wrong") for r in ranks if r in got]
        wrong = sum(wrongs) if wrongs and not missing and all(isinstance(w, int) for w in wrongs) else None
        free = [e.get("free_bytes") for e in got.values() if isinstance(e.get("free_bytes"), int)]
        res = CollectiveResult(op, size, int(first.get("count", 0)), "float32", ranks, timings, wrong,
                               _first(got, "error"), _first(got, "skipped"), first.get("need_bytes"),
                               min(free) if free else None, missing, gpu_timings, gpu_reason if timings else None,
                               None if gpu_timings else _first(got, "gpu_error"),
                               max(1, int(first.get("rotation_sets") or 1)) if timings else 1,
                               max(1, int(first.get("allocations") or 1)) if timings else 1,
                               max(1, int(first.get("captures") or 1)) if gpu_timings else 1,
                               max(1, int(first.get("communicators") or 1)) if gpu_timings else 1)
        res = _with_registered(res, got, ranks)
        (narrowing if phase == "narrow" else sweep).append(res)
    # Planned sizes nobody reported (a crash or the time limit came first) are listed as not run.
    from envcheck.analysis.collectives import layout

    seen = {(r.op, r.size_bytes) for r in sweep}
    everyone = tuple(range(world_size))
    for op in plan.ops:
        for s in plan.sizes:
            lay = layout(op, s, world_size, 4)
            if (op, lay.size_bytes) not in seen:
                sweep.append(CollectiveResult(op, lay.size_bytes, lay.count, "float32", everyone, skipped="not_run"))
    choices = tuple(c for o in outputs for c in o.choices)
    version = version or next((o.nccl_version for o in outputs if o.nccl_version), None)
    backend = backend or ("nccl" if plan.device == "cuda" else "gloo")
    reason = "backend_not_nccl" if backend != "nccl" else None if choices else "no_nccl_log"
    error = launch.ended_early if launch is not None else None
    if error is None:
        if launch is not None and launch.returncode not in (0, None):
            error = "exit_status"
        elif any(o.status != "ok" for o in outcomes):
            error = "ranks_failed"
    return Collectives(scope, backend, world_size, tuple(hosts), plan.settings(), tuple(sweep), tuple(narrowing),
                       choices, reason, version, tuple(outcomes), launch, error)


@dataclass(frozen=True)
class Placement:
    """Where the ranks run: ``nproc`` per node on ``gpus`` (None: all), standalone or ``nnodes`` of a rendezvous."""

    nproc: int
    gpus: tuple[int, ...] | None = None
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None
    extra_env: dict[str, str] = field(default_factory=dict)


def launch_sweep(plan: SweepPlan, placement: Placement, out_dir: str | os.PathLike[str], launcher: Launcher,
                 timeout: float, learn: bool = False) -> Launch:
    """Start this node's ranks and wait for them (or the time limit); outputs land in ``out_dir``. ``learn``: the
    untimed launch, before the timed one into the same ``out_dir``, that learns NCCL's algorithms from its log."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    plan_path = d / "plan.json"
    plan_path.write_text(json.dumps(plan.to_json()), encoding="utf-8")
    extra = dict(placement.extra_env)
    if placement.gpus is not None:
        extra["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in placement.gpus)
    extra["PYTHONPATH"] = envcheck_pythonpath(os.environ.get("PYTHONPATH"))
    args = ["--plan", str(plan_path), "--out", str(d), *(["--learn"] if learn else [])]
    argv = torchrun_argv(placement.nproc, WORKER_MODULE, args,
                         nnodes=placement.nnodes, node_rank=placement.node_rank, master_addr=placement.master_addr,
                         master_port=placement.master_port)
    prefix = LEARN_PREFIX if learn else ""
    log = d / f"torchrun.{prefix}node{placement.node_rank}.log"
    return launcher.run(argv, clean_env(extra), timeout, log_path=str(log), orphans=lambda: worker_pids(d, prefix),
                        finished=lambda: workers_done(d, prefix, placement.nproc))


# Share of a sweep's time limit the learning launch may use (it runs each size once, untimed).
LEARN_SHARE = 0.25


def run_sweep(plan: SweepPlan, placement: Placement, out_dir: str | os.PathLike[str], launcher: Launcher,
              timeout: float, scope: str = "node") -> Collectives:
    """One node's sweep from launch to ``Collectives``: on GPUs the learning launch first (a failed one costs the
    algorithms, never the sweep), then the timed sweep with NCCL's debug log off."""
    if plan.device == "cuda":
        t0 = time.monotonic()
        learned = launch_sweep(plan, placement, out_dir, launcher, timeout * LEARN_SHARE, learn=True)
        if learned.interrupted:
            return assemble(read_outputs(out_dir), plan, placement.nproc * placement.nnodes, scope, learned)
        timeout = max(timeout - (time.monotonic() - t0), 1.0)
    launch = launch_sweep(plan, placement, out_dir, launcher, timeout)
    return assemble(read_outputs(out_dir), plan, placement.nproc * placement.nnodes, scope, launch)


def _first(got: dict[int, dict[str, Any]], key: str, allowed: Any = None) -> str | None:
    """The first rank's ``key`` (one of ``allowed`` where given), as text."""
    return next((str(e[key]) for e in got.values() if e.get(key) and (allowed is None or e[key] in allowed)), None)


def _with_registered(res: CollectiveResult, got: dict[int, dict[str, Any]], ranks: tuple[int, ...]) -> CollectiveResult:
    """``res`` with the GPU time on NCCL-registered buffers the ranks reported (every member's samples, or none
    and the first reason given), and its check summed over the members."""
    if not res.gpu_timings:
        return res
    reg = tuple(RankTiming(r, Timing.from_samples("cuda_graph", e["reg_samples_us"], int(e.get("reg_calls") or 1)))
                for r, e in sorted(got.items()) if e.get("reg_samples_us"))
    if len(reg) != len(ranks):
        reason = _first(got, "reg_reason", REGISTERED_REASONS)
        if reason is None:  # a worker from before registered buffers, or one that said nothing: nothing to show
            return res
        return replace(res, registered_reason=reason, registered_error=_first(got, "reg_error"))
    wrongs = [got[r].get("reg_wrong") for r in ranks]
    wrong = sum(wrongs) if all(isinstance(w, int) for w in wrongs) else None  # type: ignore[misc]
    captures = max(1, int(next(iter(got.values())).get("reg_captures") or 1))
    return replace(res, registered_timings=reg, registered_captures=captures, registered_wrong=wrong)
