"""Ratios, intervals, noise floors and geometric means: exactness, power on real shifts, restraint on noise."""

from __future__ import annotations

import math
import random
import statistics
import time

import numpy as np
import pytest

from envcheck.compare import stats
from envcheck.compare.stats import NoiseFloor


def samples(median: float, n: int = 50, noise: float = 0.01, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [median * (1 + rng.gauss(0, noise)) for _ in range(n)]


# --------------------------------------------------------------------------- within-run noise


@pytest.mark.parametrize("n", [5, 6, 51, 200, 999])
def test_median_log_se_is_the_bootstrap_standard_error(n):
    """The order-statistic shortcut gives what resampling and taking medians gives."""
    rng = np.random.default_rng(n)
    xs = np.exp(rng.normal(0.0, 0.05, n)) * 10
    draws = rng.integers(0, n, size=(20000, n))
    brute = float(np.std(np.log(np.median(xs[draws], axis=1))))
    (fast,) = stats.median_log_se([xs], resamples=20000)
    assert fast == pytest.approx(brute, rel=0.05)


def test_median_log_se_is_reproducible_and_independent_of_order_and_company():
    a, b = np.array(samples(10.0, seed=1)), np.array(samples(20.0, n=7, seed=2))
    se = stats.median_log_se([a, b, np.array([1.0, 2.0])])
    assert math.isnan(se[2])  # fewer than MIN_SAMPLES: no standard error
    assert se[0] == stats.median_log_se([a[::-1]])[0]
    assert se[1] == stats.median_log_se([b])[0]
    assert stats.median_log_se([a], seed=1)[0] != stats.median_log_se([a], seed=2)[0]


@pytest.mark.slow
def test_forty_thousand_timings_take_seconds_not_minutes():
    rng = np.random.default_rng(0)
    timings = [rng.lognormal(0, 0.02, int(n)).astype(np.float32) for n in rng.integers(10, 1000, 40000)]
    start = time.perf_counter()
    se = stats.median_log_se(timings)
    elapsed = time.perf_counter() - start
    assert np.isfinite(se).all()
    assert elapsed < 8.0, elapsed  # 1 to 2 s on a busy shared 2-core box; drawing per resample took minutes


def test_identical_samples_give_ratio_exactly_one_and_an_interval_around_it():
    xs = samples(10.0)
    iv = stats.within_interval(xs, list(xs))
    assert iv.ratio == 1.0
    assert iv.low < 1.0 < iv.high
    assert stats.verdict(iv) == "same"


def test_point_estimate_is_the_ratio_of_medians_for_odd_and_even_counts():
    a, b = samples(10.0, n=51), samples(12.0, n=50, seed=1)
    iv = stats.within_interval(a, b)
    assert iv.ratio == pytest.approx(statistics.median(b) / statistics.median(a), rel=1e-12)
    assert (iv.n_base, iv.n_other) == (51, 50)


def test_clear_ten_percent_slowdown_is_slower_and_the_interval_covers_it():
    iv = stats.within_interval(samples(10.0), samples(11.0, seed=1))
    assert stats.verdict(iv) == "slower"
    assert 1.0 < iv.low < 1.10 < iv.high < 1.2
    faster = stats.within_interval(samples(11.0, seed=1), samples(10.0))
    assert stats.verdict(faster) == "faster" and faster.high < 1.0


def test_noisy_samples_with_a_five_percent_median_change_stay_same_within_noise():
    a = samples(10.0, n=15, noise=0.25, seed=3)
    b = [x * 1.05 for x in samples(10.0, n=15, noise=0.25, seed=4)]
    iv = stats.within_interval(a, b)
    assert iv.low < 1.0 < iv.high and iv.high - iv.low > 0.2
    assert stats.verdict(iv) == "same"


def test_tiny_but_significant_change_is_not_called_a_regression():
    a = samples(10.0, n=20000, noise=0.001, seed=5)
    b = samples(10.05, n=20000, noise=0.001, seed=6)
    iv = stats.within_interval(a, b)
    assert iv.excludes_one()
    assert stats.verdict(iv) == "same"
    assert stats.verdict(iv, practical=0.001) == "slower"


def test_too_few_samples_give_no_interval_and_no_verdict():
    iv = stats.within_interval([1.0, 1.1, 0.9], [2.0, 2.1, 1.9])
    assert iv.ratio == pytest.approx(2.0)
    assert not iv.has_interval
    assert stats.verdict(iv) == "uncertain"


@pytest.mark.parametrize("bad", [[], [0.0, 1.0], [-1.0], [math.inf]])
def test_invalid_samples_are_rejected(bad):
    with pytest.raises(ValueError):
        stats.within_interval(bad, [1.0] * 10)


def test_within_run_coverage_under_no_change_is_near_nominal():
    covered = 0
    for k in range(200):
        iv = stats.within_interval(samples(5.0, n=40, noise=0.05, seed=2 * k),
                                   samples(5.0, n=40, noise=0.05, seed=2 * k + 1))
        covered += iv.low <= 1.0 <= iv.high
    assert covered / 200 >= 0.9


# --------------------------------------------------------------------------- run-to-run noise


def test_interval_adds_the_floor_and_uses_its_degrees_of_freedom():
    floor = NoiseFloor(0.02, "shipped", ("matmul", "large"), 6, 6)
    iv = stats.interval(1.05, 0.001, floor, 100, 100)
    half = stats.t_quantile(0.95, 6) * math.hypot(0.001, 0.02)
    assert iv.low == pytest.approx(1.05 * math.exp(-half)) and iv.high == pytest.approx(1.05 * math.exp(half))
    assert stats.verdict(iv) == "same"  # 5% inside a 2% floor on 6 rows: not evidence
    assert stats.verdict(stats.interval(1.10, 0.001, floor, 100, 100)) == "slower"
    bare = stats.interval(1.05, 0.001, stats.NO_FLOOR, 100, 100)
    assert bare.high - bare.low < 0.01 and stats.verdict(bare) == "slower"


# --------------------------------------------------------------------------- geometric means


def _iv(ratio: float, floor: float = 0.0, se: float = 0.001, df: int | None = 30) -> stats.RatioInterval:
    """A case whose floor is shared with the other cases of its kind."""
    f = NoiseFloor(floor, "shipped", ("k",), 31, df) if floor else stats.NO_FLOOR
    return stats.interval(ratio, se, f, 50, 50)


def test_geomean_of_one_case_is_its_own_interval():
    iv = _iv(1.1, floor=0.02)
    g = stats.geomean([iv], ["k"])
    assert (g.ratio, g.count, g.clusters) == (iv.ratio, 1, 1)
    assert g.low == pytest.approx(iv.low) and g.high == pytest.approx(iv.high)


def test_cases_of_one_kind_move_together_so_more_of_them_do_not_narrow_the_interval():
    """200 cases of one kind with a 2% kind shift: a rerun moves them together, the mean by about 2%."""
    ivs = [_iv(1.0, floor=0.02) for _ in range(200)]
    one_kind = stats.geomean(ivs, ["matmul/large"] * 200)
    many_kinds = stats.geomean(ivs, [f"kind{k}" for k in range(200)])
    w_one = math.log(one_kind.high / one_kind.low) / 2
    w_many = math.log(many_kinds.high / many_kinds.low) / 2
    assert w_one == pytest.approx(stats.t_quantile(0.95, 30) * math.sqrt(0.02**2 + 0.001**2 / 200), rel=1e-6)
    assert w_many == pytest.approx(w_one / math.sqrt(200), rel=0.01)
    assert (one_kind.clusters, many_kinds.clusters) == (1, 200)


def test_geomean_combines_ratios_counts_them_and_refuses_an_interval_when_one_case_has_none():
    ivs = [_iv(f) for f in (1.1, 1.2, 0.9)]
    g = stats.geomean(ivs)
    assert g.count == 3 and g.ratio == pytest.approx(math.exp(statistics.fmean(math.log(x) for x in (1.1, 1.2, 0.9))))
    assert stats.geomean([]) is None
    no_interval = stats.within_interval([1.0], [1.1])
    assert stats.geomean([no_interval, *ivs]).low is None
    assert stats.geomean_verdict(stats.geomean([no_interval])) == "uncertain"


def test_geomean_width_follows_the_confidence_level():
    ivs = [_iv(1.1 * f, floor=0.01) for f in (0.9, 1.1, 0.95, 1.05)]
    widths = [math.log(g.high / g.low) for g in (stats.geomean(ivs, None, c) for c in (0.8, 0.95, 0.995))]
    assert widths[0] < widths[1] < widths[2]
    assert widths[0] / widths[1] == pytest.approx(stats.t_quantile(0.8, 30) / stats.t_quantile(0.95, 30), rel=1e-9)


def test_geomean_verdict_needs_significance_and_size():
    assert stats.geomean_verdict(stats.geomean([_iv(1.1)] * 5)) == "slower"
    assert stats.geomean_verdict(stats.geomean([_iv(0.9)] * 5)) == "faster"
    assert stats.geomean_verdict(stats.geomean([_iv(1.01)] * 5)) == "same"
    assert stats.geomean_verdict(stats.geomean([_iv(1.1, floor=0.1)] * 5, ["k"] * 5)) == "same"


# --------------------------------------------------------------------------- quantiles


@pytest.mark.parametrize(("confidence", "df", "expected"), [
    (0.95, 1, 12.706204736174707), (0.95, 2, 4.302652729749464), (0.95, 3, 3.182446305284263),
    (0.95, 5, 2.5705818366147395), (0.95, 30, 2.0422724563012373), (0.99, 10, 3.169272667175838),
    (0.90, 4, 2.13184678632665), (0.80, 12, 1.3562173340231), (0.95, 200, 1.9718962236316093),
    (0.95, 207, 1.9714903918660414), (0.99, 1000, 2.580754698065951),
])
def test_t_quantile_matches_tables(confidence, df, expected):
    assert stats.t_quantile(confidence, df) == pytest.approx(expected, rel=1e-7)


def test_normal_quantile_is_exact_at_any_level():
    assert stats.normal_quantile(0.95) == pytest.approx(1.959963984540054)
    assert stats.normal_quantile(0.80) == pytest.approx(1.2815515655446004)
    assert stats.t_quantile(0.95, 10**7) == pytest.approx(stats.normal_quantile(0.95), rel=1e-6)
    with pytest.raises(ValueError):
        stats.t_quantile(1.0, 5)
    with pytest.raises(ValueError):
        stats.t_quantile(0.95, 0)


def test_the_run_share_of_a_floor_is_what_the_repeats_do_not_already_hold():
    """A single-run floor of 1% (variance 1e-4) over repeats whose per-repeat variance is 0.2e-4 a side:
    2 s_run^2 = 0.6e-4 is added to the repeats' variance of the means; a floor the repeats already hold
    adds nothing; within-run noise of one repeat's median is not taken for repeat-to-repeat noise."""
    from envcheck.compare.stats import NoiseFloor, Repeats, repeat_floor, with_run_share

    a, b = Repeats(0.0, 0.2e-4, 5), Repeats(0.0, 0.2e-4, 5)
    repeats = repeat_floor(a, b)
    assert repeats is not None and repeats.log_sd**2 == pytest.approx(0.08e-4)
    single = NoiseFloor(0.01, "shipped", ("gpu", "vector_add", "large"), 250, 250)
    both = with_run_share(repeats, a, b, single)
    assert both.source == "repeats" and both.kind == single.kind
    assert both.log_sd**2 == pytest.approx(0.6e-4 + 0.08e-4)
    assert repeats.df is not None and repeats.df < both.df <= 250
    held = NoiseFloor(math.sqrt(0.3e-4), "shipped", ("gpu",), 250, 250)
    assert with_run_share(repeats, a, b, held) is repeats
    # a repeat median's own within-run variance (se^2 x 5 = 0.1e-4 a side) is left out of the repeats' share
    within = with_run_share(repeats, a, b, single, (math.sqrt(0.02e-4), math.sqrt(0.02e-4)))
    assert within.log_sd**2 == pytest.approx(0.8e-4 + 0.08e-4)
    # one side without repeats varies as one repeat of the other
    assert with_run_share(repeat_floor(a, None), a, None, single).log_sd ** 2 == pytest.approx(
        0.6e-4 + 0.2e-4 * 1.2)
