"""envcheck diff as data: honest verdicts on a real negative control, power on planted slowdowns,
numbers from the analysis, machines told apart, the JSON document."""

from __future__ import annotations

import dataclasses
import json
import math
import random

import compare_fixtures as fx
import pytest

from envcheck import model
from envcheck.analysis import analyse
from envcheck.compare import export, match, stats
from envcheck.compare.diff import Comparison, diff, diff_analysed
from envcheck.model import Accuracy, Check, Report


def one(a: Report, b: Report, **kw) -> Comparison:
    return diff([("a.json", a), ("b.json", b)], **kw).comparisons[0]


@pytest.fixture(scope="module")
def negative_control() -> Comparison:
    return one(fx.h200_before(), fx.h200_after())


def significant(rows) -> list:
    return [c for c in rows if c.verdict in ("slower", "faster")]


# --------------------------------------------------------------------------- false alarms


def test_a_rerun_on_another_gpu_is_not_judged_without_repeats(negative_control):
    """Same PyTorch on both sides, another physical H200: no shipped floor holds across two GPUs and the
    pair may not measure its own noise, so every compared row keeps its ratio and no verdict."""
    torch = [c for c in negative_control.cases if c.impl == "torch"]
    assert len(torch) == 84 and not significant(negative_control.cases)
    assert all(c.verdict == "not judged" and c.low is None and c.floor is None for c in negative_control.compared)
    assert negative_control.overall.not_judged == len(negative_control.compared) and negative_control.tested == 0


def test_a_rerun_on_one_gpu_calls_at_most_five_percent_of_torch_rows_significant():
    """Back to back on one H200, judged with the shipped floors: noise only, at most 5% called."""
    cmp = one(*fx.h200_rerun())
    torch = [c for c in cmp.compared if c.impl == "torch"]
    assert len(torch) >= 80 and len(significant(torch)) <= 0.05 * len(torch)
    assert all(c.floor is not None and c.floor.source == "shipped" for c in torch)


def test_the_negative_control_is_one_within_run_intervals_fail(negative_control):
    """The same rows judged on their samples alone: the false alarms this design removes."""
    before = {c.key: c for c in fx.h200_before().benches[0].cases}
    after = {c.key: c for c in fx.h200_after().benches[0].cases}
    naive = [stats.within_interval(before[c.key].gpu.samples_us, after[c.key].gpu.samples_us)
             for c in negative_control.cases if c.impl == "torch"]
    assert sum(stats.verdict(iv) in ("slower", "faster") for iv in naive) >= 8


def test_a_rerun_on_one_gpu_has_a_torch_geomean_containing_one():
    from envcheck.compare.diff import summarise

    cmp = one(*fx.h200_rerun())
    torch = summarise("torch", [c for c in cmp.cases if c.impl == "torch"], 0.02, 0.95)
    assert torch.low < 1.0 < torch.high and torch.verdict == "same" and torch.clusters > 10


def test_identical_runs_are_the_same_everywhere():
    r = fx.h200_after()
    cmp = one(r, r)
    assert cmp.env == () and cmp.checks == () and cmp.same_machine is True
    assert cmp.cases and all(c.verdict == "same" and c.ratio == 1.0 and c.low <= 1.0 <= c.high for c in cmp.cases)
    assert cmp.overall.geomean == pytest.approx(1.0) and cmp.overall.count == 208
    assert cmp.regressions(0.1) == []


# --------------------------------------------------------------------------- finding real changes


def _detected(base: Report, other: Report, planted: set) -> float:
    """The share of the ``planted`` rows a diff calls slower (the pair: one H200 back to back, its shipped floors)."""
    cmp = one(base, other)
    rows = [c for c in cmp.cases if c.key in planted]
    assert len(rows) == len(planted)
    return sum(c.verdict == "slower" for c in rows) / len(rows)


def test_planted_ten_percent_slowdown_of_triton_rows_after_a_triton_change_is_found():
    """A quarter of the element-wise and reduction Triton rows 10% slower, Triton upgraded, against real
    run-to-run noise (a rerun on one H200)."""
    base, after = fx.h200_rerun()
    pool = fx.keys(after, impl="triton", not_op="matmul")
    rates = []
    for seed in range(3):
        planted = set(random.Random(seed).sample(pool, len(pool) // 4))
        rates.append(_detected(base, fx.with_version(fx.scaled(after, 1.10, planted), "triton", "3.7.0"), planted))
    assert min(rates) >= 0.8 and sum(rates) / len(rates) >= 0.9


@pytest.mark.parametrize(("share", "least"), [(10, 0.75), (4, 0.75)])
def test_planted_slowdown_with_nothing_changed_is_found_in_most_rows(share, least):
    """One PyTorch row in ten (in four) 10% slower with nothing recorded as changed: most are found."""
    base, after = fx.h200_rerun()
    pool = fx.keys(after, impl="torch")
    planted = set(random.Random(share).sample(pool, len(pool) // share))
    assert _detected(base, fx.scaled(after, 1.10, planted), planted) >= least


def test_one_op_slower_everywhere_with_nothing_changed_stands_out_against_the_other_ops():
    """Every relu row 30% slower with nothing recorded as changed: all called, the rest as noise allows."""
    base, after = fx.h200_rerun()
    relu = set(fx.keys(after, op="relu"))
    cmp = one(base, fx.scaled(after, 1.3, relu))
    assert all(c.verdict == "slower" for c in cmp.cases if c.key in relu)
    assert next(g for g in cmp.ops if g.name == "relu").verdict == "slower"
    others = [c for c in cmp.cases if c.key not in relu and c.impl == "torch"]
    assert len(significant(others)) <= 0.05 * len(others)


def test_ten_percent_slowdown_everywhere_is_slower_everywhere_and_a_regression_over_5_not_20():
    r = fx.h200_after()
    d = diff([("a.json", r), ("b.json", fx.scaled(r, 1.1))])
    cmp = d.comparisons[0]
    assert {c.verdict for c in cmp.cases} == {"slower"}
    assert cmp.overall.verdict == "slower" and cmp.overall.geomean == pytest.approx(1.1, rel=0.005)
    assert all(g.geomean == pytest.approx(1.1, rel=0.005) and g.verdict == "slower" for g in cmp.ops)
    assert len(d.regressions(5)) == 208 and d.regressions(20) == []


# --------------------------------------------------------------------------- one source of truth


def test_per_side_numbers_are_the_analysis_numbers():
    a, b = fx.h100(), fx.h200_after()
    cmp = one(a, b)
    ra, rb = analyse(a).bench.by_key, analyse(b).bench.by_key
    for c in cmp.compared:
        x, y = ra[c.key], rb[c.key]
        assert (c.base_gbps, c.other_gbps, c.base_tflops, c.other_tflops) == (x.gbps, y.gbps, x.tflops, y.tflops)
        assert (c.base_pct, c.other_pct) == (x.pct_theoretical, y.pct_theoretical)
        assert (c.base_pct_measured, c.other_pct_measured) == (x.pct_measured, y.pct_measured)
        assert (c.base_flags, c.other_flags) == (x.flags, y.flags)
        assert c.category == x.category and c.base_us == x.time.median_us
    bw = next(r for r in cmp.ceilings if (r.name, r.kind) == ("bandwidth", "theoretical"))
    ca = analyse(a).bench.ceilings.get("bandwidth", "theoretical")
    assert (bw.base, bw.base_source) == (ca.value, ca.source)
    assert (bw.base, bw.other) == (pytest.approx(3352.3, abs=0.1), pytest.approx(4814.3, abs=0.1))


def test_h100_to_h200_shows_each_ratio_and_judges_none_without_repeats():
    cmp = one(fx.h100(), fx.h200_after())
    assert not cmp.same_gpu and cmp.same_machine is False and not cmp.floors
    assert cmp.compared and all(c.verdict == "not judged" and c.ratio is not None for c in cmp.compared)
    assert cmp.overall.verdict == "none" and cmp.overall.not_judged == len(cmp.compared)
    assert {c.title: (c.before, c.after) for c in cmp.env}["GPU 0 model"] == ("NVIDIA H100 80GB HBM3", "NVIDIA H200")


def test_precision_mismatch_is_marked_not_compared():
    r = fx.h200_after()
    cases = tuple(c for c in r.benches[0].cases if c.precision != "tf32")
    a = fx.with_cases(r, cases)
    b = fx.with_cases(r, tuple(dataclasses.replace(c, precision="tf32") if c.op == "matmul" and c.dtype == "fp32"
                               else c for c in cases))
    nc = one(a, b).not_comparable
    assert nc and all(c.ratio is None and c.other_precision == "tf32" for c in nc)
    assert all(match.PRECISION_DIFFERS in {n.key for n in c.reasons} for c in nc)
    assert "fp32/tf32" in nc[0].name


def test_numeric_error_changes_follow_the_analysis_verdicts():
    r = fx.h200_after()
    cases = list(r.benches[0].cases)
    i = next(k for k, c in enumerate(cases) if c.op == "matmul" and c.precision == "bf16" and c.accuracy.rel_l2 > 0)
    j = next(k for k, c in enumerate(cases) if c.op == "matmul" and c.precision == "fp16")
    cases[i] = dataclasses.replace(cases[i], accuracy=Accuracy(cases[i].accuracy.rel_l2 * 100, 1.0))
    cases[j] = dataclasses.replace(cases[j], accuracy=Accuracy(0.5, 3.0))
    kinds = {c.key: c.numeric.kind for c in one(r, fx.with_cases(r, tuple(cases))).numeric_changes}
    assert kinds[cases[j].key] == "pass->fail"
    assert kinds[cases[i].key] in ("grew", "pass->fail")


# --------------------------------------------------------------------------- machines


def test_another_physical_gpu_is_an_environment_difference(negative_control):
    (change,) = negative_control.env
    assert change.key == "gpu.uuid"
    assert (change.before, change.after) == ("GPU-66f4c21c-1fa5-0d31-b1cd-73cbb10a45d2",
                                             "GPU-864be31b-1c83-bb06-459b-885fba99fd31")
    assert negative_control.same_machine is False and negative_control.same_gpu


def test_across_machines_a_check_is_different_never_fixed():
    a = fx.h200_before()
    failing = Check("gpu.throttle.0", "fail", "GPU clocks not throttled", "GPU 0 is throttled", fix="check cooling")
    broken = dataclasses.replace(a, checks=tuple(failing if c.id == failing.id else c for c in a.checks))
    other_gpu = dataclasses.replace(fx.h200_after(), checks=a.checks)
    assert [(c.id, c.kind) for c in one(broken, other_gpu).checks] == [("gpu.throttle.0", "different")]
    assert [(c.id, c.kind) for c in one(other_gpu, broken).checks] == [("gpu.throttle.0", "different")]
    same_gpu = fx.with_gpu_fact(other_gpu, "uuid", "GPU-66f4c21c-1fa5-0d31-b1cd-73cbb10a45d2")
    assert [(c.id, c.kind) for c in one(broken, same_gpu).checks] == [("gpu.throttle.0", "fixed")]
    assert [(c.id, c.kind) for c in one(same_gpu, broken).checks] == [("gpu.throttle.0", "new_fail")]


def test_serials_tell_machines_apart_where_there_is_no_uuid():
    def serial(r: Report, s: str) -> Report:
        env = r.environment
        g = env.gpus[0]
        facts = {k: v for k, v in g.facts.items() if k != "uuid"}
        facts["serial"] = model.known(s)
        return dataclasses.replace(r, environment=dataclasses.replace(env, gpus=(dataclasses.replace(g, facts=facts),)))

    a = fx.h200_after()
    assert one(serial(a, "1650224000001"), serial(a, "1650224000002")).same_machine is False
    assert one(serial(a, "1650224000001"), serial(a, "1650224000001")).same_machine is True


# --------------------------------------------------------------------------- ordering, JSON, round trips


def test_reports_compare_the_same_after_a_json_round_trip():
    a, b = fx.h200_before(), fx.scaled(fx.h200_after(), 1.05, fx.keys(fx.h200_after(), op="relu"))
    direct = one(a, b)
    loaded = one(model.loads(model.dumps(a)), model.loads(model.dumps(b)))
    assert loaded == direct


def test_json_document_is_versioned_and_carries_the_verdicts(negative_control):
    d = diff_analysed([("before.json", analyse(fx.h200_before())), ("after.json", analyse(fx.h200_after()))])
    doc = json.loads(export.to_json(d, regression_pct=5))
    assert (doc["format"], doc["version"], doc["regression_pct"]) == ("envcheck-diff", 2, 5)
    assert [r["gpus"][0]["uuid"][:12] for r in doc["reports"]] == ["GPU-66f4c21c", "GPU-864be31b"]
    (c,) = doc["comparisons"]
    assert c["same_machine"] is False and c["environment"][0]["key"] == "gpu.uuid"
    assert len(c["cases"]) == 208 and c["overall"]["not_judged"] == 208 and "controls" not in c
    row = c["cases"][0]
    assert row["shape"] == [1024] and row["verdict"] == "not judged" and row["floor"] is None
    assert row["reasons"] == [{"key": "diff.not_judged.no_floor", "params": {}}] and row["ratio"] > 0
    d = diff_analysed([(f"r{i}.json", analyse(r)) for i, r in enumerate(fx.h200_rerun())])
    (c,) = json.loads(export.to_json(d, regression_pct=5))["comparisons"]
    row = c["cases"][0]
    assert row["floor"]["source"] == "shipped" and row["low"] <= row["ratio"] <= row["high"]
    assert {(x["op"], x["impl"], tuple(x["shape"])) for x in c["regressions"]} == {
        (x.op, x.impl, x.shape) for x in d.comparisons[0].regressions(5)}


def test_fewer_than_two_reports_is_an_error():
    with pytest.raises(ValueError):
        diff([("a", fx.h200_after())])


def test_confidence_reaches_the_per_case_intervals():
    a, b = fx.h200_rerun()
    narrow = one(a, b, confidence=0.5).cases[0]
    wide = one(a, b, confidence=0.99).cases[0]
    assert math.log(narrow.high / narrow.low) < math.log(wide.high / wide.low)
