"""``envcheck fleet``, run by every rank of ``torchrun ... -m envcheck fleet`` (or ``srun``): rank 0 writes one dated
fleet report and prints which nodes to take out of service and why. Each rank's working files are removed when
the fleet passed, else kept and named.

Exit status (rank 0; the others exit 0 once it is done): 0 every node passed and every rank reported; 1 a node
failed a rule or could not be measured, or a rank failed, hung, died or never joined; 2 bad options or no launcher;
130 Ctrl-C, SIGTERM or SIGHUP (every rank stops its children; rank 0 first writes the partial report)."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from envcheck.commands import tell
from envcheck.commands.options import FleetOptions, RunOptions
from envcheck.errors import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, UsageError
from envcheck.model import Bench, Environment, Report
from envcheck.model.fleet import Baseline, Fleet, FleetNode, Rule
from envcheck.model.node import Launch, Node
from envcheck.render.i18n import t

if TYPE_CHECKING:
    from envcheck.analysis import Analysis
    from envcheck.bench.protocol import Event
    from envcheck.node.collective_run import RankOutput, SweepPlan
    from envcheck.node.fleet_rank import FleetDeps, RankContext, WorldGo
    from envcheck.node.transport import Transport

DEFAULT_SWEEP_SIZES = "1M..4G"  # on GPUs (NCCL); on the CPU the node tests' small gloo sweep


def parse_rule(text: str) -> Rule:
    """``--rule node.all_reduce:higher:0.1`` (metric prefix, direction, margin as a fraction)."""
    parts = text.split(":")
    if len(parts) != 3:
        raise UsageError("error.rule_form", rule=repr(text))
    try:
        return Rule(parts[0], parts[1], float(parts[2]))
    except ValueError as e:
        raise UsageError("error.flag", flag=f"--rule {text!r}", error=e) from None


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


def parse_sweep_sizes(text: str) -> tuple[int, ...]:
    """``1M..4G`` (times 4, as nccl-tests -f 4) or a list ``64K,1M``."""
    from envcheck.node.collective_run import sizes

    try:
        if ".." in text:
            lo, hi = text.split("..", 1)
            return sizes(parse_size(lo), parse_size(hi), 4)
        return tuple(parse_size(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError("error.sweep_sizes", sizes=repr(text)) from None


def load_baseline(path: str) -> Baseline:
    """``--baseline``: a fleet report's nodes, or one machine's report as one node."""
    from envcheck.analysis.fleet import baseline_from_nodes
    from envcheck.model import ReportError, load
    from envcheck.model.codec import VERDICT_KINDS

    try:
        report = load(path, VERDICT_KINDS)
    except ReportError as e:
        raise UsageError("error.baseline", error=e) from None
    nodes = report.fleet.nodes if report.fleet is not None else (
        FleetNode(report.host, (), report.environment, report.checks, report.benches, report.node),)
    return baseline_from_nodes(nodes, path, report.host, report.created)


def real_deps(args: FleetOptions, ctx: RankContext, transport: Transport, sweep: SweepPlan, out_dir: str,
              cpu: bool) -> FleetDeps:
    """Each rank's work as envcheck does it for real: subprocess workers, torchrun, NVML; ``cpu``: the node's
    collectives on gloo with CPU tensors, whatever GPUs the machine has (``--cpu``, or no GPU)."""
    from envcheck.bench import runner, suite
    from envcheck.checks import evaluate
    from envcheck.node.collective_run import Placement, launch_sweep, read_outputs
    from envcheck.node.fleet_rank import FleetDeps, local_gpus
    from envcheck.node.launch import SubprocessLauncher
    from envcheck.node.peer import PeerPlan
    from envcheck.node.steps import NodeOptions, run_node
    from envcheck.probes.collect import collect, utc_now
    from envcheck.probes.link_counters import LINKS_SECTION, probe_links

    launcher = SubprocessLauncher()
    gpus = local_gpus(ctx, os.environ)

    @functools.cache
    def environment() -> Environment:
        _step(ctx.rank, t("fleet.cli.probing"))
        env = collect(runtime=True, timeout=120.0, reports_dir=out_dir)
        if ctx.leader:
            env = Environment({**env.sections, LINKS_SECTION: probe_links()}, env.gpus, env.probe_s)
        return env

    def bench(gpu: int) -> Bench:
        env = environment()
        # Without a GPU every rank of the host times the CPU (device 0), sharing it.
        options = RunOptions(quick=not args.full, ops=args.ops, sizes=args.sizes, dtypes=args.dtypes,
                             no_compile=args.no_compile)
        plan = suite.plan(options, env, gpu=gpu if device() == "cuda" else 0)
        started = utc_now()
        if not plan.runnable:
            return runner.no_bench(plan, started)
        t0 = time.monotonic()
        where = t("run.cli.on_gpu", gpu=gpu) if device() == "cuda" else t("run.cli.on_cpu")
        _step(ctx.rank, t("fleet.cli.suite", count=len(plan.cases), where=where))
        outcome = runner.run_worker(plan, _case_lines(ctx.rank, len(plan.cases)), args.timeout)
        bench_ = _machine_index(runner.assemble(plan, outcome, started, time.monotonic() - t0), gpu, gpus)
        if outcome.interrupted:
            raise KeyboardInterrupt(bench_)
        return bench_

    def device() -> str:
        return "cuda" if environment().get("torch_runtime", "cuda_available") else "cpu"

    def node(gpus: tuple[int, ...], work_dir: str) -> Node:
        dev = "cpu" if cpu else device()
        # --crosscheck: the node's own sweep runs a plain torch.distributed loop too (not the world's).
        plan = replace(sweep, crosscheck_loop=args.crosscheck and dev == "cuda")
        _step(ctx.rank, t(f"fleet.cli.node.{dev}"))
        return run_node(NodeOptions(gpus, work_dir, dev, plan, PeerPlan() if dev == "cuda" else None))

    def world(go: WorldGo, node_index: int, ctx_: RankContext, gpus: tuple[int, ...], work_dir: str
              ) -> tuple[tuple[RankOutput, ...], Launch | None]:
        d = os.path.join(work_dir, f"node{ctx_.node_rank}")
        placement = Placement(ctx_.local_world_size, gpus if device() == "cuda" else None, len(go.nodes),
                              node_index, go.master_addr, go.master_port)
        _step(ctx.rank, t("fleet.cli.world", count=len(go.nodes)))
        launch = launch_sweep(sweep, placement, d, launcher, args.world_timeout)
        return read_outputs(d), launch

    deps = FleetDeps(transport, bench, lambda: (environment(), tuple(evaluate(environment()))), node, world)
    if args.crosscheck:
        from envcheck.crosscheck.tools import kernel_crosscheck, node_crosscheck

        deps = replace(deps, gpu_crosscheck=lambda b, ordinal: kernel_crosscheck(
            [b], cuda_indices={b.device.index or 0: ordinal}).crosscheck,
                       node_crosscheck=lambda n, d: node_crosscheck(n, d, launcher=launcher).crosscheck)
    return deps


def _step(rank: int, text: str) -> None:
    """A line on stderr as each long step of a rank starts (probing, its suite, the node tests, the world)."""
    print(t("fleet.cli.step", rank=rank, text=text), file=sys.stderr, flush=True)


def _case_lines(rank: int, total: int) -> Callable[[Event], None]:
    """The suite's progress: a line per case started, counted."""
    from envcheck.bench.protocol import CaseStarted

    started = iter(range(1, total + 1))

    def on_event(ev: Event) -> None:
        if isinstance(ev, CaseStarted):
            _step(rank, f"[{next(started, total)}/{total}] {ev.case.label}")
    return on_event


def _machine_index(bench: Bench, ordinal: int, gpus: tuple[int, ...]) -> Bench:
    """The bench named by its GPU's machine index (NVML's, as the node tests name it), not its CUDA ordinal: two
    nodes simulated on one machine each see their GPU as CUDA device 0."""
    if bench.device.backend != "cuda" or ordinal >= len(gpus) or bench.device.index == gpus[ordinal]:
        return bench
    return replace(bench, device=replace(bench.device, index=gpus[ordinal]))


def fleet_report(fleet: Fleet, environment: Environment | None) -> Report:
    """The fleet report: rank 0's environment and the fleet body."""
    from envcheck.probes.collect import new_report

    host = fleet.nodes[0].host if fleet.nodes else "fleet"
    return new_report("fleet", environment or Environment(), host=host, fleet=fleet)


def print_summary(report: Report, analysis: Analysis, written: list[Path], stdout: TextIO | None = None) -> None:
    """What rank 0 prints: verdicts and why, failed or slow ranks, the world sweep, GPUs, files written."""
    from rich.markup import escape

    from envcheck.analysis.fleet import on_cpu
    from envcheck.render.terminal.console import make_console
    from envcheck.render.terminal.crosscheck import print_crosscheck
    from envcheck.render.terminal.node import print_fleet

    console = make_console(stdout)
    print_fleet(console, report, analysis, written)
    if analysis.fleet is not None and analysis.fleet.nodes and all(on_cpu(n.node) for n in analysis.fleet.nodes):
        console.print(escape(t("fleet.exit_cpu")))
    for host, cross in analysis.fleet_crosschecks:  # fleet --crosscheck: each node's ratios and their bars
        print_crosscheck(console, cross, host)


def sweep_plan(args: FleetOptions, cpu: bool) -> SweepPlan:
    """The collectives' plan: nccl-tests' sweep on GPUs, the node tests' small one on the CPU, as given."""
    from envcheck.node.collective_run import SweepPlan
    from envcheck.node.steps import quick_sweep

    base = quick_sweep("cpu") if cpu else SweepPlan(sizes=parse_sweep_sizes(DEFAULT_SWEEP_SIZES))
    return replace(base, sizes=parse_sweep_sizes(args.sweep_sizes) if args.sweep_sizes else base.sizes,
                   narrow=base.narrow and not args.no_narrow,
                   iters=args.iters if args.iters is not None else base.iters,
                   warmup=args.warmup if args.warmup is not None else base.warmup)


# What the kernel sends a rank when its launcher dies (PR_SET_PDEATHSIG): nothing else sends it, so a launcher
# killed is told apart from torchrun's own SIGTERM.
LAUNCHER_GONE = signal.SIGUSR2


class _StopSignals:
    """SIGTERM and SIGHUP (torchrun stopping the ranks, Slurm at a job's end) handled like Ctrl-C, once, and only
    noted while the report is written; the launcher's death (``LAUNCHER_GONE``) stops the rank too, and then
    rank 0 writes nothing: a job its owner killed has no verdict."""

    def __init__(self) -> None:
        self.armed = True
        self.received: str | None = None
        self.launcher_gone = False
        self.launcher = os.getppid()

    def __call__(self, signum: int, frame: object) -> None:
        if signum == LAUNCHER_GONE:
            # It also comes when the launcher's thread that started this rank ends: only re-parenting counts.
            if os.getppid() == self.launcher:
                return
            self.launcher_gone = True
        self.received = self.received or signal.Signals(signum).name
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt(self.received)

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self)
        from envcheck.harness.command import parent_death_signal

        ask = parent_death_signal(LAUNCHER_GONE)
        if ask is None:
            return
        signal.signal(LAUNCHER_GONE, self)
        ask()
        if os.getppid() != self.launcher:  # gone before the kernel was asked to tell
            self.launcher_gone = True
            self.armed = False
            raise KeyboardInterrupt(LAUNCHER_GONE.name)


def main(args: FleetOptions) -> int:
    from envcheck.commands.publish import output_formats

    formats = output_formats(args.format)  # a bad --format fails here, before any rank starts work
    stops = _StopSignals()
    try:
        stops.install()
        return _main(args, formats, stops)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _main(args: FleetOptions, formats: list[str], stops: _StopSignals) -> int:
    from envcheck.commands.publish import output_dir, publish
    from envcheck.node.fleet_rank import FleetOptions, export_for_torch, local_gpus, rank_context, run_rank
    from envcheck.node.transport import open_store_transport
    from envcheck.userdirs import out_dir as default_out_dir

    out_text = default_out_dir(args.out_dir)
    ctx = rank_context(os.environ)
    # Rank 0 writes: a folder it cannot write is one line before any work.
    out_dir = output_dir(out_text) if ctx.rank == 0 else Path(out_text)
    cpu = bool(args.cpu) or not _has_gpu()
    baseline = load_baseline(args.baseline) if args.baseline else None
    rules = tuple(parse_rule(r) for r in args.rule or ())
    sweep = sweep_plan(args, cpu)
    export_for_torch(ctx, os.environ)  # type: ignore[arg-type]
    transport = open_store_transport(ctx.rank, ctx.world_size, ctx.master_addr, args.join_timeout)
    work_dir = tempfile.mkdtemp(prefix=f"envcheck-fleet-r{ctx.rank}-")
    deps = real_deps(args, ctx, transport, sweep, out_text, cpu)
    options = FleetOptions(work_dir, sweep, not args.no_world, args.rank_timeout, args.world_timeout,
                           args.join_timeout, baseline, rules,
                           {"quick": not args.full, "sweep_sizes": list(sweep.sizes)})
    try:
        fleet = run_rank(ctx, options, deps, local_gpus(ctx, os.environ))
    except KeyboardInterrupt:
        transport.close()
        _keep(work_dir, ctx.rank)
        raise
    if fleet is None:
        verdict = transport.get("done", 0.0)
        transport.close()
        _keep(work_dir, ctx.rank, passed=verdict == "pass")
        return EXIT_OK
    stops.armed = False  # the report is written whatever arrives now
    if stops.launcher_gone:
        transport.close()
        _keep(work_dir, ctx.rank)
        print(t("fleet.cli.launcher_gone"), file=sys.stderr)
        return EXIT_INTERRUPTED
    if fleet.settings.get("interrupted"):
        fleet = replace(fleet, settings={**fleet.settings, "interrupted": stops.received or "SIGINT"})
    passed = False
    try:
        report = fleet_report(fleet, fleet.nodes[0].environment if fleet.nodes else None)
        out = publish(report, None, out_dir, formats, datetime.now(timezone.utc), sys.stderr, None, "fleet")
        analysis = out.analysis
        passed = analysis.fleet is not None and analysis.fleet.passed and all(
            c.ok for _, c in analysis.fleet_crosschecks)
        print_summary(report, analysis, out.written, out.stream)
    finally:
        transport.put("done", "pass" if passed else "fail")  # the other ranks may go
        time.sleep(0.5)  # the others read "done" from this rank's store before it goes
        transport.close()
    _keep(work_dir, ctx.rank, passed)
    drain = analysis.fleet.drain if analysis.fleet is not None else ()
    if drain:
        tell(t("fleet.drain", hosts=", ".join(v.host for v in drain), count=len(drain)))
    return EXIT_INTERRUPTED if fleet.settings.get("interrupted") else EXIT_OK if passed else EXIT_FAIL


def _keep(work_dir: str, rank: int, passed: bool = False) -> None:
    """The rank's working files (children's logs and outputs): removed when the fleet passed, else named."""
    if not passed and os.path.isdir(work_dir) and os.listdir(work_dir):
        tell(t("fleet.work_kept", rank=rank, path=work_dir))
    else:
        shutil.rmtree(work_dir, ignore_errors=True)


def _has_gpu() -> bool:
    """Whether NVML lists a GPU here: every rank of a uniform fleet answers the same."""
    from envcheck.probes.nvml import Nvml

    nvml = Nvml()
    try:
        if nvml.init() is not None:
            return False
        count, _ = nvml.query("nvmlDeviceGetCount")
        return isinstance(count, int) and count > 0
    finally:
        nvml.shutdown()
