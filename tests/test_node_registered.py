"""The collectives' GPU time on NCCL-registered buffers, and each nccl-tests mode held against its counterpart:
the unregistered graph mode and the eager loop against the plain GPU time, the default graph mode (where NCCL
registers nccl-tests' buffers) against the registered one; an eager loop that is launch-bound is listed, not held."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from envcheck.analysis.collectives import against_nccl_tests, bandwidths_gbps, busbw_factor, collective_row, layout
from envcheck.model import Timing, build, to_dict
from envcheck.model.crosscheck import NcclTestsRow, Placement
from envcheck.model.node import CollectiveResult, Collectives, RankTiming
from envcheck.node.collective_bench import CollectiveBench, Measured
from envcheck.node.collective_run import _with_registered

MIB = 1 << 20


def _times(us: float, n: int = 2, method: str = "cuda_graph") -> tuple[RankTiming, ...]:
    return tuple(RankTiming(k, Timing.from_samples(method, [us] * 6, 10)) for k in range(n))


def _result(op: str, size: int, gpu_us: float, reg_us: float | None = None, **kw) -> CollectiveResult:
    lay = layout(op, size, 2, 4)
    return CollectiveResult(op, lay.size_bytes, lay.count, "float32", (0, 1), _times(gpu_us * 1.5, method="cuda_events"),
                            0, gpu_timings=_times(gpu_us), registered_timings=() if reg_us is None else _times(reg_us),
                            registered_captures=3 if reg_us is not None else 1, **kw)


def _row(op: str, size: int, us: float) -> NcclTestsRow:
    algbw = size / (us * 1e-6) / 1e9
    p = Placement(us, algbw, algbw * busbw_factor(op, 2), 0)
    return NcclTestsRow(op, size, size // 4, "float", p, p)


def _sweep(*results: CollectiveResult) -> Collectives:
    return Collectives("node", "nccl", 2, settings={}, results=results)


def test_each_mode_is_held_against_its_counterpart_and_a_launch_bound_eager_loop_is_listed_not_held():
    # all_gather 256 MiB: plain 546 us (nccl-tests -G unregistered 546, eager 551), registered 434 (-G default 434).
    # all_gather 1 MiB: nccl-tests' eager loop 24.1 us a call against its own graph's 10.2: launch-bound.
    sweep = _sweep(_result("all_gather", 256 * MIB, 546.0, 434.0), _result("all_gather", MIB, 10.2, 10.3))
    eager = [_row("all_gather", 256 * MIB, 551.5), _row("all_gather", MIB, 24.1)]
    graph = [_row("all_gather", 256 * MIB, 546.2), _row("all_gather", MIB, 10.2)]
    registered = [_row("all_gather", 256 * MIB, 434.2), _row("all_gather", MIB, 10.3)]
    got = {(a.size_bytes, a.theirs_mode): a for a in against_nccl_tests(sweep, eager, graph,
                                                                            registered_rows=registered, hold_eager=True)}
    assert set(got) == {(s, m) for s in (MIB, 256 * MIB) for m in ("graph_unregistered", "eager", "graph")}
    unreg = got[(256 * MIB, "graph_unregistered")]
    assert unreg.basis == "gpu" and unreg.within
    assert got[(256 * MIB, "eager")].held and got[(256 * MIB, "eager")].within  # 1% apart, within 2%
    reg = got[(256 * MIB, "graph")]
    assert reg.basis == "registered" and reg.within and reg.ratio == pytest.approx(434.2 / 434.0, rel=1e-4)
    assert not got[(MIB, "eager")].held and got[(MIB, "graph_unregistered")].held
    # Without hold_eager (reports compared before both modes were held) one row per size and mode given.
    assert len(against_nccl_tests(sweep, eager, graph)) == 2


def test_a_missing_registered_time_never_agrees_and_the_plain_time_is_not_held_against_the_registered_mode():
    sweep = _sweep(_result("all_to_all", 64 * MIB, 136.0, registered_reason="capture_failed"))
    (plain, reg) = against_nccl_tests(sweep, [_row("all_to_all", 64 * MIB, 137.0)],
                                         [_row("all_to_all", 64 * MIB, 136.5)],
                                         registered_rows=[_row("all_to_all", 64 * MIB, 110.0)])
    assert plain.within and reg.theirs_mode == "graph"
    assert reg.ours_gbps is None and reg.ratio is None and not reg.within and reg.held


def test_the_registered_time_is_the_median_of_its_captures_and_a_wrong_registered_element_makes_the_row_wrong():
    r = _result("all_reduce", 64 * MIB, 250.0)
    samples = [300.0] * 4 + [248.0] * 4 + [250.0] * 4  # three captures: one slow communicator
    r = replace(r, registered_timings=tuple(RankTiming(k, Timing.from_samples("cuda_graph", samples, 4))
                                            for k in (0, 1)), registered_captures=3)
    row = collective_row(r, _sweep(r))
    assert row.registered_time_us == pytest.approx(250.0) and row.status == "ok"
    assert row.registered_busbw_gbps == pytest.approx(bandwidths_gbps("all_reduce", r.size_bytes, 2, 250.0)[1])
    bad = collective_row(replace(r, registered_wrong=3), _sweep(r))
    assert bad.status == "wrong" and bad.wrong == 3


def test_the_registered_fields_round_trip_through_the_report_and_an_unknown_reason_is_refused():
    r = _result("broadcast", 4 * MIB, 25.0, 40.0)
    d = to_dict(r)
    assert d["registered_captures"] == 3 and "registered_reason" not in d
    assert build(CollectiveResult, d) == r
    old = {k: v for k, v in to_dict(_result("broadcast", 4 * MIB, 25.0)).items()}
    assert not any(k.startswith("registered") for k in old)  # a report without them is as before
    with pytest.raises(ValueError, match="unknown reason"):
        CollectiveResult("broadcast", 4 * MIB, MIB, "float32", (0, 1), registered_reason="because")


def test_the_ranks_registered_samples_join_the_result_only_when_every_member_has_them():
    base = _result("all_gather", 16 * MIB, 60.0)
    ev = {"reg_samples_us": [45.0, 46.0, 45.5], "reg_calls": 20, "reg_captures": 3, "reg_wrong": 0}
    got = _with_registered(base, {0: dict(ev), 1: dict(ev)}, (0, 1))
    assert len(got.registered_timings) == 2 and got.registered_captures == 3 and got.registered_wrong == 0
    one = _with_registered(base, {0: dict(ev), 1: {"reg_reason": "capture_failed", "reg_error": "refused"}}, (0, 1))
    assert one.registered_timings == () and one.registered_reason == "capture_failed"
    assert one.registered_error == "refused"
    assert _with_registered(base, {0: {}, 1: {}}, (0, 1)) == base  # a worker from before: nothing to show


class _Clock:
    """A clock whose every mark is 7 us after the previous one (the CPU's host clock stands in for CUDA events)."""

    def __init__(self) -> None:
        self.t = 0.0

    def mark(self) -> float:
        self.t += 7.0
        return self.t

    def synchronize(self) -> None:
        pass

    def elapsed_us(self, a: float, b: float) -> float:
        return b - a


def test_the_per_call_time_marks_every_stride_calls_so_a_sample_is_a_loop_s_mean_call():
    bench = CollectiveBench.__new__(CollectiveBench)
    bench.clock, bench.cuda = _Clock(), False
    calls: list[int] = []
    bench._call = lambda op, send, recv, group, root: calls.append(1)  # type: ignore[method-assign]
    samples, *_ = bench._timed("all_reduce", [(None, None)], None, 0, 2, 4, graph=False, calls=None, replays=0,
                                stride=10)
    assert len(calls) == 2 + 40 and len(samples) == 4
    assert samples == pytest.approx((0.7,) * 4)  # 7 us between marks, ten calls each
    assert Measured("all_reduce", 1, 1, (0,)).reg_samples_us == ()


def test_the_registered_time_pools_its_captures_on_the_communicators_in_turn_and_checks_a_replayed_call():
    """On the capture path of tests/test_node_graph_capture.py (a fake torch.cuda, one rank): after the plain
    measurement, the buffers come from a memory pool of NCCL's allocator, REGISTERED_CAPTURES graphs are timed, and
    one call captured alone is replayed on fresh inputs and checked; the pool is dropped, its memory emptied."""
    import contextlib

    from test_node_graph_capture import FakeCuda, _bench

    from envcheck.node.collective_bench import CAPTURES, REGISTERED_CAPTURES

    class PoolCuda(FakeCuda):
        def __init__(self, log, **kw):
            super().__init__(log, **kw)
            self.pools: list[object] = []

        def MemPool(self, allocator):  # noqa: N802 - torch's name
            self.pools.append(allocator)
            return object()

        @contextlib.contextmanager
        def use_mem_pool(self, pool):
            self.log.append("pool on")
            yield
            self.log.append("pool off")

    cuda = PoolCuda([], us_per_call=700.0)
    b, _ = _bench(cuda, host_s=0.001)
    b._nccl_allocator = "nccl allocator"
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=2 * CAPTURES)
    assert m.gpu_reason is None and len(m.gpu_samples_us) == 2 * CAPTURES
    assert m.reg_reason is None and m.reg_wrong == 0 and m.reg_captures == REGISTERED_CAPTURES
    assert len(m.reg_samples_us) == REGISTERED_CAPTURES * math.ceil(2 * CAPTURES / REGISTERED_CAPTURES)
    assert m.reg_samples_us == pytest.approx([700.0] * len(m.reg_samples_us))
    assert cuda.pools == ["nccl allocator"] and cuda.log.count("pool on") == 1
    # CAPTURES plain graphs, REGISTERED_CAPTURES registered ones and the one-call check, each freed.
    assert cuda.log.count(("capture", "thread_local")) == CAPTURES + REGISTERED_CAPTURES + 1
    assert cuda.log.count("reset") == CAPTURES + REGISTERED_CAPTURES + 1 and cuda.log[-1] == "empty_cache"
    # Without NCCL's allocator (an older torch) the plain result stands and says why there is no registered time.
    b2, _ = _bench(FakeCuda([], us_per_call=700.0), host_s=0.001)
    m2 = b2.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=2 * CAPTURES)
    assert m2.gpu_samples_us and m2.reg_samples_us == () and m2.reg_reason == "no_nccl_allocator"


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_node_page_shows_the_registered_column_its_meaning_and_why_a_size_has_none(lang):
    import node_reports as nr
    from in_lang import render_markdown

    from envcheck.model.node import REGISTERED_REASONS
    from envcheck.render.i18n import catalog

    assert all(f"node.registered.{r}" in catalog(lang) for r in REGISTERED_REASONS)
    report = nr.node_report()
    node = report.node
    sweep = node.collectives[0]
    results = list(sweep.results)
    first = results[0]
    n = len(first.ranks)
    results[0] = replace(first, gpu_timings=_times(100.0, n), registered_timings=_times(80.0, n),
                         registered_captures=3, registered_wrong=0)
    results[1] = replace(results[1], gpu_timings=_times(100.0, n), registered_reason="capture_failed",
                         registered_error="RuntimeError: <b>refused</b>")
    report = replace(report, node=replace(node, collectives=(replace(sweep, results=tuple(results)),
                                                            *node.collectives[1:])))
    md = render_markdown(report, lang=lang)
    assert catalog(lang)["node.col.busbw_registered"] in md
    bw = bandwidths_gbps(first.op, first.size_bytes, n, 80.0)[1]
    assert f"{bw:.1f}" in md or f"{bw:,.1f}" in md or f"{bw:.0f}" in md
    assert catalog(lang)["node.registered.capture_failed"] in md and "<b>refused</b>" not in md


def test_a_result_event_carries_the_registered_fields_and_when_it_finished():
    import time

    from envcheck.node.collective_worker import _measured_event

    m = Measured("all_gather", MIB, MIB // 8, (0, 1), reg_samples_us=(9.9,), reg_calls=20, reg_captures=3, reg_wrong=0)
    e = _measured_event(m, "sweep", time.monotonic() - 2.0)
    assert list(e["reg_samples_us"]) == [9.9] and e["reg_calls"] == 20 and e["reg_wrong"] == 0 and e["at_s"] >= 2.0
    assert "at_s" not in _measured_event(m, "narrow")
