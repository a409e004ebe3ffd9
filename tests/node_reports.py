"""Node and fleet reports for the renderers' tests, built from the real 2 x H200 capture (tests/fixtures/node/).

What comes from the capture, as it was measured or answered:

* the topology (NVML's answers per GPU, NVLink and pair; ``nvidia-smi topo -m`` and ``nvlink -s``),
  the error counters (NVML, read twice a minute apart) and the GPUs' facts (the H200 x2 NVML table);
* the collectives: every op and size nccl-tests timed on the pair (``nccl_tests_x2.txt``, the
  placement envcheck compares with), with the algorithm and protocol NCCL logged for them
  (``nccl_sweep_x2.log``: 1 MiB, 64 MiB and 1 GiB; the other sizes are "not in the NCCL log", as they
  would be in a real report).

What the capture does not hold, and is therefore representative rather than measured: the per-GPU
suites (``factories.bench``, shaped like the committed H200 reports), the peer copies (no peer-copy
worker ran on the pair yet: the rates are what NVLink 4 through NVSwitch and PCIe Gen5 x16 give,
about 80 % of the links' 450 and 63 GB/s) and everything about a second node, a slow rank or a
failure (``trouble``), which no lent machine has shown.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import factories
from fakes import FakeHost
from node_fakes import capture, fake_nvml, text

from envcheck.analysis import node as an
from envcheck.analysis.collectives import IN_PLACE_OPS, collective_row, layout
from envcheck.analysis.fleet import baseline_from_nodes
from envcheck.analysis.narrowing import NarrowStep, next_narrowing_group
from envcheck.bench.l2 import rotation_sets
from envcheck.checks.links import delta_checks
from envcheck.model import Check, Environment, Report, Timing, known
from envcheck.model.fleet import Fleet, FleetNode, RankStatus
from envcheck.model.node import (
    CollectiveResult,
    Collectives,
    Copy,
    CounterSnapshot,
    Launch,
    Node,
    NodeSkip,
    PeerAccess,
    PeerCopies,
    RankOutcome,
    RankTiming,
    TopoCell,
    XidEvent,
    XidScan,
)
from envcheck.node import nccl_tests
from envcheck.node.collective_bench import CAPTURES, COMMUNICATORS, allocations_for, buffer_bytes
from envcheck.node.nccl_log import distinct, parse_choices
from envcheck.probes.collect import read_nvml
from envcheck.probes.link_counters import LINKS_SECTION, links_section, read_counters
from envcheck.probes.topology import probe_topology

MiB, GiB = 1 << 20, 1 << 30
CREATED = "2026-11-22T03:10:00Z"
UPTIME_BEFORE, UPTIME_AFTER = 86400.0, 86472.0
SWEEP_SETTINGS = {"ops": ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"],
                  "sizes": [MiB << (2 * i) for i in range(7)], "warmup": 5, "iters": 20, "dtype": "float32",
                  "narrow_op": None, "narrow_size_bytes": None, "narrow_margin": 0.1}
# envcheck compares each op with nccl-tests' column of the same placement (analysis.node.IN_PLACE_OPS).
PEER_SETTINGS = {"size_bytes": 256 * MiB, "warmup": 3, "iters": 20, "bidirectional": True,
                 "methods": ["copy_engine", "sm_kernel"]}


def _host(uptime: float) -> FakeHost:
    return FakeHost(files={"/proc/uptime": f"{uptime:.2f} 1.00\n"})


def environment(host_gpus: tuple[int, ...] = (0, 1)) -> Environment:
    """factories' H200 stack, with the GPUs and the ``links`` section the H200 x2 NVML answers give."""
    env = factories.environment()
    nvml = fake_nvml()
    nvml.init()
    driver, gpus = read_nvml(nvml)
    links = links_section(nvml, _host(UPTIME_BEFORE), read_counters(nvml, host_gpus, _host(UPTIME_BEFORE)),
                          XidScan("/dev/kmsg"), host_gpus)
    torch_rt = {**env.sections["torch_runtime"], "device_count": known(len(gpus))}
    variables = {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_NVLS_ENABLE": "0", "HF_TOKEN": "<redacted>"}
    return Environment({**env.sections, "torch_runtime": torch_rt, "env": {"variables": known(variables)},
                        LINKS_SECTION: links}, gpus, env.probe_s)


def topology():
    cap = capture()
    nvml = fake_nvml()
    nvml.init()
    return probe_topology(nvml, (0, 1), cap["topo_m"]["stdout"], cap["nvlink_s"]["stdout"])


def counters(uptime: float) -> CounterSnapshot:
    nvml = fake_nvml()
    nvml.init()
    return read_counters(nvml, (0, 1), _host(uptime))


def bench(gpu: int, scale: float = 1.0, bandwidth_gbps: float = 4814.4):
    """One GPU's suite, as ``envcheck run --quick`` sizes it: two sizes per op (matmul 1024 and 4096)."""
    b = factories.bench(scale=scale, bandwidth_gbps=bandwidth_gbps, seed=gpu, sizes=(1 << 20, 1 << 26))
    cases = tuple(c for c in b.cases if c.op != "matmul" or c.shape[0] in (1024, 4096))
    return replace(b, cases=cases, device=replace(b.device, index=gpu, pci_bus_id=f"00000000:00:0{6 + gpu}.0",
                                                  uuid=f"GPU-00000000-0000-0000-0000-00000000000{gpu}"))


# The per-call floor the committed 2 x H200 evidence showed (issue 17: about 40-45 us whatever the size,
# Python's cost per torch.distributed call): the per-call times here are representative, the GPU times
# are nccl-tests' own.
PER_CALL_FLOOR_US = 45.0


def _timed(op: str, size: int, time_us: float, ranks: tuple[int, ...], iters: int = 20) -> CollectiveResult:
    lay = layout(op, size, len(ranks))
    per_call = max(time_us, PER_CALL_FLOOR_US)
    timings = tuple(RankTiming(r, Timing.from_samples("cuda_events", [per_call] * iters)) for r in ranks)
    gpu = tuple(RankTiming(r, Timing.from_samples("cuda_graph", [time_us] * iters, iters)) for r in ranks)
    # L2 kept cold as the bench keeps it on an H100 (50 MiB of L2).
    sets = rotation_sets(buffer_bytes(op, size, len(ranks)), 50 << 20, memory_bound=True, min_bytes=0)
    return CollectiveResult(op, lay.size_bytes, lay.count, "float32", ranks, timings, 0, gpu_timings=gpu,
                            rotation_sets=sets, allocations=allocations_for(buffer_bytes(op, size, len(ranks)),
                                                                            50 << 20, sets), captures=CAPTURES,
                            communicators=COMMUNICATORS)


def sweep() -> Collectives:
    """The pair's sweep: nccl-tests' times for every op and size, NCCL's logged algorithms."""
    results = []
    for row in nccl_tests.parse(text("nccl_tests_x2.txt")):
        placement = row.in_place if row.op in IN_PLACE_OPS else row.out_of_place
        results.append(_timed(row.op, row.size_bytes, placement.time_us, (0, 1)))
    choices = distinct(parse_choices(text("nccl_sweep_x2.log"), 0))
    outcomes = tuple(RankOutcome(r, "ok", "vm", r) for r in (0, 1))
    return Collectives("node", "nccl", 2, ("vm", "vm"), SWEEP_SETTINGS, tuple(results), choices=choices,
                       nccl_version="2.28.9", ranks=outcomes,
                       launch=Launch(("python", "-m", "torch.distributed.run"), 0, 480.0, 41.3))


def _copy(kind, method, src, dst, gbps, both=False, wrong=0, error=None):
    size = PEER_SETTINGS["size_bytes"]
    if error:
        return Copy(kind, method, src, dst, size, both, error=error)
    us = size * (2 if both else 1) / (gbps * 1e9) * 1e6
    return Copy(kind, method, src, dst, size, both, Timing.from_samples("cuda_events", [us] * 20), wrong,
                pinned=True if kind != "d2d" else None)


def peer(trouble: bool = False) -> PeerCopies:
    copies = [
        _copy("d2d", "copy_engine", 0, 1, 381.0), _copy("d2d", "copy_engine", 1, 0, 380.2),
        _copy("d2d", "copy_engine", 0, 1, 742.6, both=True),
        _copy("d2d", "sm_kernel", 0, 1, 402.9, wrong=4096 if trouble else 0),
        _copy("d2d", "sm_kernel", 1, 0, 401.7) if not trouble else _copy("d2d", "sm_kernel", 1, 0, 0, error="no_peer_access"),
        _copy("d2d", "sm_kernel", 0, 1, 771.4, both=True),
        _copy("h2d", "copy_engine", None, 0, 53.6), _copy("d2h", "copy_engine", 0, None, 54.9),
        _copy("h2d", "copy_engine", None, 1, 39.8 if trouble else 53.4), _copy("d2h", "copy_engine", 1, None, 54.7),
    ]
    access = (PeerAccess(0, 1, True), PeerAccess(1, 0, not trouble))
    return PeerCopies(tuple(copies), access, PEER_SETTINGS, duration_s=18.4)


def node(host: str = "vm", trouble: bool = False) -> Node:
    """The pair's node tests; ``trouble``: what a sick node shows (errors during the tests, a copy with
    wrong elements, a size out of memory, one never reached, a crashed step, nvidia-smi disagreeing)."""
    topo = topology()
    before, after = counters(UPTIME_BEFORE), counters(UPTIME_AFTER)
    c = sweep()
    skipped: tuple[NodeSkip, ...] = ()
    xid = XidScan("/dev/kmsg")
    if trouble:
        grew = {(1, "crc_data", 3): 51234, (1, "recovery", 3): 2}
        after = dataclasses.replace(after, counters=tuple(
            dataclasses.replace(x, value=(x.value or 0) + grew.get((x.gpu, x.name, x.link), 0)) for x in after.counters))
        results = list(c.results)
        for i, r in enumerate(results):
            if (r.op, r.size_bytes) == ("all_reduce", 4 * GiB):
                results[i] = CollectiveResult(r.op, r.size_bytes, r.count, r.dtype, r.ranks, skipped="out_of_memory",
                                              need_bytes=8 * GiB, free_bytes=6 * GiB)
            elif (r.op, r.size_bytes) == ("all_gather", GiB):
                results[i] = replace(r, wrong=3)
            elif (r.op, r.size_bytes) == ("broadcast", 4 * GiB):
                results[i] = CollectiveResult(r.op, r.size_bytes, r.count, r.dtype, r.ranks, skipped="not_run")
            elif (r.op, r.size_bytes) == ("all_to_all", GiB // 16):  # half its replays at a slower pace (1508Z)
                t = r.gpu_timings[0].timing.median_us
                paced = [t * (1.075 if k % 4 in (1, 2) else 1.0) for k in range(24)]
                results[i] = replace(r, gpu_timings=tuple(RankTiming(x.rank, Timing.from_samples("cuda_graph", paced, 8))
                                                          for x in r.gpu_timings))
        c = replace(c, results=tuple(results), error="timed_out",
                    launch=Launch(("python", "-m", "torch.distributed.run"), None, 480.0, 480.0, timed_out=True))
        cells = tuple(TopoCell(x.a, x.b, "NV12") for x in topo.smi_cells)
        # GPU 1's PCIe link trained at x8 (as its condition in the environment says).
        gpus = tuple(replace(g, pcie_width=known(8)) if g.index == 1 else g for g in topo.gpus)
        topo = replace(topo, smi_cells=cells, gpus=gpus)
        skipped = (NodeSkip("xid", f"{an.CRASHED}: PermissionError: [Errno 1] Operation not permitted: '/dev/kmsg'"),)
        xid = XidScan("journalctl -k", (XidEvent(79, "0000:00:07.0", "NVRM: Xid (PCI:0000:00:07): 79, pid=0, GPU has "
                                                 "fallen off the bus.", 86431.2),))
    settings = {"outlier_margin": 0.05, "device": "cuda", "peer": PEER_SETTINGS, "sweep_timeout_s": 480.0,
                "peer_timeout_s": 240.0}
    return Node(host, (0, 1), topo, before, after, xid, peer(trouble), (c,), skipped, settings, CREATED, 96.2)


def _trouble_env(env: Environment) -> Environment:
    """GPU 1 as an outlier shows it: clocks held down, hot, a lower power limit, a narrower PCIe link."""
    g1 = env.gpus[1]
    facts = {**g1.facts, "sm_clock_mhz": known(1410), "temperature_c": known(87), "power_limit_w": known(500.0),
             "pcie_width": known(8), "throttle_reasons": known(["hw_thermal_slowdown", "sw_thermal_slowdown"])}
    return replace(env, gpus=(env.gpus[0], dataclasses.replace(g1, facts=facts)))


def node_report(trouble: bool = False, host: str = "vm") -> Report:
    """``envcheck run --gpus all`` on the pair."""
    env = environment()
    benches = (bench(0), bench(1))
    if trouble:
        env = _trouble_env(env)
        benches = (bench(0), bench(1, scale=1.08, bandwidth_gbps=4814.4 * 0.93))
    n = node(host, trouble)
    checks = (*factories.report().checks, *delta_checks(n))
    return Report("0.1.0", CREATED, host, "run", env, checks, benches, n)


def _world(slow_rank: int | None) -> Collectives:
    """all_reduce across the two nodes (4 ranks) on the wire between them, and the narrowing runs; with
    ``slow_rank`` every group holding it runs at a quarter of the speed."""
    hosts = ("n0", "n0", "n1", "n1")
    # A 400 Gb/s NIC per node moves ~45 GB/s of busbw; inside a node NVLink is ~10x that.
    base_us = {4 * MiB: 180.0, 64 * MiB: 2200.0, 256 * MiB: 8600.0}

    def run(size: int, ranks: tuple[int, ...]) -> CollectiveResult:
        inside = len({hosts[r] for r in ranks}) == 1
        t = base_us[size] / (9.0 if inside else 1.0)
        if slow_rank is not None and slow_rank in ranks:
            t *= 4
        return _timed("all_reduce", size, t, ranks)

    world = (0, 1, 2, 3)
    results = tuple(run(s, world) for s in base_us)
    narrowing: list[CollectiveResult] = []
    if slow_rank is not None:
        # The groups the runner would measure: each chosen by the bisection from the results before it.
        steps: list[NarrowStep] = []
        while (group := next_narrowing_group(steps, world, hosts)) is not None:
            narrowing.append(run(256 * MiB, group))
            steps.append(NarrowStep(group, collective_row(narrowing[-1], Collectives("world", "nccl", 4)).busbw_gbps))
    settings = {**SWEEP_SETTINGS, "ops": ["all_reduce"], "sizes": list(base_us), "narrow_op": "all_reduce",
                "narrow_size_bytes": 256 * MiB}
    outcomes = tuple(RankOutcome(r, "ok", hosts[r], r % 2) for r in world)
    return Collectives("world", "nccl", 4, hosts, settings, results, tuple(narrowing), (), "no_nccl_log", "2.28.9",
                       outcomes, Launch(("python", "-m", "torch.distributed.run"), 0, 600.0, 88.0))


def _fleet_node(host: str, ranks: tuple[int, ...], trouble: bool, gpus: tuple[int, ...] = (0, 1)) -> FleetNode:
    r = node_report(trouble, host)
    checks = r.checks + ((Check("gpu.ecc", "fail", "ECC errors", "GPU 1: 2 uncorrectable ECC errors since boot",
                                fix="drain the node and run nvidia-smi -q -d ECC -i 1"),) if trouble else ())
    return FleetNode(host, ranks, r.environment, checks, tuple(b for b in r.benches if b.device.index in gpus),
                     r.node)


def fleet(baseline: bool = True) -> Fleet:
    """Two nodes of the pair under torchrun: n0 healthy, n1 sick (``node_report(trouble=True)``'s
    results). On n1 rank 2 failed with a CUDA error (its GPU's suite is missing) and rank 3 reported
    in time but slowly; the world all_reduce is slow wherever rank 3 takes part. ``baseline``: judged
    against yesterday's healthy n0 (as ``--baseline`` reads it), else against the fleet median, under
    the default rules."""
    nodes = (_fleet_node("n0", (0, 1), False), _fleet_node("n1", (2, 3), True, gpus=(1,)))
    ranks = (RankStatus(0, "ok", "n0", 0, 0, elapsed_s=61.2), RankStatus(1, "ok", "n0", 1, 1, elapsed_s=60.8),
             RankStatus(2, "error", "n1", 0, 0, "RuntimeError: CUDA error: uncorrectable ECC error encountered",
                        elapsed_s=12.4),
             RankStatus(3, "ok", "n1", 1, 1, elapsed_s=131.9))
    base = None
    if baseline:
        base = baseline_from_nodes((_fleet_node("n0", (0, 1), False),), "reports/2026-11-21_0900Z_fleet-2x_n0.json",
                                   "n0", "2026-11-21T09:00:00Z")
    return Fleet(4, 2, "torchrun", nodes, ranks, (_world(3),), (), base,
                 {"quick": True, "rank_timeout_s": 900.0, "world_timeout_s": 600.0}, CREATED, 412.7)


def fleet_report(baseline: bool = True) -> Report:
    f = fleet(baseline)
    return Report("0.1.0", CREATED, "n0", "fleet", f.nodes[0].environment or Environment(), fleet=f)


def with_hosts(report: Report, host: str) -> Report:
    """Every host name of a node or fleet report replaced by ``host`` (and a suffix per node)."""
    if report.fleet is not None:
        f = report.fleet
        names = {n.host: f"{host}{i}" for i, n in enumerate(f.nodes)}
        nodes = tuple(replace(n, host=names[n.host], node=replace(n.node, host=names[n.host]) if n.node else None)
                      for n in f.nodes)
        ranks = tuple(replace(r, host=names.get(r.host or "", host)) for r in f.ranks)
        world = tuple(replace(c, hosts=tuple(names.get(h, host) for h in c.hosts)) for c in f.collectives)
        return replace(report, host=host, fleet=replace(f, nodes=nodes, ranks=ranks, collectives=world))
    assert report.node is not None
    return replace(report, host=host, node=replace(report.node, host=host))
