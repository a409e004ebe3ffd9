"""End to end on the CPU: the collective sweep under torchrun on gloo (the same code that drives NCCL on
GPUs), narrowing with a really slow rank, and a fleet of two nodes simulated with two torchrun
launchers on one machine. Slow: each starts several Python processes that import torch."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from envcheck.analysis.collectives import busbw_factor, collective_narrowing, collective_rows
from envcheck.harness.env import clean_env
from envcheck.model import build
from envcheck.model.fleet import Fleet
from envcheck.node.collective_run import Placement, SweepPlan, assemble, launch_sweep, read_outputs, run_sweep
from envcheck.node.launch import SubprocessLauncher

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


def test_gloo_sweep_under_torchrun_verifies_every_result(tmp_path):
    plan = SweepPlan(sizes=(1 << 16, 1 << 20), warmup=1, iters=4, device="cpu", narrow=False)
    c = run_sweep(plan, Placement(2), tmp_path, SubprocessLauncher(), 180)
    assert c.error is None and c.backend == "gloo" and [r.status for r in c.ranks] == ["ok", "ok"]
    assert c.choices_reason == "backend_not_nccl"
    rows = collective_rows(c)
    assert len(rows) == 10 and {r.status for r in rows} == {"ok"}
    for r, res in zip(rows, c.results, strict=True):
        assert res.wrong == 0 and len(res.timings) == 2 and all(t.timing.n == 4 for t in res.timings)
        mean = sum(sum(t.timing.samples_us) / 4 for t in res.timings) / 2
        assert r.busbw_gbps == pytest.approx(res.size_bytes / (mean * 1e-6) / 1e9 * busbw_factor(r.op, 2))
        # No CUDA graphs on gloo: no GPU time, the per-call (host clock) time is used and labelled so.
        assert res.gpu_timings == () and res.gpu_reason == "no_cuda_graphs"
        assert r.time_basis == "per_call" and r.gpu_reason == "no_cuda_graphs" and not r.launch_bound
    # The CPU sweep is one launch: no NCCL log to learn from, so no learning launch either.
    assert not list(tmp_path.glob("learn.rank*.jsonl")) and not list(tmp_path.glob("torchrun.learn.*"))


def test_narrowing_finds_a_slow_rank_among_three(tmp_path):
    plan = SweepPlan(ops=("all_reduce",), sizes=(1 << 16,), warmup=1, iters=3, device="cpu", narrow=True,
                     narrow_size=1 << 16)
    # Rank 1 sleeps 30 ms in every collective call: every group holding it is slow.
    placement = Placement(3, extra_env={"ENVCHECK_TEST_SLOW_RANK": "1:30000"})
    c = run_sweep(plan, placement, tmp_path, SubprocessLauncher(), 240)
    assert c.error is None, c.launch.stderr_tail
    assert [r.ranks for r in c.narrowing] == [(0, 1, 2), (0, 1), (0, 2), (1, 2)]
    conclusion = collective_narrowing(c)
    assert (conclusion.kind, conclusion.ranks) == ("rank", (1,))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Small per-GPU suite and sweep: the plumbing is under test, not the numbers. The limits are wide: a
# busy 2-core CI machine starts every Python process (each importing torch) at a crawl.
# No torch.compile in the per-rank suites (inductor's C++ build is ~2 s of CPU a rank, and no test here is about it).
FAST = ["--cpu", "--ops", "vector_add", "--sizes", "1024", "--no-compile", "--sweep-sizes", "64K,256K", "--iters", "3",
        "--warmup", "1", "--no-narrow", "--rank-timeout", "300", "--world-timeout", "300", "--join-timeout", "60"]
# The runs stopped, killed or losing a rank: what is checked is the report's JSON and what rank 0 prints, so
# rank 0 renders no documents (their charts are seconds of a loaded machine's time; fleet_of_two checks them).
STOPPED = [*FAST, "--format", "json"]


def _launch(tmp_path: Path, nnodes: int, nproc: int, args: list[str], env_extra: dict[str, str] | None = None
            ) -> list[subprocess.Popen[str]]:
    """``nnodes`` torchrun launchers on this machine (simulated nodes), ``nproc`` ranks each; the ranks'
    temporary work folders go under ``tmp_path/tmp`` (TMPDIR), where the test can watch them."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = clean_env({"PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path / "tmp"), **(env_extra or {})})
    if nnodes == 1:
        where = ["--standalone", f"--nproc-per-node={nproc}"]
    else:
        where = [f"--nnodes={nnodes}", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
                 f"--rdzv-endpoint=127.0.0.1:{_free_port()}", "--rdzv-id=envcheck-test"]
    argv = [sys.executable, "-m", "torch.distributed.run", *where, "-m", "envcheck", "fleet",
            "--out-dir", str(tmp_path / "out"), *args]
    return [subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(nnodes)]


def _finish(procs: list[subprocess.Popen[str]], timeout: float = 600) -> list[str]:
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


def _report(tmp_path: Path, outs: list[str]) -> tuple[Path, Fleet]:
    reports = list((tmp_path / "out").glob("*_fleet-*.json"))
    assert len(reports) == 1, "\n".join(o[-3000:] for o in outs)
    doc = json.loads(reports[0].read_text())
    assert doc["kind"] == "fleet" and doc["format"] == "envcheck-report"
    return reports[0], build(Fleet, doc["fleet"])


def _ours(tmp_path: Path, spare: frozenset[int] = frozenset()) -> list[psutil.Process]:
    """Processes of this test still running, but the launchers in ``spare``: every one names a path
    under ``tmp_path`` (the output folder, the work folders under TMPDIR) in its command line."""
    mine = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if (proc.pid not in spare and str(tmp_path) in " ".join(proc.info["cmdline"] or ())
                    and proc.info["status"] != psutil.STATUS_ZOMBIE):
                mine.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return mine


def _none_left(tmp_path: Path, within_s: float = 30.0, spare: frozenset[int] = frozenset()) -> None:
    deadline = time.monotonic() + within_s
    while _ours(tmp_path, spare) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [(p.pid, " ".join(p.cmdline())[:200]) for p in _ours(tmp_path, spare)]
    for p in _ours(tmp_path, spare):
        p.kill()
    assert not left


def _live_children(p: subprocess.Popen[str]) -> list[psutil.Process]:
    try:
        return [c for c in psutil.Process(p.pid).children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE]
    except psutil.NoSuchProcess:
        return []


def _end_launchers(procs: list[subprocess.Popen[str]]) -> list[str]:
    """The launchers of a fleet that lost a node: a torchrun agent whose ranks succeeded waits in its
    exit barrier (up to 300 s) for the agent that failed, which never comes; that wait is torchrun's,
    not envcheck's, and ends here once no envcheck process is left under it (given 30 s to go)."""
    for p in procs:
        deadline = time.monotonic() + 30
        while p.poll() is None and _live_children(p) and time.monotonic() < deadline:
            time.sleep(0.5)
        if p.poll() is None:
            left = _live_children(p)
            p.kill()
            assert not left
    return _finish(procs, 30)


def _fleet_rank(launcher: subprocess.Popen[str]) -> psutil.Process:
    """The ``envcheck fleet`` rank a torchrun launcher started (not the launcher, not its children)."""
    for child in psutil.Process(launcher.pid).children(recursive=True):
        cmd = " ".join(child.cmdline())
        if "envcheck" in cmd and "fleet" in cmd and "torch.distributed.run" not in cmd:
            return child
    raise AssertionError("no fleet rank under the launcher")


def _wait_for(pattern: str, where: Path, text: str, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for f in where.glob(pattern):
            if text in f.read_text(errors="replace"):
                return
        time.sleep(0.5)
    raise AssertionError(f"{pattern} never held {text!r}")


@pytest.mark.parametrize("nproc", [3])
def test_ranks_sharing_one_host_pass_with_the_default_cpu_sweep(tmp_path, nproc):
    """``torchrun --nproc-per-node N -m envcheck fleet --cpu``: every rank times the CPU, the node's
    gloo sweep has the CPU's default sizes, and a passing run leaves no work files and no process.
    Three ranks (an odd world); two ranks of one host run in the SIGTERM and kill -9 tests below."""
    args = ["--cpu", "--ops", "vector_add", "--sizes", "1024", "--no-compile", "--rank-timeout", "300",
            "--join-timeout", "60", "--format", "json"]  # the documents: fleet_of_two
    procs = _launch(tmp_path, 1, nproc, args)
    (out,) = _finish(procs)
    assert procs[0].returncode == 0, out[-3000:]
    _, fleet = _report(tmp_path, [out])
    assert [r.status for r in fleet.ranks] == ["ok"] * nproc
    (node,) = fleet.nodes
    assert len(node.benches) == nproc and {b.device.backend for b in node.benches} == {"cpu"}
    (sweep,) = node.node.collectives
    assert sweep.world_size == nproc and max(r.size_bytes for r in sweep.results) <= 4 << 20
    assert "envcheck fleet report: 1 node, " in out and "Traceback" not in out
    assert not (tmp_path / "out" / "fleet_work").exists() and not list((tmp_path / "tmp").glob("envcheck-fleet-*"))
    _none_left(tmp_path)


def test_fleet_of_two_simulated_nodes_writes_one_report(tmp_path):
    procs = _launch(tmp_path, 2, 1, FAST)
    outs = _finish(procs)
    path, fleet = _report(tmp_path, outs)
    assert (fleet.nnodes, fleet.world_size, fleet.launcher) == (2, 2, "torchrun")
    assert [r.status for r in fleet.ranks] == ["ok", "ok"] and [r.world_rank for r in fleet.ranks] == [0, 1]
    assert len(fleet.nodes) == 2 and all(len(n.benches) == 1 and n.environment is not None for n in fleet.nodes)
    assert all(n.node is not None for n in fleet.nodes)
    (world,) = fleet.collectives
    assert world.scope == "world" and world.world_size == 2 and world.backend == "gloo"
    rows = collective_rows(world)
    assert rows and {r.status for r in rows} == {"ok"} and all(r.wrong == 0 for r in rows)
    # Rank 0 wrote the documents beside the JSON and printed the summary through the presentation layer.
    stem = path.stem
    assert (path.parent / f"{stem}.md").exists() and (path.parent / f"{stem}.html").exists()
    summary = next(o for o in outs if "envcheck fleet report: 2 nodes, 2 ranks" in o)
    assert "Verdicts" in summary and f"{stem}.html" in summary
    assert "No GPU is expected in a CPU fleet (fleet --cpu): the exit status is 0 when" in summary
    # Issue 49, item 3: a line as every long step of every rank starts (it once said nothing for 58 s).
    for rank, out in enumerate(outs):
        for step in ("probing this machine", "suite: 1 cases on the CPU", "[1/1] ", "collectives across 2 nodes"):
            assert f"envcheck fleet: rank {rank}: {step}" in out, (step, out[-3000:])
        assert f"envcheck fleet: rank {rank}: node tests on the CPU" in out
    assert [p.returncode for p in procs] == [0, 0]
    assert not (tmp_path / "out" / "fleet_work").exists() and not list((tmp_path / "tmp").glob("envcheck-fleet-*"))
    _none_left(tmp_path)


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_rank_killed_or_stopped_during_the_world_collectives_fails_its_node(tmp_path, how):
    """Three simulated nodes; rank 2 (node 2's only rank) is killed (SIGKILL) or stopped (SIGSTOP) while
    the collectives across nodes run (world rank 2 is slowed so that they last): node 2 fails, named
    with its phase, rank 0 exits non-zero, and nothing is left running."""
    # Rank 0 gives a node silent after its own share of the world sweep the join time: 20 s here, not FAST's 60
    # (the other nodes' shares end with its own, the collectives wait on each other). One sweep size: a stopped
    # rank's world workers run the rest of the sweep on (0.3 s a call) before that wait begins.
    args = [*FAST[:FAST.index("--join-timeout")], "--join-timeout", "20", "--format", "json"]
    args[args.index("--sweep-sizes") + 1] = "64K"
    procs = _launch(tmp_path, 3, 1, args, {"ENVCHECK_TEST_SLOW_RANK": "2:300000"})
    stopped = None
    try:
        # The world sweep of node 2 has timed a first size: the collectives are under way.
        _wait_for("envcheck-fleet-r*/world/node2/rank2.jsonl", tmp_path / "tmp", '"event":"result"')
        stopped = _fleet_rank(procs[2])
        stopped.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        out0 = procs[0].communicate(timeout=600)[0]
        if how == "stop":
            with contextlib.suppress(psutil.NoSuchProcess):  # gone already if its launcher stopped it
                stopped.kill()  # nothing can run in a stopped process: the operator's kill, after rank 0
        _none_left(tmp_path, 60, spare=frozenset(p.pid for p in procs))
    finally:
        if stopped is not None and how == "stop":
            with contextlib.suppress(psutil.NoSuchProcess):  # it may be reaped between a check and the kill
                stopped.kill()
        outs = _end_launchers(procs)
    assert procs[0].returncode not in (0, None), out0[-3000:]
    _, fleet = _report(tmp_path, [out0, *outs])
    r2 = fleet.ranks[2]
    assert (r2.status, r2.phase, r2.host) == ("timeout", "world", f"{socket.gethostname()}/2"), r2
    assert [r.status for r in fleet.ranks[:2]] == ["ok", "ok"]
    from envcheck.analysis import analyse
    from envcheck.commands.fleet import fleet_report

    fa = analyse(fleet_report(fleet, None)).fleet
    verdicts = {v.host: v.status for v in fa.verdicts}
    assert verdicts[r2.host] == "fail" and not fa.passed
    assert "Rank 2 was lost in the collectives across nodes" in out0
    assert "the link between" not in out0
    _none_left(tmp_path)  # the launchers too, now


def _cmdline(p: psutil.Process) -> list[str]:
    """A child's command line; none for a zombie an earlier test of this worker left (psutil raises for it)."""
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def test_a_node_whose_agent_is_gone_after_the_sweep_does_not_hold_the_others(tmp_path):
    """Two nodes' world launches; node 1's torchrun agent stops (SIGSTOP, as a lost node's) while its worker
    sweeps on: node 0's torchrun, its worker done, would wait 300 s in its exit barrier for that agent. Node 0's
    launch ends well inside its 200 s limit, counted as its worker's success, and the sweep has both ranks."""
    plan = SweepPlan(ops=("all_reduce",), sizes=(1 << 16,), warmup=1, iters=3, device="cpu", narrow=False)
    port, launches = _free_port(), {}

    def node(n: int) -> None:
        where = Placement(1, None, 2, n, "127.0.0.1", port, {"ENVCHECK_TEST_SLOW_RANK": "1:300000"})
        launches[n] = launch_sweep(plan, where, tmp_path / f"node{n}", SubprocessLauncher(grace_s=2.0), 200)

    threads = [threading.Thread(target=node, args=(n,)) for n in (0, 1)]
    for th in threads:
        th.start()
    agent = None
    try:
        _wait_for("node1/rank1.jsonl", tmp_path, '"event":"ready"')
        agent = next(c for c in psutil.Process().children() if "--node-rank=1" in _cmdline(c))
        agent.suspend()
        threads[0].join(200)
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            if agent is not None:
                agent.kill()
        for th in threads:
            th.join(60)
    assert launches[0].returncode == 0 and not launches[0].ended_early, launches[0]
    outs = read_outputs(tmp_path / "node0") + read_outputs(tmp_path / "node1")
    c = assemble(outs, plan, 2, "world", launches[0])
    assert c.error is None and [r.status for r in c.ranks] == ["ok", "ok"]


def test_sigterm_to_the_launcher_writes_the_partial_report_and_stops_every_child(tmp_path):
    """What torchrun or Slurm does when a job ends: SIGTERM. Rank 0 writes what finished (the suites)
    and says the run was stopped; the node's gloo sweep under way is stopped with its workers."""
    procs = _launch(tmp_path, 1, 2, STOPPED, {"ENVCHECK_TEST_SLOW_RANK": "1:300000"})
    try:
        _wait_for("envcheck-fleet-r0*/node0/collectives/rank1.jsonl", tmp_path / "tmp", '"event":"result"')
        procs[0].send_signal(signal.SIGTERM)
        (out,) = _finish(procs, 120)
    finally:
        _finish(procs, 5)
    assert procs[0].returncode != 0
    _, fleet = _report(tmp_path, [out])
    assert fleet.settings.get("interrupted") == "SIGTERM", out[-3000:]
    assert len(fleet.nodes) == 1 and len(fleet.nodes[0].benches) == 2
    assert "The run was stopped (SIGTERM)" in out
    _none_left(tmp_path, 20)


def test_a_rank_killed_under_one_torchrun_still_gives_a_report(tmp_path):
    """``torchrun --nproc-per-node 3``, rank 2 killed during the node's sweep: torchrun sends SIGTERM to
    the other ranks, and rank 0 writes the partial report (none at all before) and exits non-zero."""
    procs = _launch(tmp_path, 1, 3, STOPPED, {"ENVCHECK_TEST_SLOW_RANK": "1:300000"})
    try:
        _wait_for("envcheck-fleet-r0*/node0/collectives/rank1.jsonl", tmp_path / "tmp", '"event":"result"')
        ranks = [c for c in psutil.Process(procs[0].pid).children()
                 if "torch.distributed.run" not in " ".join(c.cmdline())]
        victim = next(c for c in ranks if c.environ().get("RANK") == "2")
        victim.kill()
        (out,) = _finish(procs, 120)
    finally:
        _finish(procs, 5)
    assert procs[0].returncode != 0
    _, fleet = _report(tmp_path, [out])
    assert fleet.settings.get("interrupted") == "SIGTERM", out[-3000:]
    assert len(fleet.nodes[0].benches) == 3 and fleet.nodes[0].node is not None
    _none_left(tmp_path, 20)


def test_kill_9_of_the_launcher_stops_its_ranks_and_writes_no_verdict(tmp_path):
    """``kill -9`` of torchrun: its ranks (and their workers) used to run on under PID 1 and write "every
    node passed" for a job that was killed. Each rank asked the kernel to tell it of its launcher's death:
    it stops its work, rank 0 writes no report, and nothing of the job is left running."""
    procs = _launch(tmp_path, 1, 2, STOPPED, {"ENVCHECK_TEST_SLOW_RANK": "1:300000"})
    try:
        _wait_for("envcheck-fleet-r0*/node0/collectives/rank1.jsonl", tmp_path / "tmp", '"event":"result"')
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(30)
        _none_left(tmp_path, 120)
    finally:
        for p in _ours(tmp_path):
            p.kill()
        _finish(procs, 5)
    assert not list((tmp_path / "out").glob("*_fleet-*.json"))
