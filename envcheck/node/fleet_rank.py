"""A fleet run (``torchrun ... -m envcheck fleet`` or ``srun``): every rank benchmarks its GPU, each node's leader
probes the node and runs its node tests, the leaders start one collective sweep across the world, and rank 0
gathers it all into one ``Fleet``. Ranks only start children, so one fails by a bug (sent as data) or by dying:
rank 0 waits for each hand-over at most ``rank_timeout_s`` (``timeout``; never joined: ``missing``) and reports
the rest all the same.

Hand-over keys (``envcheck.node.transport``), JSON of model objects: ``join/<rank>`` RankJoin, ``rank/<rank>``
RankReport, ``node/<node_rank>`` NodeReport (leaders), ``world/ready/<node>``, ``world/go`` WorldGo (rank 0),
``world/out/<node>`` WorldOutputs, ``done`` (rank 0 wrote the report: the others may exit)."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from envcheck.errors import UsageError, one_line
from envcheck.model import Bench, Check, Environment, build, to_dict
from envcheck.model.crosscheck import Crosscheck
from envcheck.model.fleet import Baseline, Fleet, FleetNode, RankStatus, Rule
from envcheck.model.node import Collectives, Launch, Node
from envcheck.node.collective_run import RankOutput, SweepPlan
from envcheck.node.transport import Transport

T = TypeVar("T")


@dataclass(frozen=True)
class RankContext:
    """This process's place in the fleet, from torchrun's variables or, without them, srun's."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    nnodes: int
    master_addr: str
    master_port: int
    launcher: str  # torchrun | slurm
    host: str

    @property
    def leader(self) -> bool:
        return self.local_rank == 0


def expand_nodelist(text: str) -> list[str]:
    """Slurm's compressed host list: ``gpu[01-03,07],login1`` -> gpu01 gpu02 gpu03 gpu07 login1."""
    hosts: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^][]+)\])?", text):
        prefix, ranges = m.group(1), m.group(2)
        if not ranges:
            hosts.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if hi:
                width = len(lo)
                hosts.extend(f"{prefix}{i:0{width}d}" for i in range(int(lo), int(hi) + 1))
            else:
                hosts.append(prefix + lo)
    return hosts


def rank_context(environ: Mapping[str, str], host: str | None = None) -> RankContext:
    """Where this rank stands; UsageError naming what is missing when neither launcher set it."""
    host = host or socket.gethostname()
    e = environ
    try:
        if "RANK" in e and "WORLD_SIZE" in e:
            world = int(e["WORLD_SIZE"])
            local_world = int(e.get("LOCAL_WORLD_SIZE", world))
            return RankContext(int(e["RANK"]), world, int(e.get("LOCAL_RANK", 0)), local_world,
                               int(e.get("GROUP_RANK", int(e["RANK"]) // max(local_world, 1))),
                               max(1, world // max(local_world, 1)), e.get("MASTER_ADDR", "127.0.0.1"),
                               int(e.get("MASTER_PORT", 29500)), "torchrun", host)
        if "SLURM_PROCID" in e and "SLURM_NTASKS" in e:
            nodes = expand_nodelist(e.get("SLURM_STEP_NODELIST") or e.get("SLURM_JOB_NODELIST") or host)
            nnodes = int(e.get("SLURM_NNODES", len(nodes) or 1))
            world = int(e["SLURM_NTASKS"])
            # A fixed port per job: every task computes the same one without talking first.
            port = int(e.get("MASTER_PORT") or 29400 + int(e.get("SLURM_JOB_ID", "0")) % 1000)
            return RankContext(int(e["SLURM_PROCID"]), world, int(e.get("SLURM_LOCALID", 0)),
                               int(e.get("SLURM_NTASKS_PER_NODE", "0").split("(")[0] or world // nnodes),
                               int(e.get("SLURM_NODEID", 0)), nnodes, e.get("MASTER_ADDR") or nodes[0], port,
                               "slurm", host)
    except (ValueError, IndexError) as err:
        raise UsageError("error.fleet_launcher_vars", error=err) from None
    raise UsageError("error.fleet_no_launcher")


def export_for_torch(ctx: RankContext, environ: dict[str, str]) -> None:
    """Under srun, the variables torch's env:// rendezvous reads, from Slurm's."""
    if ctx.launcher == "slurm":
        for name, value in (("RANK", ctx.rank), ("WORLD_SIZE", ctx.world_size), ("LOCAL_RANK", ctx.local_rank),
                            ("MASTER_ADDR", ctx.master_addr), ("MASTER_PORT", ctx.master_port)):
            environ.setdefault(name, str(value))


def local_gpus(ctx: RankContext, environ: Mapping[str, str]) -> tuple[int, ...]:
    """This node's GPUs: CUDA_VISIBLE_DEVICES's indices (simulated nodes), else the first ``local_world_size``."""
    visible = environ.get("CUDA_VISIBLE_DEVICES", "")
    parts = [p.strip() for p in visible.split(",") if p.strip()]
    if parts and all(p.isdigit() for p in parts):
        return tuple(int(p) for p in parts[: ctx.local_world_size])
    return tuple(range(ctx.local_world_size))


@dataclass(frozen=True)
class RankJoin:
    rank: int
    host: str
    local_rank: int
    node_rank: int
    gpu: int | None


@dataclass(frozen=True)
class RankReport:
    """One rank's own part: its GPU's bench, or the error that stopped it."""

    rank: int
    bench: Bench | None = None
    error: str | None = None
    elapsed_s: float = 0.0
    crosscheck: Crosscheck | None = None  # fleet --crosscheck: its GPU's headline cases, timed again


@dataclass(frozen=True)
class NodeReport:
    node_rank: int
    host: str
    environment: Environment | None = None
    checks: tuple[Check, ...] = ()
    node: Node | None = None
    error: str | None = None
    crosscheck: Crosscheck | None = None  # fleet --crosscheck: the node's copies, loop and nccl-tests


@dataclass(frozen=True)
class WorldGo:
    nodes: tuple[int, ...]  # node ranks taking part, in their new order
    master_addr: str
    master_port: int


@dataclass(frozen=True)
class WorldOutputs:
    node_rank: int
    outputs: tuple[RankOutput, ...] = ()
    launch: Launch | None = None
    error: str | None = None


def _dump(obj: object) -> str:
    return json.dumps(to_dict(obj), allow_nan=False, separators=(",", ":"), default=str)


def _load(tp: type[T], text: str | None) -> T | None:
    if text is None:
        return None
    try:
        return build(tp, json.loads(text))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


@dataclass(frozen=True)
class FleetOptions:
    """``rank_timeout_s``: how long rank 0 waits for each rank's hand-over after its own part."""

    work_dir: str
    sweep: SweepPlan = field(default_factory=SweepPlan)
    world: bool = True
    rank_timeout_s: float = 900.0
    world_timeout_s: float = 600.0
    join_timeout_s: float = 60.0
    baseline: Baseline | None = None
    rules: tuple[Rule, ...] = ()
    settings: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class FleetDeps:
    """What a rank does, as functions (tests script failing, hanging and slow ranks with them); the crosschecks:
    ``fleet --crosscheck``'s, after a GPU's suite and after the node tests."""

    transport: Transport
    bench: Callable[[int], Bench]
    probe: Callable[[], tuple[Environment, tuple[Check, ...]]]
    node: Callable[[tuple[int, ...], str], Node]
    world: Callable[[WorldGo, int, RankContext, tuple[int, ...], str], tuple[tuple[RankOutput, ...], Launch | None]]
    clock: Callable[[], float] = time.monotonic
    gpu_crosscheck: Callable[[Bench, int], Crosscheck] | None = None
    node_crosscheck: Callable[[Node, str], Crosscheck] | None = None


# After a stop signal, how long rank 0 still takes for the hand-overs in flight (torchrun gives its
# workers 30 s between SIGTERM and SIGKILL; the report must be written well inside that).
STOP_GRACE_S = 5.0


@dataclass
class _Progress:
    """What this rank has done so far: what rank 0 gathers from, also after a stop signal."""

    join: RankJoin
    go: WorldGo | None = None
    world_done: float | None = None  # when this node's share of the world sweep ended (clock)


def run_rank(ctx: RankContext, options: FleetOptions, deps: FleetDeps, gpus: tuple[int, ...]) -> Fleet | None:
    """This rank's part of the fleet run; rank 0 returns the Fleet, the others None. Never raises for what its
    own work does. After KeyboardInterrupt (also SIGTERM / SIGHUP, as ``envcheck fleet`` turns them) rank 0
    gathers at once what was handed over and returns the partial fleet; any other rank raises it again."""
    from envcheck.probes.collect import utc_now

    t = deps.transport
    clock = deps.clock
    t0 = clock()
    started = utc_now()
    my_gpu = gpus[ctx.local_rank] if ctx.local_rank < len(gpus) else None
    progress = _Progress(RankJoin(ctx.rank, ctx.host, ctx.local_rank, ctx.node_rank, my_gpu))
    interrupted = False
    try:
        _work(ctx, options, deps, gpus, progress, t0)
    except KeyboardInterrupt:
        if ctx.rank != 0:
            raise
        interrupted = True
    if ctx.rank != 0:
        # Rank 0 hosts the store: stay until it has read everything (or give up after the same wait).
        t.get("done", options.rank_timeout_s + options.world_timeout_s + options.join_timeout_s)
        return None
    try:
        fleet = _gather(ctx, options, deps, progress, t0, started, patient=not interrupted)
    except KeyboardInterrupt:
        # Stopped while waiting for the others: what they had handed over, without waiting again.
        interrupted = True
        fleet = _gather(ctx, options, deps, progress, t0, started, patient=False)
    if interrupted:
        fleet = replace(fleet, settings={**fleet.settings, "interrupted": True})
    return fleet


def _work(ctx: RankContext, options: FleetOptions, deps: FleetDeps, gpus: tuple[int, ...], progress: _Progress,
          t0: float) -> None:
    """This rank's own part: its suite, its node's tests (leaders), its node's share of the world sweep."""
    t = deps.transport
    clock = deps.clock
    t.put(f"join/{ctx.rank}", _dump(progress.join))

    # 1. this rank's GPU
    try:
        report = RankReport(ctx.rank, bench=deps.bench(ctx.local_rank), elapsed_s=round(clock() - t0, 3))
    except KeyboardInterrupt as stop:
        # Stopped during its suite: hand over the partial bench ``bench`` raised it with, then stop.
        if stop.args and isinstance(stop.args[0], Bench):
            t.put(f"rank/{ctx.rank}", _dump(RankReport(ctx.rank, bench=stop.args[0], error="interrupted",
                                                       elapsed_s=round(clock() - t0, 3))))
        raise
    except Exception as e:  # noqa: BLE001 - the error is the rank's result
        report = RankReport(ctx.rank, error=one_line(e), elapsed_s=round(clock() - t0, 3))
    gpu_cross, bench = deps.gpu_crosscheck, report.bench
    if gpu_cross is not None and bench is not None:
        report = replace(report, crosscheck=_crosschecked(lambda: gpu_cross(bench, ctx.local_rank)))
    t.put(f"rank/{ctx.rank}", _dump(report))
    t.put(f"benched/{ctx.node_rank}/{ctx.local_rank}", "1")

    # 2. the node (its leader), once every GPU of the node is done with its suite (or both would be disturbed)
    if ctx.leader:
        node_dir = os.path.join(options.work_dir, f"node{ctx.node_rank}")
        got = NodeReport(ctx.node_rank, ctx.host)  # what the node has so far
        try:
            env, checks = deps.probe()
            got = replace(got, environment=env, checks=checks)
            deadline = clock() + options.rank_timeout_s
            for local in range(1, ctx.local_world_size):
                t.get(f"benched/{ctx.node_rank}/{local}", max(deadline - clock(), 0.001))
            node = deps.node(gpus, node_dir)
            got = replace(got, node=node)
            node_cross = deps.node_crosscheck
            if node_cross is not None:
                got = replace(got, crosscheck=_crosschecked(lambda: node_cross(node, node_dir)))
        except KeyboardInterrupt as stop:
            # The node tests return what they finished with the interrupt: hand that over, then stop.
            if stop.args and isinstance(stop.args[0], Node):
                t.put(f"node/{ctx.node_rank}", _dump(replace(got, node=stop.args[0], crosscheck=None)))
            raise
        except Exception as e:  # noqa: BLE001 - the error is the node's result
            got = replace(got, error=one_line(e))
        t.put(f"node/{ctx.node_rank}", _dump(got))

    # 3. the world sweep, started by every leader at once (one node's own sweep already covers its ranks)
    if options.world and ctx.nnodes >= 2 and ctx.world_size >= 2:
        if ctx.leader:
            t.put(f"world/ready/{ctx.node_rank}", "1")
        if ctx.rank == 0:
            deadline = clock() + options.rank_timeout_s
            ready = tuple(n for n in range(ctx.nnodes)
                          if t.get(f"world/ready/{n}", max(deadline - clock(), 0.001)) is not None)
            progress.go = WorldGo(ready, ctx.master_addr, free_port())
            t.put("world/go", _dump(progress.go))
        elif ctx.leader:
            progress.go = _load(WorldGo, t.get("world/go", options.rank_timeout_s + options.join_timeout_s))
        go = progress.go
        if ctx.leader and go is not None and ctx.node_rank in go.nodes:
            try:
                outs, launch = deps.world(go, go.nodes.index(ctx.node_rank), ctx, gpus,
                                          os.path.join(options.work_dir, "world"))
                mine = WorldOutputs(ctx.node_rank, outs, launch)
            except Exception as e:  # noqa: BLE001
                mine = WorldOutputs(ctx.node_rank, error=one_line(e))
            t.put(f"world/out/{ctx.node_rank}", _dump(mine))
            progress.world_done = clock()
            if mine.launch is not None and mine.launch.interrupted:
                raise KeyboardInterrupt  # the launcher took the signal and stopped the sweep: stop too


def _gather(ctx: RankContext, options: FleetOptions, deps: FleetDeps, progress: _Progress, t0: float, started: str,
            patient: bool) -> Fleet:
    """Rank 0: everything the ranks handed over, each waited for at most its time limit (``patient``) or, after a
    stop signal, all together at most ``STOP_GRACE_S`` (the others got the signal too and hand over at once)."""
    t = deps.transport
    clock = deps.clock
    deadline = clock() + options.rank_timeout_s

    grace_end = clock() + STOP_GRACE_S

    def wait(limit: float) -> float:
        return max(limit, 0.001) if patient else max(min(limit, grace_end - clock()), 0.001)

    def given(limit: float) -> float:
        return limit if patient else STOP_GRACE_S

    joins = {0: progress.join, **{r: j for r in range(1, ctx.world_size)
                                  if (j := _load(RankJoin, t.get(f"join/{r}", wait(options.join_timeout_s))))}}
    names = _node_names(joins)
    reports: dict[int, RankReport] = {}
    statuses: dict[int, RankStatus] = {}
    for r in range(ctx.world_size):
        j = joins.get(r)
        if j is None:
            statuses[r] = RankStatus(r, "missing", given_s=given(options.join_timeout_s))
            continue
        rep = _load(RankReport, t.get(f"rank/{r}", wait(deadline - clock())))
        host = names.get(j.node_rank, j.host)
        if rep is None:
            statuses[r] = RankStatus(r, "timeout", host, j.local_rank, j.gpu, phase="suite",
                                     given_s=round(given(options.rank_timeout_s), 3))
            continue
        reports[r] = rep
        statuses[r] = RankStatus(r, "error" if rep.error else "ok", host, j.local_rank, j.gpu, rep.error,
                                 elapsed_s=rep.elapsed_s, phase="suite" if rep.error else None)
    leaders = {j.node_rank: r for r, j in sorted(joins.items(), reverse=True) if j.local_rank == 0}

    def handed(n: int, phase: str, got: T | None, limit: float) -> T | None:
        """``got``, node ``n``'s hand-over of ``phase``; its leader's status says where it failed or never came."""
        r = leaders.get(n)
        error = getattr(got, "error", None)
        if r is not None and statuses[r].status == "ok" and (got is None or error):
            statuses[r] = replace(statuses[r], status="error" if error else "timeout", error=error, phase=phase,
                                  given_s=None if error else round(given(limit), 3))
        return got

    node_reports: dict[int, NodeReport] = {}
    for n in sorted({j.node_rank for j in joins.values()}):
        if (got := handed(n, "node", _load(NodeReport, t.get(f"node/{n}", wait(deadline - clock()))),
                          options.rank_timeout_s)) is not None:
            node_reports[n] = got
    collectives: list[Collectives] = []
    go = progress.go
    if go is not None:
        from envcheck.node.collective_run import assemble

        nproc = ctx.local_world_size
        outs: list[RankOutput] = []
        launch: Launch | None = None
        # One job: once this node's share ended, a leader silent for the join time is lost.
        lasting = options.join_timeout_s if progress.world_done is not None else options.world_timeout_s
        for n in go.nodes:
            since = clock() - progress.world_done if progress.world_done is not None else 0.0
            w = handed(n, "world", _load(WorldOutputs, t.get(f"world/out/{n}", wait(lasting - since))), lasting)
            if w is not None:
                outs.extend(w.outputs)
                launch = launch or w.launch
        for r, j in joins.items():
            if j.node_rank in go.nodes:
                statuses[r] = replace(statuses[r], world_rank=go.nodes.index(j.node_rank) * nproc + j.local_rank)
        collectives.append(assemble(outs, options.sweep, nproc * len(go.nodes), "world", launch))
    return Fleet(ctx.world_size, ctx.nnodes, ctx.launcher, _nodes(names, joins, reports, node_reports),
                 tuple(statuses[r] for r in range(ctx.world_size)), tuple(collectives), options.rules,
                 options.baseline, {**options.settings, "rank_timeout_s": options.rank_timeout_s,
                                    "world_timeout_s": options.world_timeout_s}, started, round(clock() - t0, 3))


def _node_names(joins: dict[int, RankJoin]) -> dict[int, str]:
    """Node rank -> name: its host, with ``/<node rank>`` when two nodes share a host (simulated nodes)."""
    hosts: dict[int, str] = {}
    for j in sorted(joins.values(), key=lambda j: j.rank):
        hosts.setdefault(j.node_rank, j.host)
    counts = Counter(hosts.values())
    return {n: (h if counts[h] == 1 else f"{h}/{n}") for n, h in hosts.items()}


def _nodes(names: dict[int, str], joins: dict[int, RankJoin], reports: dict[int, RankReport],
           node_reports: dict[int, NodeReport]) -> tuple[FleetNode, ...]:
    out = []
    for n, name in sorted(names.items()):
        ranks = tuple(sorted(r for r, j in joins.items() if j.node_rank == n))
        benches = tuple(reports[r].bench for r in ranks if r in reports and reports[r].bench is not None)
        nr = node_reports.get(n)
        crosschecks = [c for c in (*(reports[r].crosscheck for r in ranks if r in reports),
                                   nr.crosscheck if nr else None) if c is not None]
        cross = Crosscheck.joined(*crosschecks) if crosschecks else None
        out.append(FleetNode(name, ranks, nr.environment if nr else None, nr.checks if nr else (), benches,
                             nr.node if nr else None, cross))
    return tuple(out)


def _crosschecked(run: Callable[[], Crosscheck]) -> Crosscheck:
    """A part's cross-checks; a bug of envcheck's in them is that part's note, never the rank's end."""
    from envcheck.analysis.crosscheck import CRASHED_NOTE
    from envcheck.model import Note

    try:
        return run()
    except Exception as e:  # noqa: BLE001 - the cross-checks are extra: the rank's own results stand
        return Crosscheck(notes=(Note(CRASHED_NOTE, {"detail": one_line(e)}),))


def free_port() -> int:
    """A TCP port free on this host now, for the world sweep's rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])
