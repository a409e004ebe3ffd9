"""Every rule constant the verdicts rest on, tested on each side of its line (issue 48): before, several
could change tenfold without one test failing. The judge's own bounds are tests/test_judge.py's; here the
burn's float64 spot check, the GPU checks' ECC counts, the row flags, the link counters' limits and the
burn's thresholds, each at the value its docs give, just inside and just past.
"""

from __future__ import annotations

import pytest

from envcheck.analysis import counters, flags
from envcheck.analysis.counters import CounterChange
from envcheck.model import Timing
from tests.test_burn_analysis import POWER_OK, burn, gpu, keys, replay
from tests.test_checks_gpu import by_rule, env_with, h200_gpu

# --------------------------------------------------------------------------- the burn's float64 spot check

@pytest.mark.parametrize(("dtype", "factor", "flagged"), [("bf16", 0.9, False), ("bf16", 1.1, True),
                                                         ("fp16", 0.9, False), ("fp16", 1.1, True)])
def test_the_float64_spot_check_allows_two_roundings_of_the_sum_of_magnitudes(dtype, factor, flagged):
    """A sampled element within 2 u sum |a_k b_k| of its float64 value is right (the output's rounding and
    the accumulation's); past it, a silent data corruption."""
    torch = pytest.importorskip("torch")
    from envcheck.burn.gemm import UNIT_ROUNDOFF, Gemm, SdcChecker

    g = Gemm.make(torch, dtype, 64, 64, "cpu", seed=0)
    checker = SdcChecker(torch, g, seed=0)
    checker.first(g())
    i, j = checker._sample[0]
    a = g.a.double()[i]
    b = g.b.double()[:, j]
    exact, bound = float((a * b).sum()), float((a * b).abs().sum()) * 2 * UNIT_ROUNDOFF[dtype]
    assert bound == pytest.approx(float((a * b).abs().sum()) * {"bf16": 2.0**-7, "fp16": 2.0**-10}[dtype])
    out = torch.zeros(64, 64, dtype=torch.float64)
    for r, c in checker._sample:  # every sampled element exact, but one off by factor x its bound
        out[r, c] = float((g.a.double()[r] * g.b.double()[:, c]).sum())
    out[i, j] = exact + factor * bound
    checker.fp64(out, 3, 1.5)
    checker.fp64(out, 4, 2.0)
    assert checker.fp64_checks == 2 and checker.fp64_max_error == pytest.approx(factor, rel=1e-6)
    assert [(m.check, m.iteration, m.t_s, m.element) for m in checker.mismatches] == (
        [("fp64", 3, 1.5, i * 64 + j), ("fp64", 4, 2.0, i * 64 + j)] if flagged else [])
    if flagged:
        assert (checker.mismatches[0].expected, checker.mismatches[0].got) == pytest.approx((exact, exact + factor * bound))


# --------------------------------------------------------------------------- ECC: one error is a finding

@pytest.mark.parametrize(("facts", "status"), [
    ({"ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0}, "pass"),
    ({"ecc_uncorrected_volatile": None, "ecc_uncorrected_aggregate": None}, "skip"),  # not probed
    ({"ecc_uncorrected_volatile": None, "ecc_uncorrected_aggregate": 1}, "warn"),
    ({"ecc_uncorrected_volatile": 1, "ecc_uncorrected_aggregate": None}, "fail"),
    ({"ecc_uncorrected_volatile": 1, "ecc_uncorrected_aggregate": 1}, "fail"),  # since the driver loaded: fail
    ({"ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 1}, "warn"),  # over the board's life: warn
])
def test_a_single_uncorrected_ecc_error_warns_or_fails_as_the_docs_say(facts, status):
    from envcheck.model import missing

    c = by_rule(env_with(h200_gpu(**{k: missing("not probed") if v is None else v for k, v in facts.items()})), "ecc")
    assert c.status == status and c.id == "gpu.ecc.0" and "GPU 0 (NVIDIA H200)" in c.finding


def test_a_burn_with_one_new_uncorrected_ecc_error_fails_and_none_passes():
    ecc = "nvmlDeviceGetTotalEccErrors[UNCORRECTED,VOLATILE]"
    assert keys(burn(gpu(replay({**POWER_OK, ecc: [0] * 20 + [1]})))) == ["ecc_uncorrected"]
    assert keys(burn(gpu(replay({**POWER_OK, ecc: [0] * 21})))) == []


# --------------------------------------------------------------------------- the burn's PCIe replays and power share

@pytest.mark.parametrize(("replays", "fails"), [(160, False), (161, True)])
def test_a_burn_allows_dcgms_160_pcie_replays_and_no_more(replays, fails):
    tel = replay({**POWER_OK, "nvmlDeviceGetPcieReplayCounter": [5] * 20 + [5 + replays]})
    assert (keys(burn(gpu(tel))) == ["pcie_replays"]) is fails


@pytest.mark.parametrize(("milliwatts", "fails"), [(526_000, False), (524_000, True)])  # 75% of the 700 W limit
def test_a_burn_needs_three_quarters_of_the_power_limit(milliwatts, fails):
    tel = replay({**POWER_OK, "nvmlDeviceGetPowerUsage": [milliwatts]})
    assert (keys(burn(gpu(tel))) == ["power_short"]) is fails


# --------------------------------------------------------------------------- the row flags

@pytest.mark.parametrize(("launch_us", "bound"), [(149.0, False), (150.0, False), (151.0, True)])
def test_a_row_is_launch_bound_past_one_and_a_half_times_its_gpu_time(launch_us, bound):
    gpu_t = Timing.from_samples("cuda_graph", [100.0] * 5)
    assert flags.is_launch_bound(gpu_t, Timing.from_samples("cuda_events", [launch_us] * 5)) is bound
    assert flags.LAUNCH_BOUND_RATIO == 1.5


def _with_cv(cv: float) -> Timing:
    """Eighteen samples of 100 us and two outliers placed so that the CV is ``cv`` (the IQR stays 0)."""
    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        t = Timing.from_samples("cuda_graph", [100.0] * 18 + [100.0 - mid, 100.0 + mid])
        lo, hi = (mid, hi) if t.cv < cv else (lo, mid)
    return t


@pytest.mark.parametrize(("cv", "noisy"), [(0.049, False), (0.051, True)])
def test_a_row_is_noisy_past_five_percent_cv(cv, noisy):
    t = _with_cv(cv)
    assert t.cv == pytest.approx(cv, rel=1e-3) and t.iqr_us == 0.0
    assert flags.is_noisy(t) is noisy
    assert not flags.is_noisy(None) and not flags.is_launch_bound(None, t) and not flags.is_launch_bound(t, None)
    assert flags.NOISY_IQR_RATIO == 0.10  # the IQR's line: tests/test_analysis.py's noisy rows


@pytest.mark.parametrize(("ws", "l2", "category"), [(1 << 20, 50 << 20, "small"), ((1 << 20) + 1, 50 << 20, "medium"),
                                                     (50 << 20, 50 << 20, "medium"), ((50 << 20) + 1, 50 << 20, "large"),
                                                     (800 << 20, 50 << 20, "large"), ((800 << 20) + 1, 50 << 20, "xlarge")])
def test_the_working_set_categories_break_at_one_mib_l2_and_sixteen_l2(ws, l2, category):
    assert flags.category(ws, l2) == category


# --------------------------------------------------------------------------- link counters (DCGM's limits)

@pytest.mark.parametrize(("name", "per_s", "over"), [
    ("pcie_replay", 7.9 / 60, False), ("pcie_replay", 8.1 / 60, True),  # 8 per minute
    ("pcie_replay_rollover", 8.1 / 60, True), ("not_a_counter", 1e6, False),  # a counter without a limit
    ("crc_flit", 99.0, False), ("crc_flit", 101.0, True),  # 100 per second
    ("replay", 99.0, False), ("replay", 101.0, True),
])
def test_a_link_counter_is_over_its_limit_just_past_dcgms_rate(name, per_s, over):
    assert name in counters.RATE_COUNTERS or name.startswith(("pcie", "not_"))
    assert counters.counter_over_limit(CounterChange(0, name, 0, int(per_s * 100), 100.0, per_s)) is over


@pytest.mark.parametrize(("delta", "over"), [(0, False), (1, True)])
def test_one_nvlink_recovery_is_over_the_limit(delta, over):
    assert counters.counter_over_limit(CounterChange(0, "recovery", 0, delta, 10.0, delta / 10.0)) is over
