"""The node workers on real GPUs (skipped without one): copies verified and timed on every GPU pair,
and a short NCCL sweep whose algorithm choices come back from NCCL's own log."""

from __future__ import annotations

import pytest

from envcheck.analysis.collectives import collective_rows
from envcheck.node.collective_bench import ALLOCATIONS, CAPTURES, COMMUNICATORS
from envcheck.node.collective_run import Placement, SweepPlan, run_sweep
from envcheck.node.launch import SubprocessLauncher
from envcheck.node.peer import PeerPlan, run_peer_copies

pytestmark = pytest.mark.gpu


def _count() -> int:
    import torch

    return torch.cuda.device_count()


def test_peer_copies_on_every_pair_are_verified(tmp_path):
    n = _count()
    peer = run_peer_copies(PeerPlan(size_bytes=64 << 20, iters=5), tuple(range(n)), SubprocessLauncher(), 240)
    assert peer.error is None
    assert len([c for c in peer.copies if c.kind == "h2d"]) == n
    for c in peer.copies:
        if c.error == "no_peer_access":
            continue
        assert c.error is None and c.wrong == 0 and c.timing is not None, c
    if n >= 2:
        assert {c.method for c in peer.copies if c.kind == "d2d"} == {"copy_engine", "sm_kernel"}


def test_nccl_sweep_reports_busbw_and_the_algorithm(tmp_path):
    n = _count()
    if n < 2:
        pytest.skip("needs two GPUs")
    plan = SweepPlan(sizes=(1 << 20, 1 << 26), iters=5, narrow=False)
    c = run_sweep(plan, Placement(n), tmp_path, SubprocessLauncher(), 300)
    assert c.error is None and c.backend == "nccl" and c.nccl_version, c.launch.stderr_tail
    rows = collective_rows(c)
    assert {r.status for r in rows} == {"ok"} and all(r.busbw_gbps > 0 for r in rows)
    assert all(r.algos for r in rows if r.op != "all_to_all")


def test_nccl_sweep_times_graph_replays_and_eager_calls(tmp_path):
    """The GPU time comes from CUDA-graph replays on every size, the per-call time from eager calls beside
    it; the algorithms from the untimed learning launch, whose debug log the timed launch does not write."""
    n = _count()
    if n < 2:
        pytest.skip("needs two GPUs")
    plan = SweepPlan(ops=("all_reduce", "all_to_all"), sizes=(1 << 20, 1 << 28), iters=10, narrow=False)
    c = run_sweep(plan, Placement(n), tmp_path, SubprocessLauncher(), 300)
    assert c.error is None, c.launch.stderr_tail
    rows = collective_rows(c)
    for r, res in zip(rows, c.results, strict=True):
        assert r.status == "ok" and r.time_basis == "gpu", (res.gpu_reason, res.gpu_error)
        assert all(t.timing.method == "cuda_graph" for t in res.gpu_timings) and len(res.gpu_timings) == n
        assert 0 < r.gpu_time_us <= 1.1 * r.call_time_us  # the host's overhead only ever adds
    assert all(r.algos for r in rows if r.op == "all_reduce")
    assert list(tmp_path.glob("learn.rank*.jsonl")) and list(tmp_path.glob("nccl.rank*.log"))
    big = next(r for r in rows if r.op == "all_reduce" and r.size_bytes == 1 << 28)
    assert big.call_time_us == pytest.approx(big.gpu_time_us, rel=0.15)  # at 256 MiB the host hides behind the GPU


def test_collectives_keep_l2_cold_where_their_buffers_fit_in_it(tmp_path):
    """Every size from 1 MiB (all_reduce: one 1 MiB buffer) up to 3 x L2 cycles through sets of buffers,
    checked right; at 1 GiB (above 3 x L2) one set, on ALLOCATIONS fresh allocations in turn; every size's GPU time
    pools CAPTURES graphs captured on COMMUNICATORS communicators."""
    n = _count()
    if n < 2:
        pytest.skip("needs two GPUs")
    plan = SweepPlan(ops=("all_reduce", "all_to_all"), sizes=(1 << 20, 1 << 22, 1 << 30), iters=10, narrow=False)
    c = run_sweep(plan, Placement(n), tmp_path, SubprocessLauncher(), 300)
    assert c.error is None, c.launch.stderr_tail
    sets = {(r.op, r.size_bytes): r.rotation_sets for r in c.results}
    assert {r.wrong for r in c.results} == {0}
    assert sets[("all_to_all", 1 << 22)] > 2 and sets[("all_reduce", 1 << 22)] > 2
    assert sets[("all_reduce", 1 << 20)] > 2 and sets[("all_reduce", 1 << 30)] == 1
    for r in c.results:
        for t in r.gpu_timings:
            assert t.timing.calls_per_sample % r.rotation_sets == 0  # whole cycles in every graph
        big = r.size_bytes == 1 << 30
        assert r.allocations == (ALLOCATIONS if big else 1) and r.captures == CAPTURES
        # The sweep's own and the extra ones, in turn: all of them where a tenth of the GPU's memory holds them
        # (six on 2 x H100, 2026-11-26 1143Z), fewer on a small GPU.
        assert 1 < r.communicators <= COMMUNICATORS
        # The ten eager iterations split over the allocations, at least one each (all ten on one allocation);
        # the graph replays over the captures, at least one each.
        assert all(t.timing.n == (ALLOCATIONS if big else 10) for t in r.timings)
        assert all(t.timing.n == CAPTURES for t in r.gpu_timings)
