"""One node's tests across its GPUs, in order (``run --gpus`` after the suites, and each fleet node's leader):
topology, error counters, peer copies, the collective sweep, counters again and the kernel log. A step that can
crash or hang runs in a child with its own limit; a failed step is recorded and the next runs."""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from envcheck.analysis.node import CRASHED
from envcheck.harness.signals import as_interrupt, stop_signals
from envcheck.model import Bench, Check
from envcheck.model.node import Collectives, CounterSnapshot, Node, NodeSkip, PeerCopies, Topology, XidScan
from envcheck.node.collective_run import SweepPlan, sizes
from envcheck.node.launch import Launcher, SubprocessLauncher
from envcheck.node.peer import PeerPlan
from envcheck.probes.gpus import NvmlLike
from envcheck.probes.host import Host

if TYPE_CHECKING:
    from envcheck.bench.parallel import OnGpuEvent
    from envcheck.bench.suite import Plan

T = TypeVar("T")

# Stage limits: room for 4 GiB all_reduce on 8 slow PCIe GPUs (~0.9 s a call); NVLink needs a tenth.
SWEEP_TIMEOUT_S = 480.0
PEER_TIMEOUT_S = 240.0
SMI_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class NodeOptions:
    """What to run on this node's GPUs ``gpus`` (machine indices); ``work_dir`` keeps the children's files."""

    gpus: tuple[int, ...]
    work_dir: str
    device: str = "cuda"
    sweep: SweepPlan | None = field(default_factory=SweepPlan)
    peer: PeerPlan | None = field(default_factory=PeerPlan)
    sweep_timeout_s: float = SWEEP_TIMEOUT_S
    peer_timeout_s: float = PEER_TIMEOUT_S
    outlier_margin: float = 0.05


@dataclass(frozen=True)
class NodeDeps:
    nvml: Callable[[], NvmlLike]
    host: Host
    launcher: Launcher
    kmsg: Callable[[], str] | None = None


def _smi(host: Host, argv: list[str]) -> tuple[str | None, str | None]:
    r = host.run(argv, timeout=SMI_TIMEOUT_S)  # Host.run gives every child the child environment
    return (r.stdout, None) if r.ok else (None, r.describe())


def probe_node_topology(nvml: NvmlLike, host: Host, gpus: tuple[int, ...]) -> Topology:
    from envcheck.probes.topology import probe_topology

    topo, why = _smi(host, ["nvidia-smi", "topo", "-m"])
    speeds, _ = _smi(host, ["nvidia-smi", "nvlink", "-s"])
    return probe_topology(nvml, gpus, topo, speeds, why)


def _guard(what: str, skipped: list[NodeSkip], fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - one step's bug must not cost the other steps
        skipped.append(NodeSkip(what, f"{CRASHED}: {type(e).__name__}: {e}".splitlines()[0][:200]))
        return None


def run_node(options: NodeOptions, deps: NodeDeps | None = None) -> Node:
    """Every node test; never raises but KeyboardInterrupt, the node as far as it got in its ``args[0]``."""
    from envcheck.node.collective_run import Placement, run_sweep
    from envcheck.node.peer import run_peer_copies
    from envcheck.probes.collect import utc_now
    from envcheck.probes.link_counters import read_counters
    from envcheck.probes.xid import scan_xids

    if deps is None:
        from envcheck.probes.host import default_host
        from envcheck.probes.nvml import Nvml

        deps = NodeDeps(Nvml, default_host(), SubprocessLauncher())
    t0 = time.monotonic()
    started = utc_now()
    work = Path(options.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    skipped: list[NodeSkip] = []
    gpus = options.gpus
    nvml = deps.nvml()
    topology: Topology | None = None
    before: CounterSnapshot | None = None
    after: CounterSnapshot | None = None
    peer: PeerCopies | None = None
    collectives: list[Collectives] = []
    xid: XidScan | None = None
    settings: dict[str, object] = {"outlier_margin": options.outlier_margin, "device": options.device,
                                "peer": options.peer.to_json() if options.peer else None,
                                "sweep_timeout_s": options.sweep_timeout_s, "peer_timeout_s": options.peer_timeout_s}

    def node(interrupted: bool = False) -> Node:
        return Node(socket.gethostname() or "unknown", gpus, topology, before, after, xid, peer, tuple(collectives),
                    tuple(skipped), {**settings, "interrupted": True} if interrupted else dict(settings), started,
                    round(time.monotonic() - t0, 3))

    try:
        try:
            topology = _guard("topology", skipped, lambda: probe_node_topology(nvml, deps.host, gpus))
            before = _guard("counters", skipped, lambda: read_counters(nvml, gpus, deps.host))
            if options.device != "cuda":
                skipped.append(NodeSkip("peer_copies", "no_cuda"))
            elif options.peer is None:
                skipped.append(NodeSkip("peer_copies", "not_requested"))
            else:
                peer = _guard("peer_copies", skipped, lambda: run_peer_copies(
                    options.peer, gpus, deps.launcher, options.peer_timeout_s))
                if peer is not None and peer.error == "interrupted":
                    raise KeyboardInterrupt
            if options.sweep is None:
                skipped.append(NodeSkip("collectives", "not_requested"))
            elif len(gpus) < 2:
                skipped.append(NodeSkip("collectives", "single_gpu"))
            else:
                placement = Placement(len(gpus), gpus if options.device == "cuda" else None)
                c = _guard("collectives", skipped, lambda: run_sweep(
                    options.sweep, placement, work / "collectives", deps.launcher, options.sweep_timeout_s))
                if c is not None:
                    collectives.append(c)
                    if c.error == "interrupted":
                        raise KeyboardInterrupt
            after = _guard("counters", skipped, lambda: read_counters(nvml, gpus, deps.host))
            xid = _guard("xid", skipped, lambda: scan_xids(deps.host, deps.kmsg))
        finally:
            nvml.shutdown()
    except KeyboardInterrupt:
        raise KeyboardInterrupt(node(interrupted=True)) from None
    return node()


def quick_sweep(device: str) -> SweepPlan:
    """The sweep ``envcheck run --gpus`` runs: nccl-tests' 1 MiB .. 4 GiB on GPUs, a small one on the CPU (gloo)."""
    if device == "cuda":
        return SweepPlan()
    return SweepPlan(sizes=sizes(1 << 16, 1 << 22, 4), warmup=2, iters=5, device="cpu", narrow=False)


@dataclass(frozen=True)
class NodeRun:
    """What ``envcheck run --gpus`` adds to a report: a bench per GPU, the node, and the link counters' checks."""

    gpus: tuple[int, ...]
    benches: tuple[Bench, ...]
    node: Node
    checks: tuple[Check, ...] = ()
    interrupted: bool = False


def run_node_suite(gpus: tuple[int, ...], plans: Sequence[Plan], work_dir: str, timeout: float, *,
                   crosscheck: bool = False, outlier_margin: float = 0.05,
                   on_event: OnGpuEvent | None = None, deps: NodeDeps | None = None,
                   worker_command: Sequence[str] | None = None) -> NodeRun:
    """``envcheck run --gpus``: every GPU's suite (one plan each) at once, then the node tests."""
    from envcheck.bench import parallel, runner
    from envcheck.checks import guarded
    from envcheck.checks.links import delta_checks

    device = plans[0].backend if plans and plans[0].backend else "cpu"
    done = parallel.run_gpus(plans, timeout, on_event, command=worker_command or runner.WORKER_COMMAND)
    interrupted = done.stopped is not None
    benches = tuple(r.bench for r in done.runs)
    sweep = dataclasses.replace(quick_sweep(device), crosscheck_loop=crosscheck and device == "cuda")
    options = NodeOptions(gpus, work_dir, device, sweep, PeerPlan() if device == "cuda" else None,
                          outlier_margin=outlier_margin)
    if interrupted:
        return NodeRun(gpus, benches, Node(socket.gethostname(), gpus, settings={"interrupted": True}), (), True)
    try:
        with stop_signals(as_interrupt):
            node = run_node(options, deps)
    except KeyboardInterrupt as e:
        node = e.args[0] if e.args and isinstance(e.args[0], Node) else Node(socket.gethostname(), gpus)
        interrupted = True
    return NodeRun(gpus, benches, node, tuple(guarded("links", delta_checks, node)), interrupted)
