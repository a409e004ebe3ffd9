"""The fleet run with every rank in a thread and a scripted part per rank: failing, hanging and slow
ranks are reported with their error and the time they were given, and the rest is still reported;
verdicts against a baseline or the fleet median, where something unmeasured never passes."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest
from node_fakes import MemoryTransport, bench_with_bandwidth

from envcheck.analysis.fleet import DEFAULT_RULES, judge, node_metrics
from envcheck.errors import UsageError
from envcheck.model import Bench, BenchDevice, Check, Environment, build, to_dict
from envcheck.model.fleet import Baseline, Fleet, FleetNode, Reference, Rule
from envcheck.model.node import Node
from envcheck.node.collective_run import SweepPlan
from envcheck.node.fleet_rank import (
    FleetDeps,
    FleetOptions,
    RankContext,
    expand_nodelist,
    local_gpus,
    rank_context,
    run_rank,
)


def _bench(gpu: int, gbps: float = 4200.0) -> Bench:
    return bench_with_bandwidth(gpu, gbps)


def _ctx(rank: int, world: int, per_node: int) -> RankContext:
    return RankContext(rank, world, rank % per_node, per_node, rank // per_node, world // per_node, "127.0.0.1", 1,
                       "torchrun", f"host{rank // per_node}")


def _fleet(behaviour: dict[int, str], world: int = 4, per_node: int = 2, rank_timeout: float = 1.0,
           gbps: dict[int, float] | None = None) -> tuple[Fleet, float]:
    transports = MemoryTransport.fleet(world)
    result: dict[int, Fleet | None] = {}
    release = threading.Event()

    def bench_for(rank: int):
        def bench(gpu: int) -> Bench:
            what = behaviour.get(rank)
            if what == "fail":
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            if what == "hang":
                release.wait(30)
            if what == "slow":
                time.sleep(0.3)
            return _bench(gpu, (gbps or {}).get(rank, 4200.0))
        return bench

    def run(rank: int) -> None:
        ctx = _ctx(rank, world, per_node)
        deps = FleetDeps(transports[rank], bench_for(rank), lambda: (Environment(), ()),
                         lambda gpus, d: Node(ctx.host, gpus), lambda *a: ((), None))
        opts = FleetOptions("/tmp/unused", SweepPlan(), world=False, rank_timeout_s=rank_timeout, join_timeout_s=1.0,
                            world_timeout_s=1.0)
        result[rank] = run_rank(ctx, opts, deps, (0, 1))

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(world)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    threads[0].join(20)
    wall = time.monotonic() - t0
    transports[0].put("done", "1")
    release.set()
    for t in threads[1:]:
        t.join(5)
    return result[0], wall


def test_every_rank_reports():
    fleet, _ = _fleet({})
    assert [r.status for r in fleet.ranks] == ["ok"] * 4
    assert [(n.host, n.ranks, len(n.benches)) for n in fleet.nodes] == [("host0", (0, 1), 2), ("host1", (2, 3), 2)]
    assert build(Fleet, to_dict(fleet)) == fleet


def test_a_failing_rank_sends_its_error_and_the_rest_is_reported():
    fleet, _ = _fleet({3: "fail"})
    r3 = fleet.ranks[3]
    assert r3.status == "error" and r3.error == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert [r.status for r in fleet.ranks[:3]] == ["ok"] * 3
    assert len(fleet.nodes[1].benches) == 1
    v = {x.host: x for x in judge(fleet)}
    assert v["host1"].status == "fail" and v["host1"].findings[0].ranks == (3,)


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_a_hanging_rank_is_reported_with_the_time_it_was_given():
    fleet, wall = _fleet({1: "hang"}, rank_timeout=1.0)
    r1 = fleet.ranks[1]
    assert (r1.status, r1.given_s, r1.host) == ("timeout", 1.0, "host0")
    assert [r.status for r in fleet.ranks if r.rank != 1] == ["ok"] * 3
    assert wall < 10
    assert "host0" in {v.host for v in _drain(fleet)}


def test_a_slow_rank_within_its_time_is_ok():
    fleet, _ = _fleet({2: "slow"}, rank_timeout=5.0)
    assert fleet.ranks[2].status == "ok" and fleet.ranks[2].elapsed_s >= 0.3


def test_node_tests_wait_for_every_gpu_of_their_node_to_finish_its_suite():
    """Peer copies and collectives over GPUs still being benchmarked would disturb both measurements."""
    world, per_node = 4, 2
    transports = MemoryTransport.fleet(world)
    bench_done: dict[int, float] = {}
    node_started: dict[int, float] = {}

    def run(rank: int) -> None:
        ctx = _ctx(rank, world, per_node)

        def bench(gpu: int) -> Bench:
            time.sleep(0.4 if ctx.local_rank == 1 else 0.0)  # the leader's sibling is the slow one
            bench_done[rank] = time.monotonic()
            return _bench(gpu)

        def node(gpus, d) -> Node:
            node_started[ctx.node_rank] = time.monotonic()
            return Node(ctx.host, gpus)

        deps = FleetDeps(transports[rank], bench, lambda: (Environment(), ()), node, lambda *a: ((), None))
        opts = FleetOptions("/tmp/unused", SweepPlan(), world=False, rank_timeout_s=5.0, join_timeout_s=1.0,
                            world_timeout_s=1.0)
        run_rank(ctx, opts, deps, (0, 1))

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(world)]
    for th in threads:
        th.start()
    threads[0].join(20)
    transports[0].put("done", "1")
    for th in threads[1:]:
        th.join(5)
    assert node_started[0] >= bench_done[1] and node_started[1] >= bench_done[3]


def test_a_node_below_the_fleet_median_is_taken_out_of_service():
    fleet, _ = _fleet({}, world=6, gbps={4: 3800.0})  # 3800 vs 4200: 9.5 % below, margin 5 %
    verdicts = {v.host: v for v in judge(fleet)}
    bad = verdicts["host2"]
    assert bad.status == "fail"
    (f,) = bad.findings
    assert (f.metric, f.source) == ("gpu.bandwidth_gbps", "fleet_median")
    assert f.shortfall == pytest.approx(1 - 3800 / 4200)
    assert verdicts["host0"].status == verdicts["host1"].status == "pass"
    assert [v.host for v in _drain(fleet)] == ["host2"]


def test_a_baseline_replaces_the_median():
    fleet, _ = _fleet({})
    strict = replace(fleet, baseline=Baseline("old.json", (Reference("gpu.bandwidth_gbps", 5000.0),)))
    assert {v.status for v in judge(strict)} == {"fail"}
    lax = replace(fleet, rules=(Rule("gpu.bandwidth_gbps", "higher", 0.2),),
                  baseline=Baseline("old.json", (Reference("gpu.bandwidth_gbps", 5000.0),)))
    assert {v.status for v in judge(lax)} == {"pass"}


def test_an_unmeasured_metric_never_passes():
    node = FleetNode("h", (0,), benches=(Bench(BenchDevice("cuda", "NVIDIA H200", 0)),))
    fleet = Fleet(1, 1, "torchrun", (node,))
    (v,) = judge(fleet)
    assert v.status == "incomplete" and v.findings[0].kind == "missing" and v.findings[0].metric == "gpu.bandwidth_gbps"
    assert _drain(fleet) == (v,)


def test_failed_checks_count_against_a_node():
    node = FleetNode("h", (0,), checks=(Check("gpu.ecc.0", "fail", "t", "f"),), benches=(_bench(0),))
    (v,) = judge(Fleet(1, 1, "torchrun", (node,), baseline=Baseline("b", (Reference("checks.failed", 0.0),))))
    assert v.status == "fail" and v.findings[0].metric == "checks.failed"


def test_metrics_of_a_node():
    names = {m.name for m in node_metrics(FleetNode("h", (0,), benches=(_bench(0),)))}
    assert names == {"gpu.bandwidth_gbps", "checks.failed"}  # no matmul planned: no finding about it
    assert {r.metric for r in DEFAULT_RULES} >= {"gpu.bandwidth_gbps", "node.", "peer."}


def test_rank_context_from_torchrun_and_from_srun():
    ctx = rank_context({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
                        "MASTER_ADDR": "n0", "MASTER_PORT": "29500"}, host="n1")
    assert (ctx.node_rank, ctx.nnodes, ctx.leader, ctx.launcher) == (1, 2, False, "torchrun")
    s = rank_context({"SLURM_PROCID": "4", "SLURM_NTASKS": "8", "SLURM_LOCALID": "0", "SLURM_NODEID": "1",
                      "SLURM_NNODES": "2", "SLURM_NTASKS_PER_NODE": "4(x2)", "SLURM_JOB_NODELIST": "gpu[07-08]",
                      "SLURM_JOB_ID": "4242"}, host="gpu08")
    assert (s.rank, s.local_world_size, s.master_addr, s.master_port, s.leader) == (4, 4, "gpu07", 29642, True)
    with pytest.raises(UsageError, match="torchrun"):
        rank_context({})


def test_nodelists_expand():
    assert expand_nodelist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]


def test_local_gpus_follow_cuda_visible_devices():
    ctx = _ctx(0, 1, 1)
    assert local_gpus(ctx, {"CUDA_VISIBLE_DEVICES": "1"}) == (1,)
    assert local_gpus(replace(ctx, local_world_size=2), {}) == (0, 1)


def test_a_sweep_that_never_ran_and_copies_that_failed_are_not_passes():
    from envcheck.model.node import CollectiveResult, Collectives, NodeSkip, PeerCopies

    sweep = Collectives("node", "nccl", 2, results=(CollectiveResult("all_reduce", 1 << 20, 1 << 18, "float32", (0, 1),
                                                                     skipped="not_run"),))
    node = Node("h", (0, 1), peer=PeerCopies(error="timed_out"), collectives=(sweep,))
    fleet = Fleet(1, 1, "torchrun", (FleetNode("h", (0, 1), node=node),))
    (v,) = judge(fleet)
    missing = {f.metric: f.reason for f in v.findings if f.kind == "missing"}
    assert missing["peer.d2d_gbps"] == "timed_out" and missing["node.all_reduce.busbw_gbps"] == "not_run"
    assert missing["gpu.bandwidth_gbps"] == "no_bench"
    # The node's own tests failed (copies timed out, a size never reached): its one verdict fails (issue 49).
    assert v.status == "fail" and v.findings[0].kind == "node_problem"
    crashed = Node("h", (0, 1), skipped=(NodeSkip("collectives", "crashed: OSError: x"),))
    (v2,) = judge(Fleet(1, 1, "torchrun", (FleetNode("h", (0, 1), node=crashed),)))
    assert "node.collectives" in {f.metric for f in v2.findings}


def test_busbw_is_never_compared_across_algorithms_silently():
    from envcheck.model import Timing
    from envcheck.model.node import AlgoChoice, CollectiveResult, Collectives, RankTiming

    def node(host, algo, t_us):
        timings = tuple(RankTiming(r, Timing.from_samples("cuda_events", [t_us])) for r in (0, 1))
        res = CollectiveResult("all_reduce", 1 << 30, 1 << 28, "float32", (0, 1), timings, 0)
        sweep = Collectives("node", "nccl", 2, results=(res,),
                            choices=(AlgoChoice(0, "AllReduce", 1 << 30, algo, "SIMPLE", nranks=2),))
        return FleetNode(host, (0, 1), benches=(_bench(0),), node=Node(host, (0, 1), collectives=(sweep,)))

    fleet = Fleet(6, 3, "torchrun", (node("a", "RING", 3000.0), node("b", "RING", 3000.0), node("c", "TREE", 3000.0)))
    v = {x.host: x for x in judge(fleet)}
    assert v["a"].status == "pass"
    (f,) = [f for f in v["c"].findings if f.kind == "algorithm_differs"]
    assert f.reason == "TREE/SIMPLE vs RING/SIMPLE" and v["c"].status == "incomplete"


def _drain(fleet):
    return tuple(v for v in judge(fleet) if v.status != "pass")
