"""End to end on the CPU: the collective sweep under torchrun on gloo (the same code that drives NCCL on
GPUs), narrowing with a really slow rank, and a fleet of two nodes simulated with two torchrun
launchers on one machine. Slow: each starts several Python processes that import torch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.analysis import node as an
from envcheck.analysis.node import collective_narrowing
from envcheck.child_env import child_env
from envcheck.model import build
from envcheck.model.fleet import Fleet
from envcheck.node.collective_run import Placement, SweepPlan, run_sweep
from envcheck.node.launch import SubprocessLauncher

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


def test_gloo_sweep_under_torchrun_verifies_every_result(tmp_path):
    plan = SweepPlan(sizes=(1 << 16, 1 << 20), warmup=1, iters=4, device="cpu", narrow=False)
    c = run_sweep(plan, Placement(2), tmp_path, SubprocessLauncher(), 180)
    assert c.error is None and c.backend == "gloo" and [r.status for r in c.ranks] == ["ok", "ok"]
    assert c.choices_reason == "backend_not_nccl"
    rows = an.collective_rows(c)
    assert len(rows) == 10 and {r.status for r in rows} == {"ok"}
    for r, res in zip(rows, c.results, strict=True):
        assert res.wrong == 0 and len(res.timings) == 2 and all(t.timing.n == 4 for t in res.timings)
        mean = sum(sum(t.timing.samples_us) / 4 for t in res.timings) / 2
        assert r.busbw_gbps == pytest.approx(res.size_bytes / (mean * 1e-6) / 1e9 * an.busbw_factor(r.op, 2))
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


def test_fleet_of_two_simulated_nodes_writes_one_report(tmp_path):
    port = _free_port()
    env = child_env({"PYTHONPATH": str(ROOT)})
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=envcheck-test",
            "-m", "envcheck", "fleet", "--cpu", "--ops", "vector_add", "--sizes", "1024", "--sweep-sizes", "64K,256K",
            "--iters", "3", "--warmup", "1", "--no-narrow", "--out-dir", str(tmp_path), "--rank-timeout", "240",
            "--world-timeout", "240"]
    procs = [subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=400)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    reports = list(tmp_path.glob("*_fleet-2x_*.json"))
    assert len(reports) == 1, "\n".join(o[-3000:] for o in outs)
    doc = json.loads(reports[0].read_text())
    assert doc["kind"] == "fleet" and doc["format"] == "envcheck-report"
    fleet = build(Fleet, doc["fleet"])
    assert (fleet.nnodes, fleet.world_size, fleet.launcher) == (2, 2, "torchrun")
    assert [r.status for r in fleet.ranks] == ["ok", "ok"]
    assert len(fleet.nodes) == 2 and all(len(n.benches) == 1 and n.environment is not None for n in fleet.nodes)
    assert all(n.node is not None for n in fleet.nodes)
    (world,) = fleet.collectives
    assert world.scope == "world" and world.world_size == 2 and world.backend == "gloo"
    rows = an.collective_rows(world)
    assert rows and {r.status for r in rows} == {"ok"} and all(r.wrong == 0 for r in rows)
    assert os.path.isdir(tmp_path / "fleet_work" / "world")
    # Rank 0 wrote the documents beside the JSON and printed the summary through the presentation layer.
    stem = reports[0].stem
    assert (tmp_path / f"{stem}.md").exists() and (tmp_path / f"{stem}.html").exists()
    summary = next(o for o in outs if "envcheck fleet report: 2 nodes, 2 ranks" in o)
    assert "Verdicts" in summary and f"{stem}.html" in summary
