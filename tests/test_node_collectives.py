"""Collective numbers as nccl-tests defines them, NCCL's algorithm per size from its own log, and the
assembly of what torchrun's ranks wrote; fed with the real 2 x H200 captures."""

from __future__ import annotations

import json

import pytest
from node_fakes import text

from envcheck.analysis import node as an
from envcheck.model import Timing, build, to_dict
from envcheck.model.node import CollectiveResult, Collectives, RankTiming
from envcheck.node import nccl_tests
from envcheck.node.collective_run import RankOutput, SweepPlan, assemble, sizes
from envcheck.node.nccl_log import distinct, nccl_version, parse_choices

NCCL_TESTS = nccl_tests.parse(text("nccl_tests_x2.txt"))


def test_nccl_tests_output_parses_every_row():
    assert {r.op for r in NCCL_TESTS} == set(an.NCCL_NAMES)
    assert len(NCCL_TESTS) == 35
    ar4g = next(r for r in NCCL_TESTS if r.op == "all_reduce" and r.size_bytes == 4 << 30)
    assert ar4g.out_of_place.busbw_gbps == 345.03 and ar4g.in_place.wrong == 0
    a2a = next(r for r in NCCL_TESTS if r.op == "all_to_all" and r.size_bytes == 1 << 20)
    assert a2a.in_place.wrong is None  # N/A: nccl-tests does not check alltoall in place


@pytest.mark.parametrize("row", NCCL_TESTS, ids=lambda r: f"{r.op}-{r.size_bytes}")
def test_our_definitions_reproduce_nccl_tests_columns(row):
    """Same S, same count column, same algbw -> busbw factor: envcheck's numbers mean nccl-tests' numbers."""
    lay = an.layout(row.op, row.size_bytes, 2, 4)
    assert lay.size_bytes == row.size_bytes
    assert lay.count == row.count
    oop = row.out_of_place
    assert row.size_bytes / (oop.time_us * 1e-6) / 1e9 == pytest.approx(oop.algbw_gbps, rel=2e-3)
    assert oop.algbw_gbps * an.busbw_factor(row.op, 2) == pytest.approx(oop.busbw_gbps, rel=2e-3)


def test_busbw_factors_on_eight_ranks():
    assert an.busbw_factor("all_reduce", 8) == pytest.approx(1.75)
    assert an.busbw_factor("all_gather", 8) == an.busbw_factor("reduce_scatter", 8) == pytest.approx(0.875)
    assert an.busbw_factor("all_to_all", 8) == pytest.approx(0.875)
    assert an.busbw_factor("broadcast", 8) == 1.0


def test_layout_rounds_per_rank_chunks_like_nccl_tests():
    lay = an.layout("all_gather", 1000, 3, 4)  # 250 elements / 3 = 83 -> 80 (16-byte multiples)
    assert (lay.count, lay.send, lay.recv, lay.size_bytes) == (80, 80, 240, 960)


def _result(op, size, time_us, n=2, wrong=0, samples=20):
    timings = tuple(RankTiming(r, Timing.from_samples("cuda_events", [time_us] * samples)) for r in range(n))
    return CollectiveResult(op, size, an.layout(op, size, n).count, "float32", tuple(range(n)), timings, wrong)


def _sweep(results, choices=()):
    return Collectives("node", "nccl", 2, ("vm", "vm"), results=tuple(results), choices=tuple(choices))


def test_busbw_from_samples_is_nccl_tests_mean_over_iterations_and_ranks():
    r = CollectiveResult("all_reduce", 1 << 30, 1 << 28, "float32", (0, 1), (
        RankTiming(0, Timing.from_samples("cuda_events", [3000.0, 3400.0])),
        RankTiming(1, Timing.from_samples("cuda_events", [3200.0, 3200.0]))), 0)
    row = an.collective_row(r, _sweep([r]))
    assert row.time_us == pytest.approx(3200.0)
    assert row.busbw_gbps == pytest.approx((1 << 30) / 3200e-6 / 1e9)  # factor 2(n-1)/n = 1 on two ranks


def test_agreement_with_nccl_tests_within_three_percent_at_a_gibibyte_and_up():
    big = [r for r in NCCL_TESTS if r.size_bytes >= 1 << 30]
    ours = []
    for r in big:
        col = r.in_place if r.op in an.IN_PLACE_OPS else r.out_of_place
        ours.append(_result(r.op, r.size_bytes, col.time_us * 1.01))  # 1 % slower than nccl-tests
    agreed = an.against_nccl_tests(_sweep(ours), NCCL_TESTS)
    assert len(agreed) == len(big) == 10 and all(a.within for a in agreed)
    slow = [_result("all_reduce", 1 << 30, 3242.47 * 1.05)]
    (a,) = [x for x in an.against_nccl_tests(_sweep(slow), NCCL_TESTS) if x.op == "all_reduce" and x.ours_gbps]
    assert not a.within and a.ratio == pytest.approx(1 / 1.05, rel=1e-3) and a.placement == "in_place"


def test_nccl_log_names_the_algorithm_per_size():
    log = text("nccl_sweep_x2.log")
    assert nccl_version(log) == "2.28.9+cuda13.0"
    choices = distinct(parse_choices(log, rank=0))
    ar = {(c.nccl_bytes, c.algo, c.proto) for c in choices if c.nccl_op == "AllReduce"}
    assert ar == {(1 << 20, "RING", "LL"), (1 << 26, "RING", "SIMPLE"), (1 << 30, "RING", "SIMPLE")}
    assert all(c.nranks == 2 and c.comm == "0x263eaad0" for c in choices)
    assert {c.channel_lo for c in choices} == {0} and {c.channel_hi for c in choices} == {23}
    assert not [c for c in choices if c.nccl_op == "AlltoAll"]


def test_row_carries_the_algorithm_matched_on_ncclbytes_per_rank():
    choices = distinct(parse_choices(text("nccl_sweep_x2.log"), rank=0))
    # The capture's all_gather had 1 GiB per rank: nccl-tests' S is the gathered 2 GiB.
    ag = _result("all_gather", 2 << 30, 2000.0)
    a2a = _result("all_to_all", 1 << 30, 2000.0)
    sweep = _sweep([ag, a2a], choices)
    assert an.collective_row(ag, sweep).algos == (("RING", "SIMPLE"),)
    assert an.collective_row(a2a, sweep).algo_reason == "nccl_p2p"
    small = _result("all_gather", 2 << 20, 20.0)
    assert an.collective_row(small, _sweep([small], choices)).algo_label == "RING/LL"


def test_algorithm_change_between_sizes_is_listed():
    choices = distinct(parse_choices(text("nccl_sweep_x2.log"), rank=0))
    rows = [an.collective_row(r, _sweep([], choices)) for r in
            (_result("all_reduce", 1 << 20, 15.0), _result("all_reduce", 1 << 26, 250.0))]
    assert an.algorithm_changes(rows) == (("all_reduce", 1 << 26, "RING/LL", "RING/SIMPLE"),)


def test_wrong_elements_and_errors_are_statuses():
    sweep = _sweep([])
    assert an.collective_row(_result("all_reduce", 1 << 20, 10.0, wrong=3), sweep).status == "wrong"
    assert an.collective_row(_result("all_reduce", 1 << 20, 10.0, wrong=None), sweep).status == "unverified"


def _events(rank, results, done=True, host="vm"):
    lines = [{"event": "start", "rank": rank, "local_rank": rank, "world_size": 2, "host": host, "pid": 1},
             {"event": "ready", "backend": "nccl", "device": f"cuda:{rank}", "nccl_version": "2.28.9"}]
    lines += [{"event": "result", "phase": "sweep", "method": "cuda_events", "error": None, "skipped": None,
               "need_bytes": 1, "free_bytes": 2, **r} for r in results]
    if done:
        lines.append({"event": "done"})
    return "\n".join(json.dumps(x) for x in lines) + "\n"


def test_assemble_keeps_every_rank_and_lists_unreached_sizes():
    plan = SweepPlan(ops=("all_reduce",), sizes=(1 << 20, 1 << 22), narrow=False)
    r0 = {"op": "all_reduce", "size_bytes": 1 << 20, "count": 1 << 18, "ranks": [0, 1], "samples_us": [15.0, 16.0],
          "wrong": 0}
    r1 = dict(r0, samples_us=[15.5, 15.5], wrong=2)
    outs = (RankOutput(0, _events(0, [r0]) + '{"event": "res'),  # cut short by a kill: ignored
            RankOutput(1, _events(1, [r1], done=False)))
    c = assemble(outs, plan, 2, "node", None)
    assert [r.status for r in c.ranks] == ["ok", "missing"]
    first, unreached = c.results
    assert first.wrong == 2 and len(first.timings) == 2
    assert unreached.size_bytes == 1 << 22 and unreached.skipped == "not_run"
    assert an.collective_row(unreached, c).status == "skipped"
    assert build(Collectives, to_dict(c)) == c


def test_a_rank_that_never_reported_a_size_leaves_it_unverified():
    plan = SweepPlan(ops=("all_reduce",), sizes=(1 << 20,), narrow=False)
    r0 = {"op": "all_reduce", "size_bytes": 1 << 20, "count": 1 << 18, "ranks": [0, 1], "samples_us": [15.0],
          "wrong": 0}
    c = assemble((RankOutput(0, _events(0, [r0])),), plan, 2, "node", None)
    (r,) = c.results
    assert r.absent_ranks == (1,) and r.wrong is None
    assert c.ranks[1].status == "missing"


def test_default_sweep_is_nccl_tests_one_mebibyte_to_four_gibibytes():
    assert sizes() == (1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30, 1 << 32)
    with pytest.raises(ValueError):
        SweepPlan(ops=("all_reduce", "reduce"))


def test_busbw_against_what_the_h200_links_allow():
    from node_fakes import capture, fake_nvml

    from envcheck.node.topology import probe_topology

    cap = capture()
    topo = probe_topology(fake_nvml(), (0, 1), cap["topo_m"]["stdout"], cap["nvlink_s"]["stdout"])
    expect = an.ring_expectation(topo, (0, 1))
    assert expect == pytest.approx(450.0)  # 18 NVLink 4 links x 25 GB/s (datasheet), not 18 x 26.562 (NVML)
    ar = next(r for r in NCCL_TESTS if r.op == "all_reduce" and r.size_bytes == 4 << 30)
    row = an.collective_row(_result("all_reduce", 4 << 30, ar.in_place.time_us), _sweep([]))
    assert an.pct_of_links(row, expect) == pytest.approx(100 * 342.63 / 450.0, rel=2e-3)  # about 76 %
