"""Case pairing and the reasons a pair is not compared."""

from __future__ import annotations

import dataclasses

import factories

from envcheck.compare import match
from envcheck.model import MonitorSummary, Timing


def bench():
    return factories.bench()


def test_pairs_every_case_of_identical_runs():
    b = bench()
    m = match.match(b, factories.bench())
    assert len(m.pairs) == len(b.cases)
    assert all(x.key == y.key for x, y in m.pairs)
    assert m.only_base == m.only_other == m.precision_pairs == ()


def test_one_sided_cases_are_listed_per_side():
    a = bench()
    b = dataclasses.replace(a, cases=tuple(c for c in a.cases if c.op != "relu"))
    m = match.match(a, b)
    assert {c.op for c in m.only_base} == {"relu"}
    assert m.only_other == ()
    assert len(m.pairs) == len(b.cases)
    none = match.match(None, b)
    assert none.pairs == () and len(none.only_other) == len(b.cases)


def test_precision_mismatch_is_paired_but_kept_apart():
    full = bench()
    a = dataclasses.replace(full, cases=tuple(c for c in full.cases if c.precision != "tf32"))
    b = dataclasses.replace(a, cases=tuple(
        dataclasses.replace(c, precision="tf32", tf32=True) if c.op == "matmul" and c.dtype == "fp32" else c
        for c in a.cases))
    m = match.match(a, b)
    assert len(m.precision_pairs) == 8  # 4 sizes x (torch, triton)
    assert m.only_base == m.only_other == ()
    for x, y in m.precision_pairs:
        assert (x.op, x.impl, x.dtype, x.shape) == (y.op, y.impl, y.dtype, y.shape)
        assert (x.precision, y.precision) == ("fp32", "tf32")
        reasons = match.comparability(x, y)
        assert "precision differs (fp32 vs tf32)" in reasons
        assert "TF32 differs (baseline off, other on)" in reasons


def test_both_sides_at_the_power_cap_still_compare_but_one_side_does_not():
    c = factories.bench().cases[0]
    capped = dataclasses.replace(c, flags=("throttled",), monitor=MonitorSummary(10, throttle_reasons=("sw_power_cap",)))
    assert match.comparability(capped, capped) == []
    assert match.comparability(c, capped) == ["other throttled (sw_power_cap)"]
    hot = dataclasses.replace(c, flags=("throttled",),
                              monitor=MonitorSummary(10, throttle_reasons=("sw_power_cap", "hw_thermal_slowdown")))
    assert match.comparability(capped, hot) == ["baseline throttled (sw_power_cap)",
                                                "other throttled (sw_power_cap, hw_thermal_slowdown)"]


def test_throttled_side_is_named_with_its_reasons():
    c = bench().cases[0]
    hot = dataclasses.replace(c, monitor=MonitorSummary(10, throttle_reasons=("sw_thermal_slowdown",)))
    reasons = match.comparability(c, hot)
    assert reasons == ["other throttled (sw_thermal_slowdown)"]
    flagged = dataclasses.replace(c, flags=("throttled",), monitor=None)
    assert match.comparability(flagged, c) == ["baseline throttled (throttled)"]


def test_gpu_time_preferred_then_launch_and_methods_never_mixed():
    c = bench().cases[0]
    which, ta, tb, reasons = match.timings(c, c)
    assert which == "gpu" and ta is c.gpu and reasons == []
    no_graph = dataclasses.replace(c, gpu=None)
    which, ta, tb, reasons = match.timings(no_graph, c)
    assert which == "launch" and ta is c.launch and reasons == []
    host = dataclasses.replace(c, gpu=None, launch=Timing.from_samples("host_clock", [5.0] * 10))
    assert match.comparability(host, no_graph) == ["timing methods differ (host_clock vs cuda_events)"]
    nothing = dataclasses.replace(c, gpu=None, launch=None, status="pass")
    assert "no common timing" in match.comparability(nothing, c)[0]


def test_error_status_is_not_compared_and_says_why():
    c = bench().cases[0]
    broken = dataclasses.replace(c, status="error", gpu=None, launch=None, message="CompilationError: out of resources")
    assert match.comparability(c, broken) == ["other could not run: CompilationError: out of resources"]
