"""A rank lost in any phase of a fleet run (its suite, its node's tests, the collectives across nodes)
fails its node and the fleet, named with its host and phase; a stop signal still gives rank 0's
partial report; a CPU run has no GPU metric to miss; the store reads a key already there however
slowly it answers. Ranks are threads with a scripted part each (``node_fakes.MemoryTransport``); the
world sweep's outputs are the JSON-lines events its workers write."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from datetime import timedelta

import pytest
from node_fakes import MemoryTransport, bench_with_bandwidth

from envcheck.analysis import analyse
from envcheck.analysis.collectives import collective_narrowing
from envcheck.analysis.fleet import judge, lost_ranks, node_metrics, world_culprits
from envcheck.model import Bench, BenchDevice, Environment, Note, Skip, build, to_dict
from envcheck.model.fleet import Fleet, FleetNode, RankStatus
from envcheck.model.node import Launch, Node
from envcheck.node.collective_run import RankOutput, SweepPlan, assemble
from envcheck.node.fleet_rank import FleetDeps, FleetOptions, RankContext, run_rank
from envcheck.node.transport import StoreTransport

PLAN = SweepPlan(ops=("all_reduce",), sizes=(1 << 16,), warmup=1, iters=2, device="cpu", narrow=False)


def _ctx(rank: int, world: int) -> RankContext:
    """One rank per node, every node its own host."""
    return RankContext(rank, world, 0, 1, rank, world, "127.0.0.1", 1, "torchrun", f"host{rank}")


def _events(rank: int, *, done: bool = True, error: str | None = None) -> str:
    evs = [{"event": "start", "pid": 1, "host": f"host{rank}", "local_rank": 0},
           {"event": "ready", "backend": "gloo"}]
    evs.append({"event": "result", "phase": "sweep", "op": "all_reduce", "size_bytes": 1 << 16, "count": 1 << 14,
                "ranks": [0, 1, 2], "samples_us": [100.0, 100.0], "wrong": 0})
    if error:
        evs.append({"event": "error", "text": error})
    if done:
        evs.append({"event": "done"})
    return "\n".join(json.dumps(e) for e in evs)


def _run_fleet(world: int, *, node_hangs: set[int] = frozenset(), world_hangs: set[int] = frozenset(),
               outputs: dict[int, str] | None = None, interrupt_rank0_on: str | None = None,
               join_timeout: float = 1.0) -> tuple[Fleet, float, dict[int, BaseException]]:
    """A fleet of ``world`` one-rank nodes; node ``n`` hangs in its node tests (``node_hangs``) or in
    its share of the world sweep (``world_hangs``); ``outputs``: each world rank's events."""
    transports = MemoryTransport.fleet(world)
    release = threading.Event()
    result: dict[int, Fleet | None] = {}
    raised: dict[int, BaseException] = {}
    outputs = outputs or {r: _events(r) for r in range(world)}
    if interrupt_rank0_on is not None:
        real_get = transports[0].get
        fired: list[str] = []

        def get(key: str, timeout_s: float) -> str | None:
            if key.startswith(interrupt_rank0_on) and not fired:  # a signal arrives once
                fired.append(key)
                raise KeyboardInterrupt
            return real_get(key, timeout_s)

        transports[0].get = get  # type: ignore[method-assign]

    def run(rank: int) -> None:
        ctx = _ctx(rank, world)

        def node(gpus, d) -> Node:
            if rank in node_hangs:
                release.wait(30)
            return Node(ctx.host, gpus)

        def world_part(go, index, ctx_, gpus, d):
            if rank in world_hangs:
                release.wait(30)
            launch = Launch(("torchrun",), 0, 60.0, 1.0)
            return (RankOutput(rank, outputs.get(rank, "")),), launch

        deps = FleetDeps(transports[rank], lambda gpu: bench_with_bandwidth(gpu, 4200.0),
                         lambda: (Environment(), ()), node, world_part)
        opts = FleetOptions("/nonexistent", PLAN, world=True, rank_timeout_s=1.0, join_timeout_s=join_timeout,
                            world_timeout_s=60.0)
        try:
            result[rank] = run_rank(ctx, opts, deps, (0,))
        except BaseException as e:  # noqa: BLE001 - recorded for the test
            raised[rank] = e

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(world)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    threads[0].join(30)
    wall = time.monotonic() - t0
    transports[0].put("done", "fail")
    release.set()
    for t in threads[1:]:
        t.join(5)
    fleet = result.get(0)
    assert fleet is not None, raised
    return fleet, wall, raised


def _verdicts(fleet: Fleet) -> dict[str, object]:
    return {v.host: v for v in judge(fleet)}


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_a_leader_silent_in_its_node_tests_fails_its_node_named_with_the_phase():
    fleet, _, _ = _run_fleet(3, node_hangs={2})
    r2 = fleet.ranks[2]
    assert (r2.status, r2.phase, r2.host) == ("timeout", "node", "host2")
    v = _verdicts(fleet)
    assert v["host2"].status == "fail"
    (f,) = [f for f in v["host2"].findings if f.kind == "rank_failed"]
    assert (f.ranks, f.reason) == ((2,), "node")
    assert v["host0"].status == "pass"
    assert not analyse_passed(fleet)


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_a_leader_silent_in_the_world_sweep_fails_its_node_and_is_not_waited_for_the_whole_sweep():
    # Node 2's share of the world sweep never comes (its rank was killed or stopped): the others' shares
    # ended, so rank 0 waits the join time after its own, not the world sweep's 60 s.
    outputs = {0: _events(0, done=False, error="Connection closed by peer"),
               1: _events(1, done=False, error="Connection closed by peer")}
    fleet, wall, _ = _run_fleet(3, world_hangs={2}, outputs=outputs, join_timeout=2.0)
    assert wall < 20
    r2 = fleet.ranks[2]
    assert (r2.status, r2.phase, r2.world_rank) == ("timeout", "world", 2)
    lost = lost_ranks(fleet)
    assert [(x.rank, x.host, x.phase) for x in lost] == [(2, "host2", "world")]
    v = _verdicts(fleet)
    assert v["host2"].status == "fail" and v["host0"].status == v["host1"].status == "pass"
    assert not analyse_passed(fleet)


def test_a_world_worker_that_died_is_blamed_not_the_ranks_that_noticed():
    outs = [RankOutput(0, _events(0, done=False, error="Connection closed by peer")),
            RankOutput(1, _events(1, done=False, error="Connection closed by peer")),
            RankOutput(2, _events(2, done=False))]
    c = assemble(outs, PLAN, 3, "world", Launch(("torchrun",), 1, 60.0, 3.0))
    assert world_culprits(c) == (2,)
    ranks = tuple(RankStatus(r, "ok", f"host{r}", 0, 0, world_rank=r) for r in range(3))
    nodes = tuple(FleetNode(f"host{r}", (r,), benches=(bench_with_bandwidth(0, 4200.0),)) for r in range(3))
    fleet = Fleet(3, 3, "torchrun", nodes, ranks, (c,))
    v = _verdicts(fleet)
    assert [h for h, x in v.items() if x.status != "pass"] == ["host2"]
    (x,) = lost_ranks(fleet)
    assert (x.rank, x.phase, x.status) == (2, "world", "missing")


def test_a_world_sweep_stopped_at_its_limit_names_the_rank_that_failed_first():
    outs = [RankOutput(0, _events(0, done=False)), RankOutput(1, _events(1, done=False, error="boom")),
            RankOutput(2, _events(2, done=False))]
    c = assemble(outs, PLAN, 3, "world", Launch(("torchrun",), None, 60.0, 60.0, timed_out=True))
    assert c.error == "timed_out" and world_culprits(c) == (1,)


def test_a_world_sweep_that_hung_with_nobody_to_name_vouches_for_no_node():
    outs = [RankOutput(r, _events(r, done=False)) for r in range(3)]
    c = assemble(outs, PLAN, 3, "world", Launch(("torchrun",), None, 60.0, 60.0, timed_out=True))
    assert world_culprits(c) == ()
    ranks = tuple(RankStatus(r, "ok", f"host{r}", 0, 0, world_rank=r) for r in range(3))
    nodes = tuple(FleetNode(f"host{r}", (r,), benches=(bench_with_bandwidth(0, 4200.0),)) for r in range(3))
    v = judge(Fleet(3, 3, "torchrun", nodes, ranks, (c,)))
    assert {x.status for x in v} == {"incomplete"}
    assert all(any(f.metric == "world.collectives" and f.reason == "timed_out" for f in x.findings) for x in v)


def test_a_rank_killed_in_its_suite_blames_its_node_alone_though_the_world_sweep_never_finished():
    # Two nodes, rank 1 killed in its suite: the world sweep then timed out with nobody to name in it.
    outs = [RankOutput(r, _events(r, done=False)) for r in range(2)]
    c = assemble(outs, PLAN, 2, "world", Launch(("torchrun",), None, 60.0, 60.0, timed_out=True))
    ranks = (RankStatus(0, "ok", "vm/0", 0, 0, world_rank=0),
             RankStatus(1, "error", "vm/1", 0, 0, world_rank=1, phase="suite", error="killed"))
    nodes = tuple(FleetNode(f"vm/{r}", (r,), benches=(bench_with_bandwidth(0, 4200.0),)) for r in range(2))
    fleet = Fleet(2, 2, "torchrun", nodes, ranks, (c,))
    assert [v.host for v in judge(fleet) if v.status != "pass"] == ["vm/1"]
    (x,) = lost_ranks(fleet)
    assert (x.rank, x.host, x.phase) == (1, "vm/1", "suite")


def test_a_lost_rank_is_not_narrowed_to_a_link():
    outs = [RankOutput(0, _events(0)), RankOutput(1, _events(1))]
    c = assemble(outs, SweepPlan(ops=("all_reduce",), sizes=(1 << 16,), device="cpu", narrow=True), 3, "world", None)
    # A narrowing run was stored, but rank 2 never reported: the groups holding it measured nothing.
    from dataclasses import replace

    from envcheck.model.node import CollectiveResult

    c = replace(c, narrowing=(CollectiveResult("all_reduce", 1 << 16, 1 << 14, "float32", (1, 2), absent_ranks=(2,)),))
    conclusion = collective_narrowing(c)
    assert (conclusion.kind, conclusion.ranks) == ("lost", (2,))


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_a_stop_signal_while_rank_0_waits_gives_the_partial_fleet():
    fleet, _, _ = _run_fleet(3, node_hangs={2}, interrupt_rank0_on="node/2")
    assert fleet.settings["interrupted"] is True
    assert [r.status for r in fleet.ranks[:2]] == ["ok", "ok"]
    assert (fleet.ranks[2].status, fleet.ranks[2].phase, fleet.ranks[2].given_s) == ("timeout", "node", 5.0)
    assert len(fleet.nodes) == 3 and all(n.benches for n in fleet.nodes)
    assert build(Fleet, to_dict(fleet)) == fleet


def test_a_rank_other_than_0_stops_at_once_on_a_signal():
    transports = MemoryTransport.fleet(2)

    def bench(gpu: int) -> Bench:
        raise KeyboardInterrupt(bench_with_bandwidth(gpu, 4200.0))

    deps = FleetDeps(transports[1], bench, lambda: (Environment(), ()), lambda g, d: Node("h", g),
                     lambda *a: ((), None))
    with pytest.raises(KeyboardInterrupt):
        run_rank(_ctx(1, 2), FleetOptions("/nonexistent", PLAN, world=False, rank_timeout_s=30.0), deps, (0,))
    # What its suite finished was handed over first.
    assert '"error":"interrupted"' in transports[0].get("rank/1", 0.1)


def analyse_passed(fleet: Fleet) -> bool:
    from envcheck.commands.fleet import fleet_report

    fa = analyse(fleet_report(fleet, None)).fleet
    assert fa is not None
    return fa.passed


def test_a_cpu_suite_has_no_gpu_metric_to_miss():
    matmul = Skip("matmul", "torch", "fp32", (256, 256, 256), Note("bench.cpu_only"))
    cpu = Bench(BenchDevice("cpu", "CPU", 0), skipped=(matmul,))
    node = FleetNode("vm", (0,), benches=(cpu,))
    assert {m.name for m in node_metrics(node)} == {"checks.failed"}
    (v,) = judge(Fleet(1, 1, "torchrun", (node,), (RankStatus(0, "ok", "vm", 0, 0),)))
    assert v.status == "pass"
    # On a GPU the same missing matmul is a finding.
    gpu = FleetNode("g", (0,), benches=(Bench(BenchDevice("cuda", "NVIDIA H200", 0), skipped=(matmul,)),))
    assert "gpu.matmul_tflops" in {m.name for m in node_metrics(gpu) if m.value is None}


class _SlowStore:
    """A TCPStore as a busy machine's: every answer takes longer than a 1 ms wait allows."""

    def __init__(self) -> None:
        self.data = {"join/0": b"x"}

    def check(self, keys):
        time.sleep(0.005)
        return all(k in self.data for k in keys)

    def wait(self, keys, timeout: timedelta):
        time.sleep(0.005)
        if timeout.total_seconds() < 0.005 or not all(k in self.data for k in keys):
            raise RuntimeError("wait timeout after 1ms")

    def get(self, key):
        return self.data[key]


def test_a_key_already_there_is_read_however_slowly_the_store_answers():
    t = StoreTransport(_SlowStore(), 0, 2)
    assert t.get("join/0", 0.001) == "x"
    t0 = time.monotonic()
    assert t.get("join/1", 0.3) is None
    assert time.monotonic() - t0 >= 0.3


def test_the_cpu_sweep_is_sized_for_gloo_and_options_override_it():
    from envcheck.cli import parse
    from envcheck.commands.fleet import sweep_plan

    args = parse(["fleet", "--cpu"])
    cpu = sweep_plan(args, cpu=True)
    assert max(cpu.sizes) <= 4 << 20 and cpu.iters <= 5 and not cpu.narrow
    gpu = sweep_plan(args, cpu=False)
    assert (min(gpu.sizes), max(gpu.sizes), gpu.iters, gpu.warmup) == (1 << 20, 4 << 30, 20, 5)
    given = sweep_plan(parse(["fleet", "--sweep-sizes", "64K", "--iters", "3"]), cpu=True)
    assert (given.sizes, given.iters) == ((1 << 16,), 3)


def test_a_gpu_is_named_by_its_machine_index_in_a_simulated_node():
    from envcheck.commands.fleet import _machine_index

    bench = bench_with_bandwidth(0, 4200.0)  # CUDA device 0 of a rank that sees only GPU 1
    assert _machine_index(bench, 0, (1,)).device.index == 1
    assert _machine_index(bench, 0, (0,)) is bench


def test_a_node_that_does_not_pass_never_says_nothing_keeps_it_from_passing():
    from in_lang import render_markdown

    from envcheck.commands.fleet import fleet_report

    ranks = (RankStatus(0, "ok", "vm", 0, 0), RankStatus(1, "timeout", "vm", 1, 1, given_s=5.0, phase="node"))
    fleet = Fleet(2, 1, "torchrun", (FleetNode("vm", (0, 1), Environment(), (), (bench_with_bandwidth(0, 4200.0),),
                                              Node("vm", (0, 1))),), ranks)
    text = render_markdown(fleet_report(fleet, None))
    assert "Nothing keeps this node from passing" not in text
    assert "Rank 1 was lost in its node" in text
    assert text.startswith("# envcheck fleet report: 1 node, 2 ranks")


def test_a_node_whose_own_tests_found_a_problem_does_not_pass_in_a_fleet():
    """A problem no fleet rule measures (the Xid step crashed) kept the node's own verdict from passing while the
    fleet's passed it: the page said PASS, then "1 problem keeps this node from passing"."""
    import node_reports
    from in_lang import render_markdown

    from envcheck.analysis import node as an
    from envcheck.model.node import NodeSkip

    r = node_reports.fleet_report()
    n0 = r.fleet.nodes[0]
    crashed = NodeSkip("xid", f"{an.CRASHED}: PermissionError: [Errno 1] Operation not permitted: '/dev/kmsg'")
    n0 = dataclasses.replace(n0, node=dataclasses.replace(n0.node, skipped=(crashed,)))
    r = dataclasses.replace(r, fleet=dataclasses.replace(r.fleet, nodes=(n0, *r.fleet.nodes[1:])))
    a = analyse(r)
    v = a.fleet.verdicts[0]
    assert (v.host, v.status) == ("n0", "fail") and v.findings[-1].kind == "node_problem"
    assert a.fleet.nodes[0].analysis.problems and "n0" in [x.host for x in a.fleet.drain]
    md = render_markdown(r, analysis=a)
    section = md[md.index("## Node n0"):md.index("## Node n1")]
    assert section.startswith("## Node n0 (fail)") and "verdict: pass" not in section
    assert "1 problem keeps this node from passing" in section and "The kernel log (Xid) step did not run" in section


def test_interrupted_run_is_named_in_the_view():
    from in_lang import render_markdown

    from envcheck.commands.fleet import fleet_report

    fleet = Fleet(1, 1, "torchrun", (FleetNode("vm", (0,)),), (RankStatus(0, "ok", "vm", 0, 0),),
                  settings={"interrupted": "SIGTERM"})
    report = fleet_report(fleet, None)
    fa = analyse(report).fleet
    assert fa is not None and fa.interrupted and not fa.passed
    assert "SIGTERM" in render_markdown(report, "zh-CN")


def test_parse_keeps_old_rank_statuses_loading():
    # A report written before phases were recorded: no phase, no world rank; the suite is assumed.
    old = {"rank": 1, "status": "timeout", "host": "n1", "given_s": 900.0}
    r = build(RankStatus, old)
    assert (r.phase, r.world_rank) == (None, None)
    fleet = Fleet(2, 2, "torchrun", (FleetNode("n0", (0,)), FleetNode("n1", (1,))), (RankStatus(0, "ok", "n0"), r))
    assert [(x.rank, x.phase) for x in lost_ranks(fleet)] == [(1, "suite")]



def test_a_failed_check_never_passes_even_when_every_node_failed_it():
    from envcheck.model import Check

    bad = Check("gpu.ecc.0", "fail", "ECC", "uncorrectable errors")
    nodes = tuple(FleetNode(h, (i,), checks=(bad,), benches=(bench_with_bandwidth(0, 4200.0),))
                  for i, h in enumerate(("a", "b")))
    verdicts = judge(Fleet(2, 2, "torchrun", nodes))  # the median of failed checks is 1 here
    assert {v.status for v in verdicts} == {"fail"}
    (f,) = verdicts[0].findings
    assert (f.metric, f.value, f.reference, f.source) == ("checks.failed", 1.0, 0.0, "zero")


def test_the_gpu_driver_check_does_not_apply_to_a_node_timed_on_the_cpu():
    from envcheck.analysis.fleet import failed_checks
    from envcheck.model import Check

    no_driver = Check("driver.nvml", "fail", "NVIDIA driver (NVML)", "no NVIDIA driver")
    cpu = FleetNode("vm", (0,), checks=(no_driver,), benches=(Bench(BenchDevice("cpu", "CPU", 0)),))
    assert failed_checks(cpu) == ()
    (v,) = judge(Fleet(1, 1, "torchrun", (cpu,)))
    assert v.status == "pass"
    gpu = FleetNode("g", (0,), checks=(no_driver,), benches=(bench_with_bandwidth(0, 4200.0),))
    assert failed_checks(gpu) == (no_driver,)


def test_a_launched_child_is_stopped_when_its_rank_is_killed_outright(tmp_path):
    """A rank killed with SIGKILL cannot stop its children: the kernel sends them SIGTERM instead
    (the torchrun sub-launch then stops its workers), rather than leaving them to run unowned."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import psutil

    root = Path(__file__).resolve().parent.parent
    pid_file = tmp_path / "child.pid"
    child = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    rank = (f"from envcheck.node.launch import SubprocessLauncher\n"
            f"SubprocessLauncher().run([{sys.executable!r}, '-c', {child!r}], dict(__import__('os').environ), 120)\n")
    proc = subprocess.Popen([sys.executable, "-c", rank], env={**os.environ, "PYTHONPATH": str(root)})
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        pid = int(pid_file.read_text())
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 30
        while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        if alive:
            os.kill(pid, signal.SIGKILL)
        assert not alive
    finally:
        if proc.poll() is None:
            proc.kill()
