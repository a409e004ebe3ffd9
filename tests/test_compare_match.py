"""Case pairing and the reasons a pair is not compared, on the committed H200 run."""

from __future__ import annotations

import dataclasses

import compare_fixtures as fx

from envcheck.analysis import CaseResult, analyse
from envcheck.compare import match
from envcheck.model import Case, Failure, MonitorSummary, Report, Timing


def results(r: Report) -> tuple[CaseResult, ...]:
    return analyse(r).bench.results


def edited(r: Report, i: int, **changes: object) -> Report:
    cases = list(r.benches[0].cases)
    cases[i] = dataclasses.replace(cases[i], **changes)
    return fx.with_cases(r, tuple(cases))


def test_pairs_every_case_of_identical_runs():
    rs = results(fx.h200_after())
    m = match.match(rs, rs)
    assert len(m.pairs) == len(rs) == 208
    assert all(x.key == y.key for x, y in m.pairs)
    assert m.only_base == m.only_other == m.precision_pairs == ()


def test_one_sided_cases_are_listed_per_side_and_an_empty_side_pairs_nothing():
    r = fx.h200_after()
    a = results(r)
    b = results(fx.with_cases(r, tuple(c for c in r.benches[0].cases if c.op != "relu")))
    m = match.match(a, b)
    assert {x.case.op for x in m.only_base} == {"relu"} and len(m.only_base) == 40
    assert m.only_other == () and len(m.pairs) == len(b)
    none = match.match((), b)
    assert none.pairs == () and len(none.only_other) == len(b)


def test_precision_mismatch_is_paired_but_kept_apart():
    r = fx.h200_after()
    ieee = [c for c in r.benches[0].cases if c.precision == "fp32" and c.op == "matmul"]
    a = results(fx.with_cases(r, tuple(c for c in r.benches[0].cases if c.precision != "tf32")))
    b = results(fx.with_cases(r, tuple(dataclasses.replace(c, precision="tf32") if c in ieee else c
                                       for c in r.benches[0].cases if c.precision != "tf32")))
    m = match.match(a, b)
    assert len(m.precision_pairs) == len(ieee) > 0
    assert m.only_base == m.only_other == ()
    for x, y in m.precision_pairs:
        assert (x.case.precision, y.case.precision) == ("fp32", "tf32")
        assert match.Note(match.PRECISION_DIFFERS, {"baseline": "fp32", "other": "tf32"}) in match.comparability(x, y)


def _capped(c: Case, *reasons: str) -> Case:
    return dataclasses.replace(c, monitor=MonitorSummary(10, throttle_reasons=reasons))


def test_both_sides_at_the_power_cap_still_compare_but_one_side_or_heat_does_not():
    r = fx.h200_after()
    i = next(k for k, c in enumerate(r.benches[0].cases) if c.op == "vector_add")
    c = r.benches[0].cases[i]
    plain = results(r)[i]
    capped = results(edited(r, i, monitor=_capped(c, "sw_power_cap").monitor))[i]
    hot = results(edited(r, i, monitor=_capped(c, "sw_power_cap", "hw_thermal_slowdown").monitor))[i]
    assert match.comparability(capped, capped) == []
    assert match.comparability(plain, capped) == [match.Note(match.THROTTLED,
                                                             {"side": "other", "reasons": ("sw_power_cap",)})]
    assert [n.params["side"] for n in match.comparability(capped, hot)] == ["baseline", "other"]


def test_gpu_time_preferred_then_launch_and_methods_never_mixed():
    r = fx.h200_after()
    c = r.benches[0].cases[0]
    base = results(r)[0]
    which, ta, _, reasons = match.timings(base, base)
    assert which == "gpu" and ta is c.gpu and reasons == []
    no_graph = results(edited(r, 0, gpu=None))[0]
    which, ta, _, reasons = match.timings(no_graph, base)
    assert which == "launch" and ta is c.launch and reasons == []
    host = results(edited(r, 0, gpu=None, launch=Timing.from_samples("host_clock", [5.0] * 10)))[0]
    assert match.comparability(host, no_graph) == [
        match.Note(match.METHODS_DIFFER, {"baseline": "host_clock", "other": "cuda_events"})]


def test_a_failed_case_is_not_compared_and_says_where_it_failed():
    r = fx.h200_after()
    broken = results(edited(r, 0, gpu=None, launch=None, failure=Failure("compile", "CompilationError: out of resources")))
    (reason,) = match.comparability(results(r)[0], broken[0])
    assert reason.key == match.FAILED
    assert reason.params == {"side": "other", "stage": "compile", "detail": "CompilationError: out of resources"}


