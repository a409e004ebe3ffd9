"""envcheck diff as data and documents: verdicts, comparability, environment and health changes, speed."""

from __future__ import annotations

import dataclasses
import random
import time

import factories
import pytest

from envcheck import model
from envcheck.compare.diff import diff
from envcheck.model import Case, Check, MonitorSummary, NumericError, Report, Timing
from envcheck.render import documents as document


def one(a: Report, b: Report):
    return diff([("a.json", a), ("b.json", b)]).comparisons[0]


def h100() -> Report:
    """An H100 SXM report: its own memory clock, bus width and bandwidth ceiling."""
    bw = 2 * 2619 * 5120 / 8 / 1000
    env = factories.environment(gpu_name="NVIDIA H100 80GB HBM3", mem_clock=2619, bus=5120, memory_bytes=85520809984)
    return Report(tool_version="0.1.0", created="2026-11-22T10:00:00Z", host="h100-box", kind="run",
                  environment=env, checks=factories.report().checks,
                  bench=factories.bench(gpu_name="NVIDIA H100 80GB HBM3", bandwidth_gbps=bw, scale=1.3))


def test_identical_runs_are_the_same_everywhere():
    cmp = one(factories.report(), factories.report())
    assert cmp.env == () and cmp.checks == ()
    assert cmp.cases and all(c.verdict == "same" for c in cmp.cases)
    assert all(c.ratio == 1.0 and c.low <= 1.0 <= c.high for c in cmp.cases)
    assert cmp.overall.geomean == pytest.approx(1.0) and cmp.overall.count == len(cmp.cases)
    assert cmp.regressions(0.1) == []


def test_ten_percent_slowdown_is_slower_everywhere_and_a_regression_over_5_not_20():
    base, slow = factories.report(), factories.report(scale=1.1)
    d = diff([("a.json", base), ("b.json", slow)])
    cmp = d.comparisons[0]
    assert {c.verdict for c in cmp.cases} == {"slower"}
    assert cmp.overall.verdict == "slower"
    assert cmp.overall.geomean == pytest.approx(1.1, rel=0.01)
    assert all(g.geomean == pytest.approx(1.1, rel=0.01) for g in cmp.ops)
    assert [g.name for g in cmp.ops] == ["vector_add", "relu", "matmul"]
    assert len(d.regressions(5)) == len(cmp.cases)
    assert d.regressions(20) == []


def test_no_overlap_lists_both_sides_and_compares_nothing():
    a = factories.report()
    renamed = tuple(dataclasses.replace(c, op=c.op + "_v2") for c in a.bench.cases)
    b = dataclasses.replace(a, bench=dataclasses.replace(a.bench, cases=renamed))
    cmp = one(a, b)
    assert cmp.cases == () and cmp.ops == ()
    assert len(cmp.only_base) == len(cmp.only_other) == len(a.bench.cases)
    assert cmp.overall.geomean is None and cmp.overall.verdict == "none"
    assert "No benchmark cases to compare" in document.render_diff(diff([("a", a), ("b", b)]), "md")


def test_one_sided_cases_are_listed_and_the_rest_compared():
    a = factories.report()
    b = dataclasses.replace(a, bench=dataclasses.replace(a.bench, cases=a.bench.cases[2:]))
    cmp = one(a, b)
    assert [(r.op, r.shape) for r in cmp.only_base] == [(c.op, c.shape_label) for c in a.bench.cases[:2]]
    assert len(cmp.cases) == len(a.bench.cases) - 2


def _with_samples(c: Case, xs: list[float]) -> Case:
    return dataclasses.replace(c, gpu=Timing.from_samples("cuda_graph", xs))


def test_noisy_five_percent_change_is_same_within_noise():
    a = factories.report()
    rng = random.Random(11)
    target = a.bench.cases[10]
    noisy_a = _with_samples(target, [10 * (1 + rng.gauss(0, 0.3)) for _ in range(12)])
    noisy_b = _with_samples(target, [10.5 * (1 + rng.gauss(0, 0.3)) for _ in range(12)])
    ra = dataclasses.replace(a, bench=dataclasses.replace(a.bench, cases=(noisy_a,)))
    rb = dataclasses.replace(a, bench=dataclasses.replace(a.bench, cases=(noisy_b,)))
    (c,) = one(ra, rb).cases
    assert c.verdict == "same"
    assert c.low < 1.0 < c.high


def test_precision_mismatch_is_marked_not_compared():
    full = factories.report()
    cases = tuple(c for c in full.bench.cases if c.precision != "tf32")
    a = dataclasses.replace(full, bench=dataclasses.replace(full.bench, cases=cases))
    tf32 = tuple(dataclasses.replace(c, precision="tf32", tf32=True) if c.op == "matmul" and c.dtype == "fp32" else c
                 for c in cases)
    b = dataclasses.replace(full, bench=dataclasses.replace(full.bench, cases=tf32))
    cmp = one(a, b)
    nc = cmp.not_comparable
    assert len(nc) == 8 and all(c.ratio is None for c in nc)
    assert all("precision differs (fp32 vs tf32)" in c.reasons for c in nc)
    assert "fp32/tf32" in nc[0].name
    md = document.render_diff(diff([("a", a), ("b", b)]), "md")
    assert "precision differs (fp32 vs tf32)" in md


def test_throttled_pair_is_marked_with_the_reason():
    a = factories.report()
    cases = list(a.bench.cases)
    cases[0] = dataclasses.replace(cases[0], flags=("throttled",),
                                   monitor=MonitorSummary(20, throttle_reasons=("sw_power_cap",)))
    b = dataclasses.replace(a, bench=dataclasses.replace(a.bench, cases=tuple(cases)))
    cmp = one(a, b)
    first = cmp.cases[0]
    assert first.verdict == "not comparable" and first.reasons == ("other throttled (sw_power_cap)",)
    assert cmp.overall.not_comparable == 1 and cmp.overall.count == len(cases) - 1


def test_h100_vs_h200_lists_gpu_differences_and_percent_of_own_ceilings():
    h200 = factories.report()
    cmp = one(h200, h100())
    changes = {c.title: (c.before, c.after) for c in cmp.env}
    assert changes["GPU 0 model"] == ("NVIDIA H200", "NVIDIA H100 80GB HBM3")
    assert changes["GPU 0 theoretical bandwidth"] == ("4814.3 GB/s", "3352.3 GB/s")  # 2 x clock x bus / 8
    assert changes["GPU 0 memory"] == ("140.4 GiB", "79.6 GiB")
    assert not cmp.same_gpu
    big = next(c for c in cmp.cases if c.op == "vector_add" and c.impl == "torch" and c.shape == str(1 << 28))
    h100_case = next(c for c in h100().bench.cases if c.key == ("vector_add", "torch", "fp32", "fp32", (1 << 28,)))
    assert big.other_pct == pytest.approx(h100_case.pct_theoretical)
    assert big.base_pct != pytest.approx(big.other_pct)
    mm = next(c for c in cmp.cases if c.op == "matmul" and c.dtype == "bf16" and c.impl == "torch")
    assert mm.other_pct == pytest.approx(100 * mm.other_tflops / 989.4)
    bw = next(r for r in cmp.ceilings if (r.name, r.kind) == ("bandwidth", "theoretical"))
    assert (bw.base, bw.other) == (pytest.approx(4814.4), pytest.approx(3352.32))  # each run's own ceiling
    html = document.render_diff(diff([("h200.json", h200), ("h100.json", h100())]), "html")
    assert "Different GPUs" in html and "<svg" in html


def test_numeric_error_changes_are_reported():
    a = factories.report()
    cases = list(a.bench.cases)
    i = next(k for k, c in enumerate(cases) if c.op == "matmul" and c.precision == "bf16")
    j = next(k for k, c in enumerate(cases) if c.op == "matmul" and c.precision == "fp16")
    e = cases[i].error
    cases[i] = dataclasses.replace(cases[i], error=dataclasses.replace(e, rel_l2=e.rel_l2 * 100))
    cases[j] = dataclasses.replace(cases[j], status="fail",
                                   error=NumericError(0.5, 3.0, cases[j].error.tolerance, "fp16", False))
    b = dataclasses.replace(a, bench=dataclasses.replace(a.bench, cases=tuple(cases)))
    kinds = {c.name: c.numeric.kind for c in one(a, b).numeric_changes}
    assert kinds == {cases[i].op + " torch bf16 512x512x512": "grew", cases[j].op + " torch fp16 512x512x512": "pass->fail"}
    md = document.render_diff(diff([("a", a), ("b", b)]), "md")
    assert "error grew 100×" in md and "now over tolerance" in md


def test_health_changes_put_new_failures_first_and_list_fixes():
    a = factories.report()
    checks = (
        Check("gpu.throttle", "fail", "GPU clocks", "GPU 0 is throttled: hw_slowdown", fix="check cooling"),
        Check("gpu.processes", "pass", "Other processes on the GPU", "no other process"),
        Check("triton.smoke", "pass", "Triton smoke kernel", "compiled in 0.41 s and ran correctly"),
    )
    b = dataclasses.replace(a, checks=checks)
    ch = one(a, b).checks
    assert [(c.id, c.kind, c.before, c.after) for c in ch] == [
        ("gpu.throttle", "new_fail", "pass", "fail"), ("gpu.processes", "fixed", "warn", "pass")]
    assert ch[0].fix == "check cooling"


def test_probe_reports_without_bench_still_compare_environments():
    a = dataclasses.replace(factories.report(), bench=None, kind="probe")
    b = dataclasses.replace(factories.report(driver="575.57", torch="2.10.0+cu128"), bench=None, kind="probe")
    cmp = one(a, b)
    assert cmp.cases == ()
    assert {c.label: (c.before, c.after) for c in cmp.env} == {
        "driver": ("580.159.04", "575.57"), "PyTorch": ("2.11.0+cu130", "2.10.0+cu128")}


def test_missing_fact_on_one_side_shows_its_reason():
    a = factories.report()
    env = a.environment
    sections = {**env.sections, "driver": {**env.sections["driver"],
                                           "driver_version": model.missing("NVML: Driver/library version mismatch")}}
    b = dataclasses.replace(a, environment=dataclasses.replace(env, sections=sections))
    (c,) = one(a, b).env
    assert (c.before, c.after) == ("580.159.04", "— (NVML: Driver/library version mismatch)")


def test_reports_compare_after_a_json_round_trip():
    a, b = factories.report(), factories.report(scale=1.1)
    direct = one(a, b)
    loaded = one(model.loads(model.dumps(a)), model.loads(model.dumps(b)))
    assert loaded == direct


def test_fewer_than_two_reports_is_an_error():
    with pytest.raises(ValueError):
        diff([("a", factories.report())])


def test_markup_in_machine_strings_is_escaped_in_md_and_html():
    evil = "<script>alert(1)</script>|x"
    a = factories.report(host=evil)
    b = factories.report(scale=1.1, gpu_name="<img src=x onerror=alert(1)>")
    d = diff([("a.json", a), ("b.json", b)])
    html = document.render_diff(d, "html")
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|x" in html
    md = document.render_diff(d, "md")
    assert "<script>" not in md and "\\<script\\>alert(1)\\</script\\>\\|x" in md
    zh = document.render_diff(d, "html", "zh-CN")
    assert 'lang="zh-CN"' in zh and "环境差异" in zh


def test_html_is_deterministic():
    d = diff([("a.json", factories.report()), ("b.json", factories.report(scale=1.1))])
    assert document.render_diff(d, "html") == document.render_diff(d, "html")


def _big_report(scale: float, seed: int) -> Report:
    rng = random.Random(seed)
    base = factories.report()
    proto = base.bench.cases[0]
    cases = []
    for i in range(3000):
        n = 1024 + 64 * i
        t = 1.0 + n / 4e6
        xs = [t * scale * (1 + rng.gauss(0, 0.01)) for _ in range(50)]
        cases.append(dataclasses.replace(proto, shape=(n,), gpu=Timing.from_samples("cuda_graph", xs)))
    return dataclasses.replace(base, bench=dataclasses.replace(base.bench, cases=tuple(cases)))


def test_three_thousand_matched_cases_diff_in_seconds():
    a, b = _big_report(1.0, 1), _big_report(1.05, 2)
    start = time.perf_counter()
    d = diff([("a.json", a), ("b.json", b)])
    elapsed = time.perf_counter() - start
    print(f"diff of 2 x 3000 matched cases: {elapsed:.2f} s")
    cmp = d.comparisons[0]
    assert len(cmp.cases) == 3000 and cmp.overall.count == 3000
    assert cmp.overall.geomean == pytest.approx(1.05, rel=0.01)
    assert elapsed < 10
    start = time.perf_counter()
    document.render_diff(d, "md")
    print(f"markdown of 3000 cases: {time.perf_counter() - start:.2f} s")


def test_facts_one_report_does_not_hold_are_not_called_changes():
    a = factories.report()
    env = a.environment
    sections = {**env.sections, "triton": {**env.sections["triton"], "ptxas_version": model.known("12.8.93")}}
    b = dataclasses.replace(a, environment=dataclasses.replace(env, sections=sections))
    assert one(a, b).env == ()  # an older report without the key: unknown, not different


def test_passing_checks_present_on_one_side_only_are_not_listed():
    a = factories.report()
    extra = Check("cuda.nvcc", "pass", "CUDA toolkit", "nvcc 13.0.88")
    failing = Check("driver.nvml", "fail", "NVIDIA driver (NVML)", "libnvidia-ml.so.1 not found")
    b = dataclasses.replace(a, checks=(*a.checks, extra))
    assert one(a, b).checks == ()
    c = dataclasses.replace(a, checks=(*a.checks, failing))
    assert [(x.id, x.kind) for x in one(c, a).checks] == [("driver.nvml", "removed")]
    assert [(x.id, x.kind) for x in one(a, c).checks] == [("driver.nvml", "new_fail")]


def test_an_op_with_one_case_uses_that_case_interval():
    a = factories.report()
    single = dataclasses.replace(a, bench=dataclasses.replace(a.bench, cases=a.bench.cases[:1]))
    slow = factories.report(scale=1.1)
    slow1 = dataclasses.replace(slow, bench=dataclasses.replace(slow.bench, cases=slow.bench.cases[:1]))
    cmp = one(single, slow1)
    (c,) = cmp.cases
    assert (cmp.ops[0].geomean, cmp.ops[0].low, cmp.ops[0].high) == (c.ratio, c.low, c.high)


def test_a_new_envcheck_or_other_run_settings_are_listed_as_changes():
    a = factories.report()
    bench = dataclasses.replace(a.bench, settings={**a.bench.settings, "quick": True, "rep": 20, "ops": ["relu"]})
    b = dataclasses.replace(a, tool_version="0.2.0", bench=bench)
    changes = {(c.label, c.before, c.after) for c in one(a, b).env}
    assert ("envcheck version", "0.1.0", "0.2.0") in changes
    assert ("run setting quick", "False", "True") in changes and ("run setting rep", "50", "20") in changes
    assert not any("ops" in label for label, _, _ in changes)  # what ran shows in the cases


def test_confidence_reaches_the_per_case_intervals():
    base, slow = factories.report(), factories.report(scale=1.1)
    narrow = diff([("a", base), ("b", slow)], confidence=0.5).comparisons[0].cases[0]
    wide = diff([("a", base), ("b", slow)], confidence=0.99).comparisons[0].cases[0]
    assert narrow.high - narrow.low < wide.high - wide.low


@pytest.mark.parametrize(("lang", "needle"), [("en", "within-run sampling noise only"), ("zh-CN", "运行内的采样噪声")])
@pytest.mark.parametrize("fmt", ["md", "html"])
def test_method_note_warns_that_intervals_miss_run_to_run_drift(lang, needle, fmt):
    text = document.render_diff(diff([("a", factories.report()), ("b", factories.report(scale=1.1))]), fmt, lang)
    assert needle in text


def test_real_h100_to_h200_overall_interval_reflects_case_spread():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "reports"
    a, b = root / "2026-11-22_0057Z_vm_h100-80gb-hbm3.json", root / "2026-11-22_0104Z_vm_h200.json"
    g = diff([(a.name, model.load(a)), (b.name, model.load(b))]).comparisons[0].overall
    assert g.geomean == pytest.approx(0.864, abs=0.001)
    # The between-case spread (ratios from about 0.6 to 2.1), not a collapsed [0.864, 0.864].
    assert g.low == pytest.approx(0.847, abs=0.002) and g.high == pytest.approx(0.881, abs=0.002)
