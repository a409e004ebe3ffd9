"""The analysis layer: every derived number from raw results, computed once.

The tolerance tests plant the wrong outputs that the old single relative-L2 check let pass
(a few sign-flipped matmul outputs, a zeroed block of a vector add) and compute the error
statistics the worker records with numpy in float64, so the verdict is tested end to end
without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from envcheck.analysis import analyse
from envcheck.analysis import flags as fl
from envcheck.analysis.ceilings import ceilings, theoretical_bandwidth_gbps
from envcheck.analysis.tolerance import judge, tolerance
from envcheck.model import (
    Accuracy,
    Bench,
    BenchDevice,
    Case,
    CeilingRun,
    Environment,
    Failure,
    Gpu,
    MonitorWindow,
    RecordedCeiling,
    Report,
    Stop,
    StopCause,
    Timing,
    known,
    missing,
)

H200_FACTS = {"name": known("NVIDIA H200"), "uuid": known("GPU-aaaa"), "compute_capability": known("9.0"),
              "sm_count": known(132), "sm_clock_max_mhz": known(1980), "mem_clock_max_mhz": known(3201),
              "memory_bus_width_bits": known(6016)}


def env(**facts) -> Environment:
    return Environment(gpus=(Gpu(0, {**H200_FACTS, **facts}),))


def device(**kw) -> BenchDevice:
    return BenchDevice("cuda", kw.pop("name", "NVIDIA H200"), 0, uuid=kw.pop("uuid", "GPU-aaaa"),
                       l2_bytes=60 << 20, **kw)


def timing(us: float, method: str = "cuda_graph", n: int = 20, spread: float = 0.001) -> Timing:
    return Timing.from_samples(method, [us * (1 + spread * ((i % 5) - 2)) for i in range(n)])


def acc(**kw) -> Accuracy:
    return Accuracy(kw.get("rel_l2", 0.0), kw.get("max_abs", 0.0), kw.get("max_rel_elem", 0.0),
                    kw.get("nonfinite", 0), kw.get("elements", 1))


def case(op="vector_add", impl="torch", dtype="fp32", precision=None, shape=(1 << 26,), gpu=100.0, launch=None,
         **kw) -> Case:
    return Case(op, impl, dtype, precision or dtype, shape, gpu=timing(gpu) if gpu else None,
                launch=timing(launch, "cuda_events") if launch else None, accuracy=kw.pop("accuracy", acc()), **kw)


def analysed(*cases: Case, environment: Environment | None = None, **bench_kw):
    bench = Bench(device(), cases=cases, **bench_kw)
    report = Report("t", "2026-11-22T00:00:00Z", "vm", "run", environment or env(), benches=(bench,))
    return analyse(report).bench


# --------------------------------------------------------------------------- tolerance on planted bugs


def _matmul_stats(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> Accuracy:
    ref = a @ b
    mag = np.abs(a) @ np.abs(b)
    err = np.abs(out - ref)
    return Accuracy(float(np.linalg.norm(out - ref) / np.linalg.norm(ref)), float(err.max()),
                    float((err / mag).max()), int((~np.isfinite(out)).sum()), out.size)


@pytest.mark.parametrize("dtype, flips", [("fp16", 1), ("bf16", 8)])
def test_sign_flipped_matmul_outputs_fail_where_the_global_error_passes(dtype, flips):
    rng = np.random.default_rng(0)
    m = n = 2048
    k = 128
    a = rng.standard_normal((m, k)) / np.sqrt(k)
    b = rng.standard_normal((k, n)) / np.sqrt(k)
    ref = a @ b
    # A correct kernel: fp32 accumulation, output rounded to the storage dtype.
    u_out = {"fp16": 2.0**-11, "bf16": 2.0**-8}[dtype]
    good = ref * (1 + u_out * rng.uniform(-1, 1, ref.shape))
    tol = tolerance("matmul", dtype, dtype, (m, n, k))
    assert judge(_matmul_stats(good, a, b), tol).passed
    bad = good.copy()
    flat = bad.reshape(-1)
    # A few outputs of ordinary size with the wrong sign: among 4M elements they hardly move
    # the whole-output error.
    typical = np.flatnonzero(np.abs(np.abs(flat) - np.sqrt(np.mean(flat**2))) < 0.05 * np.sqrt(np.mean(flat**2)))
    flat[typical[:flips]] *= -1
    verdict = judge(_matmul_stats(bad, a, b), tol)
    assert not verdict.passed and "element" in verdict.broken  # far past its bound, whatever the whole says
    assert verdict.ratio > 30


def test_zeroed_block_of_a_vector_add_fails():
    rng = np.random.default_rng(1)
    n = 1 << 22
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    ref = x + y
    out = ref.copy()
    out[5000:5004] = 0.0  # a small block never written (or written as zero): under 1e-3 of the norm
    err = np.abs(out - ref)
    stats = Accuracy(float(np.linalg.norm(out - ref) / np.linalg.norm(ref)), float(err.max()),
                     float((err / (np.abs(x) + np.abs(y))).max()), 0, n)
    tol = tolerance("vector_add", "fp16", "fp16", (n,))
    v = judge(stats, tol)
    assert "element" in v.broken and v.ratio == pytest.approx(1.0 / tol.element)  # all of |x + y| over u


def test_nonfinite_outputs_always_fail_and_old_reports_are_judged_globally():
    tol = tolerance("softmax", "fp32", "fp32", (64, 4097))
    assert judge(Accuracy(0.0, 0.0, 0.0, 3, 100), tol).broken == ("nonfinite",)
    assert judge(Accuracy(tol.rel_l2 / 2, 1.0), tol).passed  # schema 1: no element statistic recorded


def test_the_verdict_gives_the_worst_error_as_a_share_of_its_bound():
    tol = tolerance("softmax", "fp32", "fp32", (64, 4097))
    assert judge(Accuracy(tol.rel_l2 / 2, 1.0), tol).ratio == pytest.approx(0.5)  # schema 1: whole output only
    v = judge(Accuracy(tol.rel_l2 / 4, 1.0, 3 * tol.element, 0, 100), tol)
    assert v.broken == ("element",) and v.ratio == pytest.approx(3.0)


def test_tolerances_grow_with_accumulation_and_precision():
    fp32 = tolerance("matmul", "fp32", "fp32", (512, 512, 512))
    tf32 = tolerance("matmul", "fp32", "tf32", (512, 512, 512))
    assert fp32.rel_l2 > 3 * 4.1e-7 and tf32.rel_l2 > 3 * 7.7e-4  # the measured IEEE and TF32 errors (H200)
    assert tf32.rel_l2 > 1000 * fp32.rel_l2
    assert tolerance("row_sum", "fp32", "fp32", (8, 4096)).element > tolerance("row_sum", "fp32", "fp32", (8, 64)).element
    assert tolerance("vector_add", "fp16", "fp16", (8,)).precision == "fp32"  # computed upcast


# --------------------------------------------------------------------------- ceilings


def test_theoretical_bandwidth_is_clock_times_bus():
    assert theoretical_bandwidth_gbps(3201, 6016) == pytest.approx(4814.3, abs=0.1)
    assert theoretical_bandwidth_gbps(None, 6016) is None


def test_wsl_gpu_without_memory_clock_falls_back_or_says_why():
    geforce = {"name": known("NVIDIA GeForce RTX 3060 Laptop GPU"), "compute_capability": known("8.6"),
               "mem_clock_max_mhz": missing("not supported on this GPU (NVML: Not Supported)"),
               "memory_bus_width_bits": missing("not supported on this GPU (NVML: Not Supported)")}
    bench = Bench(device(name="NVIDIA GeForce RTX 3060 Laptop GPU", uuid=None))
    c = ceilings(Environment(gpus=(Gpu(0, geforce),)), bench)
    assert c.get("bandwidth", "theoretical") is None
    (m,) = [x for x in c.missing if x.name == "bandwidth"]
    assert m.key == "ceiling.no_bandwidth" and "mem_clock_max_mhz" in m.params["missing"]
    assert "Not Supported" in m.params["reason"]


def test_measured_ceilings_are_the_best_kernel_and_shape():
    runs = (
        CeilingRun("copy", "fp32", (1 << 28,), timing(2 * (1 << 30) / 4250e9 * 1e6)),
        CeilingRun("read", "fp32", (1 << 28,), timing((1 << 30) / 4450e9 * 1e6)),
        CeilingRun("matmul", "bf16", (8192, 8192, 8192), timing(2 * 8192**3 / 700e12 * 1e6), precision="bf16"),
        CeilingRun("matmul", "bf16", (4096, 4096, 4096), timing(2 * 4096**3 / 680e12 * 1e6), precision="bf16"),
    )
    c = ceilings(env(), Bench(device(), ceiling_runs=runs))
    assert c.get("bandwidth", "measured").value == pytest.approx(4450, rel=1e-3)
    assert c.get("bandwidth", "measured").source.kind == "measured_read"
    assert c.get("bf16", "measured").value == pytest.approx(700, rel=1e-3)
    assert c.get("bandwidth", "theoretical").value == pytest.approx(4814.3, abs=0.1)
    assert c.get("bf16", "theoretical").value == pytest.approx(989.4, rel=0.01)


def test_bench_is_matched_to_its_gpu_by_uuid_not_index():
    env2 = Environment(gpus=(Gpu(0, {**H200_FACTS, "uuid": known("GPU-zzzz"), "mem_clock_max_mhz": known(1000)}),
                             Gpu(1, dict(H200_FACTS))))
    c = ceilings(env2, Bench(device(uuid="aaaa")))  # torch gives the UUID without the GPU- prefix
    assert c.get("bandwidth", "theoretical").value == pytest.approx(4814.3, abs=0.1)


# --------------------------------------------------------------------------- per-case results


def test_throughput_shares_and_speedup():
    n = 1 << 26
    ideal = 3 * 4 * n / 4814.3e9 * 1e6  # us at 100% of theoretical
    b = analysed(case(gpu=ideal / 0.9), case(impl="triton", gpu=ideal / 0.91, launch=ideal * 1.2))
    torch_r, triton_r = b.results
    assert torch_r.gbps == pytest.approx(4814.3 * 0.9, rel=1e-3)
    assert torch_r.pct_theoretical == pytest.approx(90.0, rel=1e-3)
    assert triton_r.speedup == pytest.approx(0.91 / 0.9, rel=1e-3) and torch_r.speedup is None
    assert triton_r.category == "large" and triton_r.status == "pass"  # 805 MB: 13x L2


def test_speedup_only_between_times_taken_the_same_way():
    b = analysed(case(gpu=None, launch=10.0), case(impl="triton", gpu=5.0, launch=12.0))
    assert b.results[1].speedup is None  # torch has no GPU time: launch vs graph time is no comparison


def test_above_ceiling_is_flagged_and_explained():
    n = 1 << 26
    run = CeilingRun("copy", "fp32", (1 << 28,), timing(2 * (1 << 30) / 4000e9 * 1e6))
    fast = 3 * 4 * n / 4300e9 * 1e6  # 4300 GB/s: above the 4000 GB/s measured ceiling
    b = analysed(case(gpu=fast), ceiling_runs=(run,))
    r = b.results[0]
    assert r.pct_measured == pytest.approx(107.5, rel=1e-3) and fl.ABOVE_CEILING in r.flags
    assert [f.key for f in b.findings if f.key.startswith("finding.above")] == ["finding.above_ceiling"]


def test_status_error_fail_pass():
    b = analysed(case(accuracy=acc(rel_l2=0.5)), case(impl="triton", gpu=None, failure=Failure("compile", "x")),
                 case(impl="compile", accuracy=None))
    assert [r.status for r in b.results] == ["fail", "error", "fail"]  # never checked is not a pass
    assert {f.key: f.params["count"] for f in b.findings if f.level == "fail"} == {
        "finding.failed": 2, "finding.errored": 1}


def test_flags_from_raw_results():
    small = case(shape=(1024,), gpu=1.1, launch=6.0)
    noisy = Case("relu", "torch", "fp32", "fp32", (1 << 26,), gpu=Timing.from_samples("cuda_graph", [150, 150, 225, 150]),
                 accuracy=acc())
    window = MonitorWindow(0.02, [0, 0.02], sm_mhz=[1500, 1400], reasons=(("sw_power_cap",), ()))
    capped = case(op="matmul", dtype="bf16", shape=(4096, 4096, 4096), gpu=200.0, window=0)
    b = analysed(small, noisy, capped, windows=(window,))
    f_small, f_noisy, f_capped = (r.flags for r in b.results)
    assert fl.LAUNCH_BOUND in f_small and fl.L2_RESIDENT in f_small
    assert f_noisy == (fl.NOISY,)
    assert fl.THROTTLED in f_capped and b.results[2].conditions.sm_mhz_min == 1400
    assert b.results[2].conditions.throttled_share == 0.5
    keys = [f.key for f in b.findings]
    assert "finding.power_capped" in keys and "finding.throttled" not in keys


@pytest.mark.parametrize(("method", "rec"), [("cuda_graph", "rec.noisy"), ("host_clock", "rec.noisy.cpu")])
def test_noisy_rows_get_the_advice_of_the_clock_that_timed_them(method, rec):
    """GPU rows: other GPU processes; the CPU baseline: other busy processes (no nvidia-smi on a CPU box)."""
    noisy = Case("relu", "torch", "fp32", "fp32", (1 << 26,), gpu=Timing.from_samples(method, [150, 150, 225, 150]),
                 accuracy=acc())
    b = analysed(noisy)
    assert [r.key for r in b.recommendations if r.key.startswith("rec.noisy")] == [rec]


def test_rotated_buffers_are_not_l2_resident():
    ws_fits = case(shape=(1 << 20,), gpu=5.0, rotation_sets=15)
    assert fl.L2_RESIDENT not in analysed(ws_fits).results[0].flags


def test_cpu_bench_has_no_gpu_flags_or_ceilings():
    c = Case("vector_add", "torch", "fp32", "fp32", (1024,), launch=timing(2.0, "host_clock"), accuracy=acc())
    bench = Bench(BenchDevice("cpu", "Xeon"), cases=(c,))
    a = analyse(Report("t", "x", "h", "run", Environment(), benches=(bench,))).bench
    assert a.ceilings.found == () and a.results[0].flags == () and a.results[0].pct_theoretical is None


def test_speedup_summary_per_precision_keeps_ieee_fp32_apart():
    rows = []
    for prec, dtype, ratio in (("fp16", "fp16", 1.0), ("bf16", "bf16", 1.0), ("fp32", "fp32", 0.25)):
        rows += [case(op="matmul", dtype=dtype, precision=prec, shape=(4096, 4096, 4096), gpu=100.0),
                 case(op="matmul", impl="triton", dtype=dtype, precision=prec, shape=(4096, 4096, 4096), gpu=100 / ratio)]
    s = analysed(*rows).summary
    (mm,) = s.by_op_impl
    assert mm.speedup_geomean == pytest.approx(0.25 ** (1 / 3), rel=1e-3)  # the misleading single number
    per = {t.precision: t.speedup_geomean for t in s.by_op_impl_precision}
    assert per == pytest.approx({"fp16": 1.0, "bf16": 1.0, "fp32": 0.25}, rel=1e-3)


def test_stop_finding_carries_cause_and_counts_not_a_sentence():
    b = analysed(case(), stop=Stop(StopCause.SIGNAL, finished=1, planned=5, signal="SIGTERM"))
    (f,) = [f for f in b.findings if f.key.startswith("finding.stopped")]
    assert f.key == "finding.stopped.signal" and f.params == {"finished": 1, "planned": 5, "signal": "SIGTERM"}
    assert "rec.rerun_partial" in [r.key for r in b.recommendations]


def test_recorded_ceilings_of_old_reports_are_used_as_recorded():
    b = analysed(case(gpu=100.0), recorded_ceilings=(RecordedCeiling("bandwidth", 4253.0, "GB/s", "copy"),))
    assert b.ceilings.get("bandwidth", "measured").source.kind == "recorded"
    assert b.results[0].pct_measured is not None


def test_a_matmul_above_its_flops_ceiling_is_a_compute_finding_counted_with_the_faster_rows():
    """Issue 17 item 4: the committed H200 run's matmul torch fp32 2048^3 (101.3% of the measured FP32
    FLOP/s ceiling, its working set fits L2) was called a row that "exceeds a bandwidth ceiling because
    its working set was served from L2", and left out of the rows faster than a ceiling."""
    from envcheck.analysis.findings import above_ceiling
    from envcheck.model import load

    ba = analyse(load("evidence/2026-11-22_2139Z_vm_h200.json.gz")).benches[0]
    row = next(r for r in ba.results if r.case.op == "matmul" and r.case.impl == "torch" and r.case.dtype == "fp32"
               and r.case.precision == "fp32" and r.case.shape == (2048, 2048, 2048))
    assert row.pct_measured == pytest.approx(101.3, abs=0.05) and fl.ABOVE_CEILING in row.flags
    found = {f.key: f for f in ba.findings if f.key.startswith("finding.above")}
    assert set(found) == {"finding.above_ceiling_compute"}  # no "served from L2" for a compute-bound row
    f = found["finding.above_ceiling_compute"]
    assert row.key in f.rows and f.params["count"] == 3 and f.params["compute"] == 3 and f.params["bandwidth"] == 0

    # With a bandwidth row above its ceiling too, one finding counts both and names each kind.
    n = 1 << 26
    run = CeilingRun("copy", "fp32", (1 << 28,), timing(2 * (1 << 30) / 4000e9 * 1e6))
    fast = analysed(case(gpu=3 * 4 * n / 4300e9 * 1e6), ceiling_runs=(run,)).results[0]
    mixed = above_ceiling((*ba.results, fast))
    assert [(m.key, m.params["count"], m.params["bandwidth"], m.params["compute"]) for m in mixed] == [
        ("finding.above_ceiling_mixed", 4, 1, 3)]


def test_every_above_ceiling_finding_is_phrased_in_both_languages():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for lang in ("en", "zh-CN"):
        cat = json.loads((root / "envcheck" / "render" / "catalog" / f"{lang}.json").read_text(encoding="utf-8"))
        for key in ("finding.above_ceiling", "finding.above_ceiling_compute", "finding.above_ceiling_mixed",
                    "finding.above_ceiling_cached"):
            assert key in cat and "{count}" in cat[key]
