"""One node's tests in order, with every outside dependency faked from the real 2 x H200 capture:
NVML, nvidia-smi's texts, /proc/uptime, the kernel log, and the launched jobs (which write what the
real workers write)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import FakeHost
from node_fakes import ScriptedLauncher, capture, fake_nvml, text

from envcheck.analysis import node as an
from envcheck.analysis.collectives import collective_rows
from envcheck.analysis.links import copy_rows
from envcheck.model import build, to_dict
from envcheck.model.node import Node
from envcheck.node.collective_run import Placement, SweepPlan, run_sweep
from envcheck.node.peer import PeerPlan
from envcheck.node.steps import NodeDeps, NodeOptions, run_node

MiB = 1 << 20


def _host() -> FakeHost:
    cap = capture()
    return FakeHost(files={"/proc/uptime": "86400.00 1.00\n"},
                    commands={("nvidia-smi", "topo", "-m"): (0, cap["topo_m"]["stdout"], ""),
                              ("nvidia-smi", "nvlink", "-s"): (0, cap["nvlink_s"]["stdout"], "")})


def _arg(argv, flag):
    return argv[list(argv).index(flag) + 1]


def _write_lines(path: Path, events) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")


def _play(argv, env):
    if argv == ("envcheck.node.peer_worker:run",):
        copy = {"event": "copy", "kind": "d2d", "method": "copy_engine", "src": 0, "dst": 1,
                "bytes_per_direction": 256 * MiB, "bidirectional": False, "pinned": None,
                "samples_us": [700.0] * 5, "wrong": 0}
        h2d = {"event": "copy", "kind": "h2d", "method": "copy_engine", "src": None, "dst": 1,
               "bytes_per_direction": 256 * MiB, "bidirectional": False, "pinned": True,
               "samples_us": [5000.0] * 5, "wrong": 0}
        sm = {"event": "copy", "kind": "d2d", "method": "sm_kernel", "src": 1, "dst": 0,
              "bytes_per_direction": 256 * MiB, "bidirectional": True, "pinned": None, "error": "no_peer_access"}
        return [{"event": "access", "a": 0, "b": 1, "allowed": True}, copy, h2d, sm]
    out = Path(_arg(argv, "--out"))
    learn = "--learn" in argv  # the untimed launch: NCCL's log, no timings that count
    for rank in (0, 1):
        res = {"event": "result", "phase": "sweep", "op": "all_reduce", "size_bytes": MiB, "count": MiB // 4,
               "ranks": [0, 1], "samples_us": [45.0, 46.5], "method": "cuda_events", "wrong": 0,
               "gpu_samples_us": [15.0, 15.5], "gpu_calls": 20}
        if learn:
            res = {**res, "samples_us": [900.0], "gpu_samples_us": [], "gpu_reason": "not_captured"}
        _write_lines(out / f"{'learn.' if learn else ''}rank{rank}.jsonl", [
            {"event": "start", "rank": rank, "local_rank": rank, "world_size": 2, "host": "vm", "pid": 1},
            {"event": "ready", "backend": "nccl", "device": f"cuda:{rank}", "nccl_version": "2.28.9"}, res,
            {"event": "done"}])
    if learn:
        (out / "nccl.rank0.log").write_text(text("nccl_sweep_x2.log"))
    return 0


def _options(tmp_path, **kw):
    return NodeOptions((0, 2), str(tmp_path), "cuda", SweepPlan(ops=("all_reduce",), sizes=(MiB,)), PeerPlan(), **kw)


def test_node_tests_run_in_order_and_keep_every_result(tmp_path):
    launcher = ScriptedLauncher(_play)
    node = run_node(_options(tmp_path), NodeDeps(fake_nvml, _host(), launcher, kmsg=lambda: ""))
    assert node.gpus == (0, 2) and node.skipped == ()
    assert [g.index for g in node.topology.gpus] == [0, 2]
    assert node.counters_before.uptime_s == 86400.0 and node.counters_after is not None
    assert node.xid.source == "/dev/kmsg" and node.xid.events == ()
    # The workers number the selected GPUs 0, 1: the node's copies name the machine's 0 and 2.
    ce, h2d, sm = node.peer.copies
    assert (ce.src, ce.dst, h2d.dst, sm.src, sm.dst) == (0, 2, 2, 2, 0)
    assert sm.error == "no_peer_access" and sm.timing is None
    (sweep,) = node.collectives
    row = collective_rows(sweep)[0]
    assert row.algos == (("RING", "LL"),) and row.status == "ok"
    # NCCL's algorithms come from an untimed launch of their own (debug log on); the timed one runs without it.
    assert [job[0][1:3] or job[0] for job in launcher.jobs] == [
        ("envcheck.node.peer_worker:run",), ("-m", "torch.distributed.run"), ("-m", "torch.distributed.run")]
    assert ["--learn" in job[0] for job in launcher.jobs[1:]] == [True, False]
    # The timed launch's numbers, not the learning one's: GPU time from the graph replays, per call beside it.
    assert row.time_basis == "gpu" and row.gpu_time_us == pytest.approx(15.25)
    assert row.call_time_us == pytest.approx(45.75) and row.launch_bound
    assert build(Node, to_dict(node)) == node


def test_copies_are_held_against_the_links_found(tmp_path):
    node = run_node(_options(tmp_path), NodeDeps(fake_nvml, _host(), ScriptedLauncher(_play), kmsg=lambda: ""))
    # NVML GPU 2 does not exist on the 2-GPU capture: its copies have no expectation, and say so by None.
    topo = node.topology
    assert topo.gpus[1].lost is not None
    rows = copy_rows(node.peer, topo)
    assert rows[0].expected_gbps is None and rows[0].gbps == pytest.approx(256 * MiB / 700e-6 / 1e9)


def test_copy_rows_on_the_h200_pair(tmp_path):
    opts = NodeOptions((0, 1), str(tmp_path), "cuda", SweepPlan(ops=("all_reduce",), sizes=(MiB,)), PeerPlan())
    node = run_node(opts, NodeDeps(fake_nvml, _host(), ScriptedLauncher(_play), kmsg=lambda: ""))
    ce, h2d, _ = copy_rows(node.peer, node.topology)
    assert ce.via == "nvswitch" and ce.expected_gbps == pytest.approx(450.0)
    assert ce.pct_expected == pytest.approx(100 * (256 * MiB / 700e-6 / 1e9) / 450.0)
    assert h2d.via == "pcie" and h2d.expected_gbps == pytest.approx(63.015, abs=1e-3)


def test_one_gpu_skips_the_collectives_and_a_cpu_node_the_copies(tmp_path):
    opts = NodeOptions((0,), str(tmp_path), "cpu", SweepPlan(), PeerPlan())
    node = run_node(opts, NodeDeps(fake_nvml, _host(), ScriptedLauncher(_play), kmsg=lambda: ""))
    assert {(s.test, s.reason) for s in node.skipped} == {("peer_copies", "no_cuda"), ("collectives", "single_gpu")}


def test_ctrl_c_during_the_copies_returns_the_node_as_far_as_it_got(tmp_path):
    def play(argv, env):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        run_node(_options(tmp_path), NodeDeps(fake_nvml, _host(), ScriptedLauncher(play), kmsg=lambda: ""))
    node = info.value.args[0]
    assert isinstance(node, Node) and node.settings["interrupted"] and node.topology is not None
    assert node.peer.error == "interrupted" and node.collectives == ()


def test_a_step_that_crashes_is_recorded_and_the_next_steps_run(tmp_path):
    host = _host()
    host.commands[("nvidia-smi", "topo", "-m")] = lambda argv: (_ for _ in ()).throw(RuntimeError("boom"))
    node = run_node(_options(tmp_path), NodeDeps(fake_nvml, host, ScriptedLauncher(_play), kmsg=lambda: ""))
    assert node.skipped[0].test == "topology" and "RuntimeError: boom" in node.skipped[0].reason
    assert node.peer is not None and node.collectives


def test_node_problems_name_what_kept_the_run_from_passing(tmp_path):
    node = run_node(_options(tmp_path), NodeDeps(fake_nvml, _host(), ScriptedLauncher(_play), kmsg=lambda: ""))
    assert an.node_problems(node) == ()  # no_peer_access is a fact about the pair, not a failure
    from dataclasses import replace

    from envcheck.model.node import CollectiveResult, NodeSkip

    sweep = node.collectives[0]
    bad = replace(sweep, results=(replace(sweep.results[0], wrong=7),
                                  CollectiveResult("all_reduce", 1 << 32, 1 << 30, "float32", (0, 1),
                                                   skipped="out_of_memory"),
                                  CollectiveResult("broadcast", 1 << 20, 1 << 18, "float32", (0, 1), skipped="not_run")))
    worse = replace(node, collectives=(bad,), skipped=(NodeSkip("xid", "crashed: OSError: x"),))
    keys = [p.key for p in an.node_problems(worse)]
    assert keys == ["step_failed", "collective_wrong", "collective_not_run"]


def test_a_failed_learning_launch_costs_the_algorithms_not_the_sweep(tmp_path):
    def play(argv, env):
        if "--learn" in argv:
            raise TimeoutError  # the untimed launch ran past its share of the time limit
        return _play(argv, env)

    launcher = ScriptedLauncher(play)
    c = run_sweep(SweepPlan(ops=("all_reduce",), sizes=(MiB,)), Placement(2), tmp_path, launcher, 100.0)
    assert [("--learn" in j[0]) for j in launcher.jobs] == [True, False]
    assert c.error is None and c.choices == () and c.choices_reason == "no_nccl_log"
    (row,) = collective_rows(c)
    assert row.status == "ok" and row.time_basis == "gpu" and row.algo_reason == "no_nccl_log"


def test_ctrl_c_during_the_learning_launch_stops_the_sweep(tmp_path):
    def play(argv, env):
        raise KeyboardInterrupt

    launcher = ScriptedLauncher(play)
    c = run_sweep(SweepPlan(ops=("all_reduce",), sizes=(MiB,)), Placement(2), tmp_path, launcher, 100.0)
    assert len(launcher.jobs) == 1 and c.error == "interrupted"
    assert [r.skipped for r in c.results] == ["not_run"]


def test_the_gloo_sweep_is_one_launch_without_learning(tmp_path):
    launcher = ScriptedLauncher(_play)
    run_sweep(SweepPlan(ops=("all_reduce",), sizes=(MiB,), device="cpu"), Placement(2), tmp_path, launcher, 100.0)
    assert len(launcher.jobs) == 1 and "--learn" not in launcher.jobs[0][0]
