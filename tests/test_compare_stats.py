"""Ratio-of-medians intervals: exactness on identical data, power on real shifts, restraint on noise."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from envcheck.compare import stats


def samples(median: float, n: int = 50, noise: float = 0.01, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [median * (1 + rng.gauss(0, noise)) for _ in range(n)]


def test_identical_samples_give_ratio_exactly_one_and_an_interval_around_it():
    xs = samples(10.0)
    iv = stats.ratio_interval(xs, list(xs))
    assert iv.ratio == 1.0
    assert iv.low is not None and iv.high is not None
    assert iv.low <= 1.0 <= iv.high and iv.low < iv.high
    assert stats.verdict(iv) == "same"


def test_point_estimate_is_the_ratio_of_medians_for_odd_and_even_counts():
    a, b = samples(10.0, n=51), samples(12.0, n=50, seed=1)
    iv = stats.ratio_interval(a, b)
    assert iv.ratio == pytest.approx(statistics.median(b) / statistics.median(a), rel=1e-12)
    assert (iv.n_base, iv.n_other) == (51, 50)


def test_clear_ten_percent_slowdown_is_slower_and_the_interval_covers_it():
    iv = stats.ratio_interval(samples(10.0), samples(11.0, seed=1))
    assert stats.verdict(iv) == "slower"
    assert 1.0 < iv.low < 1.10 < iv.high < 1.2
    faster = stats.ratio_interval(samples(11.0, seed=1), samples(10.0))
    assert stats.verdict(faster) == "faster" and faster.high < 1.0


def test_noisy_samples_with_a_five_percent_median_change_stay_same_within_noise():
    a = samples(10.0, n=15, noise=0.25, seed=3)
    b = [x * 1.05 for x in samples(10.0, n=15, noise=0.25, seed=4)]
    iv = stats.ratio_interval(a, b)
    assert iv.high - iv.low > 0.2  # wide: the data cannot tell
    assert iv.low < 1.0 < iv.high
    assert stats.verdict(iv) == "same"


def test_tiny_but_significant_change_is_not_called_a_regression():
    # 20000 very stable samples: a 0.5% shift is statistically certain but below the 2% practical threshold.
    a = samples(10.0, n=20000, noise=0.001, seed=5)
    b = samples(10.05, n=20000, noise=0.001, seed=6)
    iv = stats.ratio_interval(a, b)
    assert iv.excludes_one()
    assert stats.verdict(iv) == "same"
    assert stats.verdict(iv, practical=0.001) == "slower"


def test_seeded_intervals_are_reproducible_and_seed_dependent():
    a, b = samples(10.0, seed=7), samples(10.3, seed=8)
    assert stats.ratio_interval(a, b) == stats.ratio_interval(a, b)
    assert stats.ratio_interval(a, b, seed=1) != stats.ratio_interval(a, b, seed=2)


def test_too_few_samples_give_no_interval_and_no_verdict():
    iv = stats.ratio_interval([1.0, 1.1, 0.9], [2.0, 2.1, 1.9])
    assert iv.ratio == pytest.approx(2.0)
    assert not iv.has_interval
    assert stats.verdict(iv) == "uncertain"


@pytest.mark.parametrize("bad", [[], [0.0, 1.0], [-1.0], [math.inf]])
def test_invalid_samples_are_rejected(bad):
    with pytest.raises(ValueError):
        stats.ratio_interval(bad, [1.0] * 10)


def test_interval_coverage_under_no_change_is_near_nominal():
    """Across 200 pairs drawn from one distribution, the 95% interval should contain 1 most of the time."""
    covered = 0
    for k in range(200):
        iv = stats.ratio_interval(samples(5.0, n=40, noise=0.05, seed=2 * k),
                                  samples(5.0, n=40, noise=0.05, seed=2 * k + 1))
        covered += iv.low <= 1.0 <= iv.high
    assert covered / 200 >= 0.88


def test_geomean_combines_ratios_and_counts_them():
    ivs = [stats.ratio_interval(samples(10.0, seed=s), samples(10.0 * f, seed=s + 100))
           for s, f in ((1, 1.1), (2, 1.2), (3, 0.9))]
    g = stats.geomean(ivs)
    assert g is not None and g.count == 3
    assert g.ratio == pytest.approx(math.exp(sum(math.log(iv.ratio) for iv in ivs) / 3))
    assert g.low < g.ratio < g.high
    assert stats.geomean([]) is None
    no_interval = stats.ratio_interval([1.0], [1.1])
    assert stats.geomean([no_interval]).low is None
    assert stats.geomean_verdict(stats.geomean([no_interval])) == "uncertain"


def _iv(ratio: float, se: float = 0.001) -> stats.RatioInterval:
    """A case with a tight bootstrap interval around ``ratio``."""
    return stats.RatioInterval(ratio, ratio * math.exp(-1.96 * se), ratio * math.exp(1.96 * se), se, 50, 50)


def test_geomean_interval_follows_the_between_case_spread():
    """Same geomean, same per-case SE: agreeing cases give a tight interval, scattered ones a wide one."""
    tight = [_iv(1.1 * f) for f in (0.99, 1.01, 0.995, 1.005, 1.0, 1.0)]
    wide = [_iv(1.1 * f) for f in (0.6, 1.0 / 0.6, 0.8, 1.0 / 0.8, 1.0, 1.0)]
    gt, gw = stats.geomean(tight), stats.geomean(wide)
    assert gt.ratio == pytest.approx(1.1, rel=1e-3) and gw.ratio == pytest.approx(1.1)
    wt, ww = math.log(gt.high / gt.low), math.log(gw.high / gw.low)
    assert ww > 20 * wt
    assert gw.low < 1.0 < gw.high and stats.geomean_verdict(gw) == "same"
    assert gt.low > 1.0 and stats.geomean_verdict(gt) == "slower"
    # Exactly a t-interval on the mean log ratio with n-1 degrees of freedom.
    logs = [math.log(iv.ratio) for iv in wide]
    half = 2.5705818366147395 * statistics.stdev(logs) / math.sqrt(len(logs))  # t(0.975, 5)
    assert gw.low == pytest.approx(math.exp(statistics.fmean(logs) - half), rel=1e-9)
    assert gw.high == pytest.approx(math.exp(statistics.fmean(logs) + half), rel=1e-9)


def test_geomean_of_many_precise_cases_does_not_collapse():
    """Hundreds of cases with tiny per-case SE but real scatter: the old sum-of-variances gave a zero-width interval."""
    rng = random.Random(7)
    ivs = [_iv(0.86 * math.exp(rng.gauss(0, 0.15)), se=0.0003) for _ in range(200)]
    g = stats.geomean(ivs)
    assert math.log(g.high / g.low) > 0.03  # ~2 * 1.97 * 0.15 / sqrt(200) = 0.042


def test_geomean_of_identical_runs_is_exactly_one():
    ivs = [stats.ratio_interval(xs, list(xs)) for xs in (samples(10.0, seed=s) for s in range(5))]
    assert all(iv.log_se and iv.log_se > 0 for iv in ivs)
    g = stats.geomean(ivs)
    assert (g.ratio, g.low, g.high) == (1.0, 1.0, 1.0)
    assert stats.geomean_verdict(g) == "same"


def test_geomean_of_one_case_is_its_own_interval():
    iv = stats.ratio_interval(samples(10.0, seed=1), samples(11.0, seed=2))
    g = stats.geomean([iv], confidence=0.8)
    assert (g.ratio, g.low, g.high, g.count) == (iv.ratio, iv.low, iv.high, 1)


def test_geomean_width_follows_the_confidence_level():
    """Levels other than 90/95/99% used to fall back silently to 95%."""
    ivs = [_iv(1.1 * f) for f in (0.9, 1.1, 0.95, 1.05)]
    widths = [math.log(g.high / g.low) for g in (stats.geomean(ivs, c) for c in (0.8, 0.95, 0.995))]
    assert widths[0] < widths[1] < widths[2]
    ratio80 = widths[0] / widths[1]
    assert ratio80 == pytest.approx(stats.t_quantile(0.8, 3) / stats.t_quantile(0.95, 3), rel=1e-9)


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
