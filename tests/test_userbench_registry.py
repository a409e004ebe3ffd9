"""A user's declared op is an OpSpec like the built-in ones: it travels in the report
(``Bench.ops``) and every layer reads the same spec methods for it."""

from __future__ import annotations

import dataclasses

import pytest

from envcheck.analysis import analyse
from envcheck.analysis.results import case_results
from envcheck.analysis.tolerance import tolerance
from envcheck.model import Accuracy, Case, ReportError, Timing, dumps, loads
from envcheck.ops import OPS, Cost, Declared, declared_op, lookup
from tests import factories

SHAPE = (4096, 1024)


def wsum_op(**over: object) -> object:
    declared = Declared(impls=("torch", "mine"), baseline="torch",
                        costs=(Cost(SHAPE, "fp16", bytes=2 * 4096 * 1024 * 2 + 4096 * 2, flops=7 * 4096 * 1024,
                                    accumulation=1024),),
                        roundings=8)
    return declared_op(str(over.get("name", "softmax_wsum")), False, declared)


def user_cases() -> tuple[Case, ...]:
    t = Timing.from_samples("cuda_graph", [20.0, 21.0, 22.0])
    return (Case("softmax_wsum", "torch", "fp16", "fp16", SHAPE, gpu=t, accuracy=Accuracy(2e-4, 1e-3, 1e-3, 0, 4096)),
            Case("softmax_wsum", "mine", "fp16", "fp16", SHAPE, gpu=Timing.from_samples("cuda_graph", [10.0] * 3),
                 accuracy=Accuracy(2.1e-4, 1e-3, 1e-3, 0, 4096)))


def user_report():
    base = factories.report()
    bench = dataclasses.replace(base.benches[0], ops=(wsum_op(),), cases=base.benches[0].cases + user_cases())
    return dataclasses.replace(base, benches=(bench,))


def test_a_declared_op_round_trips_through_the_report_and_is_analysed_with_its_declared_cost():
    report = loads(dumps(user_report()))
    bench = report.benches[0]
    assert bench.spec("softmax_wsum") == wsum_op()
    results = [r for r in analyse(report).bench.results if r.case.op == "softmax_wsum"]
    mine = next(r for r in results if r.case.impl == "mine")
    assert mine.traffic.bytes == 2 * 4096 * 1024 * 2 + 4096 * 2  # the declared bytes, not a formula
    assert mine.gbps == pytest.approx(mine.traffic.bytes / 10e-6 / 1e9)
    assert mine.speedup == pytest.approx(21.0 / 10.0)  # against the declared baseline
    assert mine.status == "pass"


def test_the_same_analysis_function_judges_built_in_and_declared_cases():
    bench = user_report().benches[0]
    from envcheck.analysis.ceilings import ceilings
    results = case_results(bench, ceilings(factories.environment(), bench))
    ops = {r.case.op for r in results}
    assert "softmax_wsum" in ops and "matmul" in ops
    # The bound of the declared op comes from its declared accumulation and roundings.
    r = next(r for r in results if r.case.op == "softmax_wsum")
    assert r.tolerance == tolerance(wsum_op(), "fp16", "fp16", SHAPE, elements=r.case.accuracy.elements)
    tol = r.tolerance
    assert tol.rel_l2 > tolerance(wsum_op(), "fp32", "fp32", SHAPE).rel_l2


def test_a_report_naming_an_undeclared_op_implementation_or_shape_is_refused_at_load():
    import json

    good = json.loads(dumps(user_report()))
    loads(json.dumps(good))
    cases = good["benches"][0]["cases"]
    mine = next(i for i, c in enumerate(cases) if c["impl"] == "mine")
    edits = (lambda d: d["benches"][0].pop("ops"),
             lambda d: d["benches"][0]["cases"][mine].update(impl="other"),
             lambda d: d["benches"][0]["cases"][mine].update(shape=[8, 8]),
             lambda d: d["benches"][0]["ops"][0].update(name="matmul"))
    for edit in edits:
        bad = json.loads(json.dumps(good))
        edit(bad)
        with pytest.raises(ReportError):
            loads(json.dumps(bad))


def test_bench_spec_refuses_a_case_of_an_undeclared_op():
    bench = user_report().benches[0]
    with pytest.raises(ValueError, match="softmax_wsum"):
        dataclasses.replace(bench, ops=())


@pytest.mark.parametrize("name", ["matmul", "", "has space", "x" * 65, "é"])
def test_a_declared_op_cannot_take_a_built_in_or_unsafe_name(name):
    with pytest.raises(ValueError):
        wsum_op(name=name)


def test_lookup_finds_built_in_ops_first_and_names_every_known_op_when_missing():
    assert lookup("matmul", (wsum_op(),)) is OPS["matmul"]
    assert lookup("softmax_wsum", (wsum_op(),)) == wsum_op()
    with pytest.raises(ValueError, match="softmax_wsum"):
        lookup("nope", (wsum_op(),))


@pytest.mark.parametrize("bad", [
    dict(impls=("torch", "torch")), dict(baseline="nobody"), dict(costs=()), dict(roundings=-1),
])
def test_a_declaration_is_validated_where_it_is_made(bad):
    fields = dict(impls=("torch", "mine"), baseline="torch", costs=(Cost(SHAPE, "fp16", 1, 1),), roundings=0)
    with pytest.raises(ValueError):
        Declared(**{**fields, **bad})


@pytest.mark.parametrize("bad", [dict(shape=()), dict(dtype="fp8"), dict(bytes=0), dict(flops=-1),
                                 dict(accumulation=0), dict(shape=(4, True))])
def test_a_cost_is_validated_where_it_is_made(bad):
    with pytest.raises(ValueError):
        Cost(**{**dict(shape=SHAPE, dtype="fp16", bytes=1, flops=1), **bad})


def test_a_declared_baseline_not_named_torch_is_what_speedups_and_the_summary_compare_with():
    declared = Declared(impls=("fallback", "mine"), baseline="fallback",
                        costs=(Cost(SHAPE, "fp16", bytes=1 << 20, flops=0, accumulation=1024),), roundings=8)
    spec = declared_op("wsum2", False, declared)
    acc = Accuracy(2e-4, 1e-3, 1e-3, 0, 4096)
    cases = (Case("wsum2", "fallback", "fp16", "fp16", SHAPE, gpu=Timing.from_samples("cuda_graph", [30.0] * 3),
                  accuracy=acc),
             Case("wsum2", "mine", "fp16", "fp16", SHAPE, gpu=Timing.from_samples("cuda_graph", [10.0] * 3),
                  accuracy=Accuracy(6e-4, 1e-3, 1e-3, 0, 4096)))
    base = factories.report()
    bench = dataclasses.replace(base.benches[0], ops=(spec,), cases=cases)
    a = analyse(dataclasses.replace(base, benches=(bench,))).bench
    mine = next(r for r in a.results if r.case.impl == "mine")
    assert mine.speedup == pytest.approx(3.0)
    # 3x fallback's error, shown beside the verdict (issue 48: information, within the error model's bound).
    assert mine.verdict.relative == pytest.approx(3.0) and mine.status == "pass"
    assert [t.impl for t in a.summary.by_op_impl] == ["mine"]
