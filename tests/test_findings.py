"""Findings come from the data: each appears when the numbers support it, and only then."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from factories import bench, report

from envcheck.model import MonitorSummary
from envcheck.render import findings as fnd
from envcheck.render.context import View
from envcheck.render.i18n import LANGS, catalog, placeholders

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "envcheck" / "templates"
H200 = ROOT / "reports" / "2026-11-21_2341Z_vm_h200.json"


@pytest.fixture(scope="module")
def h200():
    """A real run: torch, triton and torch.compile rows on an H200."""
    from envcheck.model import load

    return load(H200).bench


def keys(found: list[fnd.Finding]) -> list[str]:
    return [f.key for f in found]


def with_cases(b, fn):
    return dataclasses.replace(b, cases=tuple(fn(c) for c in b.cases))


def test_launch_bound_region_ends_at_largest_flagged_size():
    b = bench()
    found = {f.params["op"]: f for f in fnd.launch_bound(b)}
    flagged = [c for c in b.cases if c.op == "vector_add" and "launch_bound" in c.flags and c.impl == "torch"]
    assert found["vector_add"].params["torch_elements"] == max(c.shape[0] for c in flagged)
    assert found["vector_add"].params["torch_elements"] == 1 << 20  # 12 MiB moved in ~2.9 us: still under a launch
    assert "matmul" not in found


def test_launch_bound_limit_is_per_implementation(h200):
    """relu on the H200: Triton is launch-bound up to 4 194 304, torch only up to 1 048 576 (torch's
    4 194 304 row is not flagged): one limit per implementation, and the recommendation follows torch."""
    found = {f.params["op"]: f for f in fnd.launch_bound(h200)}
    va = found["relu"].params
    assert va["limits"] == ["torch 1 048 576", "triton 4 194 304", "compile 16 777 216"]
    assert va["torch_elements"] == 1 << 20
    (rec,) = [r for r in fnd.recommendations(fnd.findings(h200)) if r.key == "rec.small_tensors"]
    assert rec.params["elements"] == 1 << 20
    text = View("en", str).phrase("finding.launch_bound", dict(va))
    assert "triton 4 194 304" in text and "torch 1 048 576" in text


def test_launch_overhead_pairs_rows_of_the_same_group_and_quotes_launch_time(h200):
    """Medians of the launch time per call, over Triton's launch-bound rows that have a torch row
    of the same op, dtype, precision and size; the count is the number of pairs."""
    by_impl = {f.params["impl"]: f.params for f in fnd.launch_overhead(h200)}
    tri = by_impl["triton"]
    rows = [c for c in h200.cases if c.impl == "triton" and "launch_bound" in c.flags and c.launch]
    torch = {(c.op, c.dtype, c.precision, c.shape): c for c in h200.cases if c.impl == "torch" and c.launch}
    pairs = [(c, torch[(c.op, c.dtype, c.precision, c.shape)]) for c in rows
             if (c.op, c.dtype, c.precision, c.shape) in torch]
    assert tri["count"] == len(pairs) < 2 * len(pairs)
    import statistics

    assert tri["impl_us"] == pytest.approx(statistics.median(c.launch.median_us for c, _ in pairs))
    assert tri["torch_us"] == pytest.approx(statistics.median(t.launch.median_us for _, t in pairs))
    assert tri["impl_us"] > tri["torch_us"] > 5  # launch time, not launch minus GPU time (which is ~1-5 us for torch)


def test_launch_overhead_skips_rows_without_a_torch_partner(h200):
    """A launch-bound Triton row whose torch row is missing is not paired with another size's torch row."""
    tri_bound = {c.shape for c in h200.cases if c.impl == "triton" and "launch_bound" in c.flags}
    b = dataclasses.replace(h200, cases=tuple(c for c in h200.cases if not (c.impl == "torch" and c.shape in tri_bound)))
    assert "triton" not in {f.params["impl"] for f in fnd.launch_overhead(b)}


def test_clean_run_has_no_throttle_noise_failure_or_partial_findings():
    found = keys(fnd.findings(bench()))
    for absent in ("finding.throttled", "finding.noisy", "finding.failed", "finding.errored", "finding.partial",
                   "finding.interrupted"):
        assert absent not in found
    recs = [r.key for r in fnd.recommendations(fnd.findings(bench()))]
    assert "rec.throttled" not in recs and "rec.noisy" not in recs
    assert "rec.small_tensors" in recs and "rec.tf32" in recs


def test_throttled_rows_are_named_with_reasons_and_recommend_cooling():
    b = bench()
    target = b.cases[-1]

    def throttle(c):
        if c is target:
            return dataclasses.replace(c, flags=(*c.flags, "throttled"),
                                       monitor=MonitorSummary(20, throttle_reasons=("sw_thermal_slowdown",)))
        return c

    found = fnd.findings(with_cases(b, throttle))
    (f,) = [f for f in found if f.key == "finding.throttled"]
    assert f.params["reasons"] == ["sw_thermal_slowdown"]
    assert f.params["rows"] == [fnd.row_label(target)]
    assert "rec.throttled" in [r.key for r in fnd.recommendations(found)]


def test_rows_only_at_the_power_cap_are_explained_not_blamed_on_cooling():
    b = bench()
    target = b.cases[-1]

    def cap(c):
        if c is target:
            return dataclasses.replace(c, flags=(*c.flags, "throttled"),
                                       monitor=MonitorSummary(20, throttle_reasons=("sw_power_cap",)))
        return c

    found = fnd.findings(with_cases(b, cap))
    assert "finding.throttled" not in keys(found)
    (f,) = [f for f in found if f.key == "finding.power_capped"]
    assert f.params == {"count": 1, "rows": [fnd.row_label(target)]} and f.level != "warn"
    assert "rec.throttled" not in [r.key for r in fnd.recommendations(found)]


def test_noisy_rows_report_worst_cv():
    b = bench()
    noisy = {id(c) for c in b.cases[:3]}
    found = fnd.noisy(with_cases(b, lambda c: dataclasses.replace(c, flags=(*c.flags, "noisy")) if id(c) in noisy else c))
    (f,) = found
    assert f.params["count"] == 3
    assert f.params["cv_pct"] == pytest.approx(100 * max(c.gpu.cv for c in b.cases[:3]))


def test_launch_bound_matmul_is_named_by_its_shape_not_an_element_count():
    b = with_cases(bench(), lambda c: dataclasses.replace(c, flags=("launch_bound",))
                   if c.op == "matmul" and c.shape == (1024, 1024, 1024) else c)
    found = {f.params["op"]: f for f in fnd.launch_bound(b)}
    assert found["matmul"].key == "finding.launch_bound"
    assert found["matmul"].params["limits"] == [f"{i} 1024×1024×1024" for i in
                                               dict.fromkeys(c.impl for c in b.cases if c.op == "matmul")]
    assert "torch_elements" not in found["matmul"].params


def test_l2_resident_counts_memory_bound_ops_only_with_largest_size_per_op(h200):
    (f,) = fnd.l2_resident(h200)
    rows = [c for c in h200.cases if "l2_resident" in c.flags and not c.compute_bound]
    assert f.params["count"] == len(rows) == 16
    assert f.params["sizes"] == ["vector_add 65 536", "relu 102 400"]
    assert "matmul" not in " ".join(f.params["sizes"])


def test_no_l2_finding_when_only_matmul_is_l2_resident(h200):
    b = dataclasses.replace(h200, cases=tuple(c for c in h200.cases if c.compute_bound))
    assert fnd.l2_resident(b) == []


def test_matmul_is_judged_against_flops_not_bandwidth():
    found = {f.params["op"] for f in fnd.bandwidth_ceiling(bench())}
    assert "matmul" not in found and "vector_add" in found


def test_bandwidth_ceiling_ignores_l2_resident_and_launch_bound_rows():
    found = {f.params["op"]: f for f in fnd.bandwidth_ceiling(bench())}
    best = found["vector_add"]
    assert best.params["size"] in ("16 777 216", "67 108 864", "268 435 456")
    assert 85 < best.params["theoretical_pct"] < 95


def test_compute_ceiling_per_precision_against_its_peak():
    found = {f.params["variant"]: f for f in fnd.compute_ceiling(bench())}
    assert set(found) == {"fp16", "bf16", "fp32 (tf32)", "fp32"}
    tf = found["fp32 (tf32)"]
    assert tf.params["peak_tflops"] == pytest.approx(494.7)
    assert tf.params["peak_pct"] == pytest.approx(100 * tf.params["tflops"] / 494.7)


def test_tf32_finding_compares_with_ieee_rows():
    f = {f.params["impl"]: f for f in fnd.tf32(bench())}["triton"]
    assert f.key == "finding.tf32"
    assert f.params["tf32_err"] > 100 * f.params["ieee_err"]
    assert f.params["tf32_tol"] == pytest.approx(5e-3)


def test_tf32_is_per_implementation_with_its_largest_error_and_ieee_of_the_same_shapes(h200):
    found = {f.params["impl"]: f for f in fnd.tf32(h200)}
    assert set(found) == {"torch", "triton", "compile"}
    tri = found["triton"].params
    tf_rows = [c for c in h200.cases if c.impl == "triton" and c.precision == "tf32"]
    worst = max(tf_rows, key=lambda c: c.error.rel_l2)
    assert tri["tf32_err"] == worst.error.rel_l2 > 7.7e-4  # not torch's 2.9e-4, not a median
    assert tri["tf32_tol"] == worst.error.tolerance
    shapes = {c.shape for c in tf_rows}
    ieee = [c for c in h200.cases if c.precision == "fp32" and c.dtype == "fp32" and c.error and c.shape in shapes]
    assert tri["ieee_err"] == max(c.error.rel_l2 for c in ieee) == pytest.approx(1.1449747725192414e-06)
    assert found["torch"].params["tf32_err"] < 3e-4


def test_tf32_leaves_failed_rows_to_the_failures_finding(h200):
    worst = max((c for c in h200.cases if c.impl == "triton" and c.precision == "tf32"), key=lambda c: c.error.rel_l2)
    b = dataclasses.replace(h200, cases=tuple(dataclasses.replace(c, status="fail") if c is worst else c
                                              for c in h200.cases))
    tri = {f.params["impl"]: f.params for f in fnd.tf32(b)}["triton"]
    assert tri["tf32_err"] < worst.error.rel_l2
    assert tri["count"] == sum(1 for c in h200.cases if c.impl == "triton" and c.precision == "tf32") - 1
    only_failed = dataclasses.replace(h200, cases=tuple(
        dataclasses.replace(c, status="fail") if c.impl == "triton" and c.precision == "tf32" else c
        for c in h200.cases))
    assert "triton" not in {f.params["impl"] for f in fnd.tf32(only_failed)}


def test_no_tf32_finding_without_tf32_rows():
    b = bench()
    b = dataclasses.replace(b, cases=tuple(c for c in b.cases if c.precision != "tf32"))
    assert fnd.tf32(b) == []
    assert "rec.tf32" not in [r.key for r in fnd.recommendations(fnd.findings(b))]


def test_failures_and_errors_are_listed_with_their_messages():
    b = bench()
    first, second = b.cases[0], b.cases[1]

    def spoil(c):
        if c is first:
            return dataclasses.replace(c, status="fail")
        if c is second:
            return dataclasses.replace(c, status="error", message="out of resources: shared memory")
        return c

    found = fnd.findings(with_cases(b, spoil))
    assert keys(found)[:2] == ["finding.failed", "finding.errored"]  # problems come first
    assert "out of resources: shared memory" in found[1].params["rows"][0]
    (rec,) = [r for r in fnd.recommendations(found) if r.key == "rec.failures"]
    assert rec.params["ops"] == "vector_add"


def test_interrupted_and_partial_runs():
    assert keys(fnd.partial(dataclasses.replace(bench(), interrupted="SIGINT"))) == ["finding.interrupted"]
    assert keys(fnd.partial(dataclasses.replace(bench(), partial=True))) == ["finding.partial"]
    assert fnd.partial(bench()) == []


def test_no_bench_no_findings():
    assert fnd.findings(None) == []


@pytest.mark.parametrize("lang", LANGS)
def test_every_finding_and_recommendation_phrases_in_every_language(lang):
    b = bench()
    b = dataclasses.replace(b, interrupted="timeout after 1800 s",
                            cases=tuple(dataclasses.replace(c, flags=(*c.flags, "noisy", "throttled"), status="fail")
                                        for c in b.cases))
    found = fnd.findings(b)
    view = View(lang, str)
    for f in found:
        text = view.phrase(f.key, dict(f.params))
        assert "{" not in text and text
    for r in fnd.recommendations(found):
        assert "{" not in view.phrase(r.key, dict(r.params))


def test_catalogues_have_the_same_keys_and_placeholders():
    en = catalog("en")
    for lang in LANGS:
        other = catalog(lang)
        assert set(other) == set(en), lang
        for k, msg in en.items():
            assert placeholders(other[k]) == placeholders(msg), (lang, k)


def test_catalogue_files_are_valid_flat_json():
    for lang in LANGS:
        path = Path(fnd.__file__).with_name("catalog") / f"{lang}.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        assert all(isinstance(v, str) for v in data.values())


def test_every_literal_key_used_in_templates_exists():
    used = set()
    for tpl in (TEMPLATES / "report.md.j2", TEMPLATES / "report.html.j2", TEMPLATES / "base.html.j2"):
        used |= set(re.findall(r't\("([a-z_.]+[a-z_])"', tpl.read_text(encoding="utf-8")))
    assert used, "no catalogue lookups found: the pattern is stale"
    assert used <= set(catalog("en")), sorted(used - set(catalog("en")))


def test_report_factory_findings_render_without_raw_keys():
    r = report()
    view = View("en", str)
    texts = [view.phrase(f.key, dict(f.params)) for f in fnd.findings(r.bench)]
    assert any("vector_add is launch-bound" in t and "torch 1 048 576" in t for t in texts)
