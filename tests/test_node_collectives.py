"""Collective numbers as nccl-tests defines them, NCCL's algorithm per size from its own log, and the
assembly of what torchrun's ranks wrote; fed with the real 2 x H200 captures."""

from __future__ import annotations

import json

import pytest
from node_fakes import text

from envcheck.analysis import collectives
from envcheck.analysis.collectives import (
    IN_PLACE_OPS,
    NCCL_NAMES,
    against_nccl_tests,
    algorithm_changes,
    busbw_factor,
    collective_row,
    collective_rows,
    layout,
    medians,
    pct_of_links,
    ring_expectation,
)
from envcheck.model import Timing, build, to_dict
from envcheck.model.node import CollectiveResult, Collectives, RankTiming
from envcheck.node import nccl_tests
from envcheck.node.collective_run import RankOutput, SweepPlan, assemble, sizes
from envcheck.node.nccl_log import distinct, nccl_version, parse_choices

NCCL_TESTS = nccl_tests.parse(text("nccl_tests_x2.txt"))


def test_nccl_tests_output_parses_every_row():
    assert {r.op for r in NCCL_TESTS} == set(NCCL_NAMES)
    assert len(NCCL_TESTS) == 35
    ar4g = next(r for r in NCCL_TESTS if r.op == "all_reduce" and r.size_bytes == 4 << 30)
    assert ar4g.out_of_place.busbw_gbps == 345.03 and ar4g.in_place.wrong == 0
    a2a = next(r for r in NCCL_TESTS if r.op == "all_to_all" and r.size_bytes == 1 << 20)
    assert a2a.in_place.wrong is None  # N/A: nccl-tests does not check alltoall in place


@pytest.mark.parametrize("row", NCCL_TESTS, ids=lambda r: f"{r.op}-{r.size_bytes}")
def test_our_definitions_reproduce_nccl_tests_columns(row):
    """Same S, same count column, same algbw -> busbw factor: envcheck's numbers mean nccl-tests' numbers."""
    lay = layout(row.op, row.size_bytes, 2, 4)
    assert lay.size_bytes == row.size_bytes
    assert lay.count == row.count
    oop = row.out_of_place
    assert row.size_bytes / (oop.time_us * 1e-6) / 1e9 == pytest.approx(oop.algbw_gbps, rel=2e-3)
    assert oop.algbw_gbps * busbw_factor(row.op, 2) == pytest.approx(oop.busbw_gbps, rel=2e-3)


def test_busbw_factors_on_eight_ranks():
    assert busbw_factor("all_reduce", 8) == pytest.approx(1.75)
    assert busbw_factor("all_gather", 8) == busbw_factor("reduce_scatter", 8) == pytest.approx(0.875)
    assert busbw_factor("all_to_all", 8) == pytest.approx(0.875)
    assert busbw_factor("broadcast", 8) == 1.0


def test_layout_rounds_per_rank_chunks_like_nccl_tests():
    lay = layout("all_gather", 1000, 3, 4)  # 250 elements / 3 = 83 -> 80 (16-byte multiples)
    assert (lay.count, lay.send, lay.recv, lay.size_bytes) == (80, 80, 240, 960)


def _result(op, size, time_us, n=2, wrong=0, samples=20):
    timings = tuple(RankTiming(r, Timing.from_samples("cuda_events", [time_us] * samples)) for r in range(n))
    return CollectiveResult(op, size, layout(op, size, n).count, "float32", tuple(range(n)), timings, wrong)


def _sweep(results, choices=()):
    return Collectives("node", "nccl", 2, ("vm", "vm"), results=tuple(results), choices=tuple(choices))


def test_busbw_from_samples_is_nccl_tests_mean_over_iterations_and_ranks():
    r = CollectiveResult("all_reduce", 1 << 30, 1 << 28, "float32", (0, 1), (
        RankTiming(0, Timing.from_samples("cuda_events", [3000.0, 3400.0])),
        RankTiming(1, Timing.from_samples("cuda_events", [3200.0, 3200.0]))), 0)
    row = collective_row(r, _sweep([r]))
    assert row.time_us == pytest.approx(3200.0)
    assert row.busbw_gbps == pytest.approx((1 << 30) / 3200e-6 / 1e9)  # factor 2(n-1)/n = 1 on two ranks


def _gpu_result(op, size, gpu_us, call_us, n=2):
    """A GPU collective with both times: graph replays (GPU time) and eager calls (per call)."""
    r = _result(op, size, call_us, n)
    gpu = tuple(RankTiming(k, Timing.from_samples("cuda_graph", [gpu_us] * 20, 20)) for k in range(n))
    return CollectiveResult(r.op, r.size_bytes, r.count, r.dtype, r.ranks, r.timings, r.wrong, gpu_timings=gpu)


def test_agreement_with_nccl_tests_at_every_size_5_percent_and_2_from_64_mib():
    ours = []
    for r in NCCL_TESTS:
        col = r.in_place if r.op in IN_PLACE_OPS else r.out_of_place
        ours.append(_result(r.op, r.size_bytes, col.time_us * 1.01))  # 1 % slower than nccl-tests
    agreed = against_nccl_tests(_sweep(ours), NCCL_TESTS)
    assert len(agreed) == len(NCCL_TESTS) == 35 and all(a.within for a in agreed)  # 1 MiB .. 4 GiB, all five
    assert {a.size_bytes for a in agreed} == set(sizes())
    # 3 % off: inside the 5 % band below 64 MiB, outside the 2 % band from 64 MiB up.
    ar = {r.size_bytes: r.in_place.time_us for r in NCCL_TESTS if r.op == "all_reduce"}
    off = [_result("all_reduce", s, t * 1.03) for s, t in ar.items()]
    got = {a.size_bytes: a for a in against_nccl_tests(_sweep(off), NCCL_TESTS) if a.op == "all_reduce"}
    assert [got[s].within for s in sorted(got)] == [s < 64 << 20 for s in sorted(got)]
    assert got[1 << 30].tolerance == 0.02 and got[1 << 20].tolerance == 0.05
    assert got[1 << 30].ratio == pytest.approx(1 / 1.03, rel=1e-3) and got[1 << 30].placement == "in_place"
    a2a = next(a for a in against_nccl_tests(_sweep(ours), NCCL_TESTS) if a.op == "all_to_all")
    assert a2a.placement == "out_of_place"


def test_gpu_time_is_held_against_nccl_tests_graph_mode_and_per_call_beside_it():
    """envcheck's GPU time (graph replays) pairs with nccl-tests -G; the per-call time is shown beside
    nccl-tests' eager loop, without a bar."""
    eager = [r for r in NCCL_TESTS if r.op == "all_reduce" and r.size_bytes == 1 << 20]
    (t,) = eager
    # nccl-tests -G at 1 MiB: a graph time of 14 us (eager 15.25): a planted graph-mode capture.
    graph = [nccl_tests.NcclTestsRow(t.op, t.size_bytes, t.count, t.dtype,
                                     nccl_tests.Placement(14.0, 74.9, 74.9, 0), nccl_tests.Placement(14.0, 74.9, 74.9, 0))]
    ours = _gpu_result("all_reduce", 1 << 20, 14.1, 46.4)  # the committed H200 run's 46.4 us per call
    (a,) = against_nccl_tests(_sweep([ours]), eager, graph)
    assert a.theirs_mode == "graph_unregistered" and a.basis == "gpu" and a.within
    assert a.theirs_gbps == pytest.approx(74.9) and a.ratio == pytest.approx(14.0 / 14.1, rel=1e-3)
    assert a.call_gbps == pytest.approx((1 << 20) / 46.4e-6 / 1e9) and a.eager_gbps == t.in_place.busbw_gbps
    # A per-call-only row (gloo, a refused capture) is held against nccl-tests' eager loop instead.
    (b,) = against_nccl_tests(_sweep([_result("all_reduce", 1 << 20, 46.4)]), eager, graph)
    assert b.theirs_mode == "eager" and b.basis == "per_call" and not b.within


def test_per_call_overhead_is_flagged_launch_bound_and_never_blamed_on_the_links():
    """Issue 17 item 1: at 1 MiB the committed run's 46.4 us per call (host overhead) gave 22.6 GB/s,
    "5% of links". With a GPU time the busbw and the share of the links are the GPU's."""
    row = collective_row(_gpu_result("all_reduce", 1 << 20, 16.5, 46.4), _sweep([]))
    assert row.time_basis == "gpu" and row.launch_bound and row.gpu_reason is None
    assert row.time_us == pytest.approx(16.5) and row.gpu_time_us == pytest.approx(16.5)
    assert row.call_time_us == pytest.approx(46.4)
    assert row.busbw_gbps == pytest.approx((1 << 20) / 16.5e-6 / 1e9)  # 63.6 GB/s, nccl-tests' 63.5
    assert row.call_busbw_gbps == pytest.approx((1 << 20) / 46.4e-6 / 1e9)  # 22.6 GB/s, what a caller sees
    assert pct_of_links(row, 450.0) == pytest.approx(100 * row.busbw_gbps / 450.0)
    # At 4 GiB the host is hidden behind the GPU: both times agree and nothing is flagged.
    big = collective_row(_gpu_result("all_reduce", 4 << 30, 12500.0, 12510.0), _sweep([]))
    assert not big.launch_bound and big.time_basis == "gpu"


def test_without_a_gpu_time_the_per_call_time_is_used_and_says_why():
    gloo = CollectiveResult("all_reduce", 1 << 20, 1 << 18, "float32", (0, 1), _result("all_reduce", 1 << 20, 900.0).timings,
                            0, gpu_reason="no_cuda_graphs")
    row = collective_row(gloo, Collectives("node", "gloo", 2, results=(gloo,)))
    assert row.time_basis == "per_call" and row.gpu_reason == "no_cuda_graphs" and not row.launch_bound
    assert row.time_us == pytest.approx(900.0) and row.gpu_time_us is None
    refused = CollectiveResult("all_reduce", 1 << 20, 1 << 18, "float32", (0, 1), gloo.timings, 0,
                               gpu_reason="capture_failed", gpu_error="RuntimeError: operation not permitted")
    assert collective_row(refused, _sweep([refused])).gpu_reason == "capture_failed"
    assert build(CollectiveResult, to_dict(refused)) == refused
    with pytest.raises(ValueError, match="no GPU time"):
        CollectiveResult("all_reduce", 1 << 20, 1 << 18, "float32", (0, 1), gpu_reason="because")
    with pytest.raises(ValueError, match="communicators must be 1 to captures"):
        CollectiveResult("all_reduce", 1 << 20, 1 << 18, "float32", (0, 1), gloo.timings, 0, captures=4,
                         communicators=6)


def test_the_committed_node_report_predates_gpu_times_and_still_loads_labelled_per_call():
    from envcheck.model import load

    node = load("evidence/2026-11-22_2326Z_vm_2x-h200_node.json.gz").node
    rows = collective_rows(node.collectives[0])
    assert rows and all(r.time_basis == "per_call" and r.gpu_reason == "not_recorded" for r in rows if r.call_time_us)
    ar = next(r for r in rows if r.op == "all_reduce" and r.size_bytes == 1 << 20)
    assert ar.time_us == pytest.approx(ar.call_time_us) and 40 < ar.time_us < 60  # the ~45 us floor of issue 17


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
    assert collective_row(ag, sweep).algos == (("RING", "SIMPLE"),)
    assert collective_row(a2a, sweep).algo_reason == "nccl_p2p"
    small = _result("all_gather", 2 << 20, 20.0)
    assert collective_row(small, _sweep([small], choices)).algo_label == "RING/LL"


def test_algorithm_change_between_sizes_is_listed():
    choices = distinct(parse_choices(text("nccl_sweep_x2.log"), rank=0))
    rows = [collective_row(r, _sweep([], choices)) for r in
            (_result("all_reduce", 1 << 20, 15.0), _result("all_reduce", 1 << 26, 250.0))]
    assert algorithm_changes(rows) == (("all_reduce", 1 << 26, "RING/LL", "RING/SIMPLE"),)


def test_wrong_elements_and_errors_are_statuses():
    sweep = _sweep([])
    assert collective_row(_result("all_reduce", 1 << 20, 10.0, wrong=3), sweep).status == "wrong"
    assert collective_row(_result("all_reduce", 1 << 20, 10.0, wrong=None), sweep).status == "unverified"


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
    assert collective_row(unreached, c).status == "skipped"
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

    from envcheck.probes.topology import probe_topology

    cap = capture()
    topo = probe_topology(fake_nvml(), (0, 1), cap["topo_m"]["stdout"], cap["nvlink_s"]["stdout"])
    expect = ring_expectation(topo, (0, 1))
    assert expect == pytest.approx(450.0)  # 18 NVLink 4 links x 25 GB/s (datasheet), not 18 x 26.562 (NVML)
    ar = next(r for r in NCCL_TESTS if r.op == "all_reduce" and r.size_bytes == 4 << 30)
    row = collective_row(_result("all_reduce", 4 << 30, ar.in_place.time_us), _sweep([]))
    assert pct_of_links(row, expect) == pytest.approx(100 * 342.63 / 450.0, rel=2e-3)  # about 76 %


def test_assemble_keeps_both_times_and_a_gpu_time_needs_every_member():
    plan = SweepPlan(ops=("all_reduce",), sizes=(1 << 20, 1 << 22), narrow=False)
    base = {"op": "all_reduce", "count": 1 << 18, "ranks": [0, 1], "samples_us": [45.0, 47.0], "wrong": 0}
    both = {**base, "size_bytes": 1 << 20, "gpu_samples_us": [16.0, 17.0], "gpu_calls": 20, "rotation_sets": 75,
            "captures": 12, "communicators": 6}
    # At 4 MiB rank 1's capture was refused: no GPU time for the call, the refusal kept.
    r0 = {**base, "size_bytes": 1 << 22, "count": 1 << 20, "gpu_samples_us": [30.0], "gpu_calls": 20, "allocations": 12}
    r1 = {**base, "size_bytes": 1 << 22, "count": 1 << 20, "gpu_samples_us": [], "gpu_reason": "capture_failed",
          "gpu_error": "RuntimeError: capture refused", "allocations": 12}
    c = assemble((RankOutput(0, _events(0, [both, r0])), RankOutput(1, _events(1, [both, r1]))), plan, 2, "node", None)
    one, four = c.results
    assert [t.timing.method for t in one.gpu_timings] == ["cuda_graph", "cuda_graph"]
    assert one.gpu_timings[0].timing.calls_per_sample == 20 and one.gpu_reason is None
    assert one.rotation_sets == 75 and four.rotation_sets == 1  # an event without the key: one set
    assert one.allocations == 1 and four.allocations == 12  # ... and one allocation
    assert one.captures == 12 and four.captures == 1  # graphs pooled; none where there is no GPU time
    assert one.communicators == 6 and four.communicators == 1
    assert four.gpu_timings == () and four.gpu_reason == "capture_failed" and "refused" in four.gpu_error
    rows = collective_rows(c)
    assert [r.time_basis for r in rows] == ["gpu", "per_call"]
    assert rows[0].time_us == pytest.approx(16.5) and rows[0].launch_bound
    assert build(Collectives, to_dict(c)) == c


def test_calls_per_graph_fill_about_a_millisecond():
    from envcheck.node.collective_bench import MAX_GRAPH_CALLS, calls_per_graph

    assert calls_per_graph(12.5) == 80  # 1 MiB on NVLink: 80 calls make a replay of about 1 ms
    assert calls_per_graph(250.0) == 4
    assert calls_per_graph(12500.0) == 1  # 4 GiB: one call per replay, replays back to back
    assert calls_per_graph(1.0) == calls_per_graph(0.0) == MAX_GRAPH_CALLS


def test_several_nccl_tests_runs_are_one_reference_their_median_with_the_spread():
    """nccl-tests' own runs of one size scatter by about as much as the 2% bar (reduce_scatter 1 GiB on
    2 x H200: 1992 against 1941 us): three runs in one log become one row, each column the median."""
    def row(t_us, wrong=0):
        size = 1 << 30
        bw = size / t_us / 1e3
        p = nccl_tests.Placement(t_us, bw, bw / 2, wrong)
        return nccl_tests.NcclTestsRow("reduce_scatter", size, size // 8, "float", p, p)

    runs = [row(1992.3), row(1941.0), row(1960.0, wrong=3)]
    (m,) = medians(runs)
    assert m.runs == 3 and m.out_of_place.time_us == pytest.approx(1960.0) and m.out_of_place.wrong == 3
    lo, hi = m.busbw_range[0]
    assert lo == pytest.approx(runs[0].out_of_place.busbw_gbps) and hi == pytest.approx(runs[1].out_of_place.busbw_gbps)
    assert medians(runs[:1]) == (runs[0],)  # one run: unchanged
    # envcheck 2.4% quicker than the slowest run but within 2% of the median: it agrees with the median.
    ours = _gpu_result("reduce_scatter", 1 << 30, 1960.0 * 0.99, 2000.0)
    (a,) = against_nccl_tests(_sweep([ours]), runs[:1], runs)
    assert a.theirs_mode == "graph_unregistered" and a.theirs_runs == 3 and a.within
    assert a.theirs_gbps == pytest.approx(m.out_of_place.busbw_gbps) and a.theirs_range == (lo, hi)
    (one,) = against_nccl_tests(_sweep([ours]), runs[:1], runs[:1])
    assert one.theirs_runs == 1 and one.theirs_range is None and not one.within  # 2.9% off the slowest run


def _paced(samples_by_rank, allocations=1, op="all_to_all", size=64 << 20, captures=1):
    r = _result(op, size, 300.0, len(samples_by_rank))
    gpu = tuple(RankTiming(k, Timing.from_samples("cuda_graph", list(xs), 8)) for k, xs in enumerate(samples_by_rank))
    return CollectiveResult(r.op, r.size_bytes, r.count, r.dtype, r.ranks, r.timings, r.wrong, gpu_timings=gpu,
                            allocations=allocations, captures=captures, communicators=captures)


def test_replays_at_two_paces_are_flagged_and_one_pace_with_its_jitter_is_not():
    """The 2 x H100 run of 2026-11-26 1508Z: all_to_all 64 MiB, 12 of 24 replays at 147-151 us a call, the rest at
    138-140 (rank 0's replays, as recorded). Its mean lies 4.3% above the fastest tenth; a size that kept one pace
    (16 MiB of the run before, 53-55 us) stays under the 3% bar."""
    two = [139, 139, 149, 149, 151, 147, 139, 140, 149, 150, 150, 148, 138, 139, 150, 150, 138, 138, 139, 138, 150,
           148, 138, 138]
    one = [53, 54, 54, 54, 53, 53, 54, 54, 54, 54, 53, 54, 54, 54, 54, 54, 54, 53, 54, 54, 54, 54, 54, 54]
    split = collective_row(_paced([two, one]), _sweep([]))
    assert split.pace_spread == pytest.approx(sum(two) / 24 / 138 - 1) and split.unsteady
    steady = collective_row(_paced([one, one]), _sweep([]))
    assert steady.pace_spread == pytest.approx(sum(one) / 24 / 53 - 1) and not steady.unsteady
    # Spread over fresh allocations on purpose (where a buffer lands), or too few replays: no judgment.
    assert collective_row(_paced([two, two], allocations=12), _sweep([])).pace_spread is None
    assert collective_row(_paced([two[:9], two[:9]]), _sweep([])).pace_spread is None
    # No GPU time (per-call rows): nothing to judge either.
    assert collective_row(_result("all_to_all", 64 << 20, 140.0), _sweep([])).pace_spread is None


def test_the_gpu_time_is_the_median_of_the_captures_of_one_allocation_and_the_mean_of_fresh_ones():
    """Twelve captures of two replays each, three of them ~7% slow (as at 2026-11-26 1736Z on 2 x H100, each on a
    communicator of its own): the GPU time is a fast capture's, where the replays' mean would be pulled 1.7% up.
    A rank's replays are its captures' runs one after the other; each capture's time is averaged over the
    ranks before the median."""
    fast, slow = [138.0, 139.0], [148.0, 150.0]
    rank0 = [x for k in range(12) for x in (slow if k in (0, 1, 11) else fast)]
    rank1 = [x + 1.0 for x in rank0]
    r = _paced([rank0, rank1], captures=12)
    assert collectives.capture_means_us(r) == pytest.approx([149.5 if k in (0, 1, 11) else 139.0 for k in range(12)])
    assert collectives.gpu_time_us(r) == pytest.approx(139.0)
    mean = (sum(rank0) + sum(rank1)) / 48
    assert mean > 1.015 * collectives.gpu_time_us(r)
    # Half the captures slow: the median lies between the paces, as the mean does (the 1508Z run).
    half = [x for k in range(12) for x in (slow if k % 2 else fast)]
    assert collectives.gpu_time_us(_paced([half, half], captures=12)) == pytest.approx((138.5 + 149.0) / 2)
    # One capture (reports before captures were pooled), or replays that do not divide among the captures: the
    # mean of every replay, as before.
    assert collectives.gpu_time_us(_paced([rank0, rank1])) == pytest.approx(mean)
    assert collectives.gpu_time_us(_paced([rank0[:23], rank1[:23]], captures=12)) == pytest.approx(
        (sum(rank0[:23]) + sum(rank1[:23])) / 46)
    assert collectives.capture_means_us(_result("all_to_all", 64 << 20, 140.0)) == ()
    # Captures on fresh allocations each differ by where their buffers landed, a spread without two values: their
    # mean, not their median.
    spread = [x for k in range(12) for x in (274.0 + 4 * k, 274.0 + 4 * k)]
    fresh = _paced([spread, spread], allocations=12, captures=12)
    assert collectives.gpu_time_us(fresh) == pytest.approx(sum(spread) / 24)
    skewed = [x for k in range(12) for x in ((300.0, 300.0) if k < 3 else (280.0, 280.0))]
    assert collectives.gpu_time_us(_paced([skewed, skewed], allocations=12, captures=12)) == pytest.approx(285.0)
    assert collectives.gpu_time_us(_paced([skewed, skewed], captures=12)) == pytest.approx(280.0)
