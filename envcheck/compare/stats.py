"""Confidence intervals for the ratio of two medians (other / baseline).

Method: percentile bootstrap of the ratio of medians, each side resampled
independently (Efron & Tibshirani, ch. 13). Timing samples are skewed and carry
outliers (a preempted launch, a clock dip), so the median is the location we
quote and a t-test's normality assumption does not hold.

Speed: a resampled median depends only on the *ranks* drawn, not on the values.
With the samples sorted, the median of a resample is the value at the middle
order statistic(s) of the drawn indices. Those index order statistics are drawn
once per (sample count, side) and reused by every case of that size, so a case
costs two gathers of ``resamples`` values instead of ``resamples`` sorts: three
thousand cases take well under a second. Cases of equal size therefore share
resampling patterns; each interval is still a valid bootstrap interval on its
own, but intervals of different cases are not independent draws.

What a per-case interval covers: the samples of one case are taken back to back
in one run, and the bootstrap treats them as independent draws. The interval
therefore reflects within-run sampling noise only; run-to-run drift (clocks
under a power cap, thermals, another tenant) is usually larger and is not in
it. A tight [1.059, 1.059] says the two runs differed, not that a rerun would.

Geometric means (per op, overall) take their interval from the spread of the
per-case log ratios *between* cases: a Student-t interval on the mean log ratio
with n-1 degrees of freedom. The sample variance of the log ratios contains each
case's own sampling noise as well as real case-to-case differences, so it is the
honest spread; summing per-case bootstrap variances instead would treat hundreds
of cases as repeated measurements of one number and collapse the interval.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20261121
MIN_SAMPLES = 5  # below this an interval from the samples means little: no verdict is given
PRACTICAL = 0.02  # a change smaller than 2% is never called faster/slower, however significant



def normal_quantile(confidence: float) -> float:
    """Two-sided normal critical value: z with P(|Z| < z) = confidence."""
    _check_confidence(confidence)
    return statistics.NormalDist().inv_cdf((1.0 + confidence) / 2.0)


def _check_confidence(confidence: float) -> None:
    if not (0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def _t_central(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer ``df`` >= 1, t >= 0.

    Exact finite series (Abramowitz & Stegun 26.7.3-26.7.4) in theta = atan(t / sqrt(df)),
    so no scipy is needed. The terms shrink geometrically (ratio <= cos^2 theta), so the
    loop stops early once they no longer change the sum.
    """
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:  # odd: 2/pi * (theta + sin*cos * (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
            if term < 1e-17 * total:
                break
        return min(1.0, 2.0 / math.pi * (theta + s * math.cos(theta) * total))
    term, total = 1.0, 1.0  # even: sin * (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
        if term < 1e-17 * total:
            break
    return min(1.0, s * total)


_T_SERIES_MAX_DF = 200


def t_quantile(confidence: float, df: int) -> float:
    """Two-sided Student-t critical value: t with P(|T| < t) = confidence, for integer ``df`` >= 1.

    scipy is not a dependency. Up to ``_T_SERIES_MAX_DF`` degrees of freedom the exact
    CDF series of ``_t_central`` is inverted by bisection (to ~1e-12 relative), bracketed
    by the normal quantile below and a doubling search above (t > z for every finite df).
    Beyond it the Cornish-Fisher expansion of t in 1/df (Abramowitz & Stegun 26.7.5, four
    terms) is used: its error there is below 1e-9 for confidence up to 0.999, and the series
    would need ~df terms.
    """
    _check_confidence(confidence)
    if df < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    if df == 1:  # Cauchy: closed form
        return math.tan(math.pi * confidence / 2.0)
    z = normal_quantile(confidence)
    if df > _T_SERIES_MAX_DF:
        g = ((z**3 + z) / 4,
             (5 * z**5 + 16 * z**3 + 3 * z) / 96,
             (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
             (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)
        return z + sum(gi / df ** (i + 1) for i, gi in enumerate(g))
    lo = z
    hi = lo * 2.0
    while _t_central(hi, df) < confidence:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if _t_central(mid, df) < confidence:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return (lo + hi) / 2.0


@dataclass(frozen=True)
class RatioInterval:
    """``ratio`` = median(other) / median(baseline) with its bootstrap interval [low, high].

    ``low``/``high`` are None when either side has fewer than ``MIN_SAMPLES`` samples.
    ``log_se`` is the bootstrap standard error of log(ratio), used to combine cases.
    """

    ratio: float
    low: float | None
    high: float | None
    log_se: float | None
    n_base: int
    n_other: int

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def excludes_one(self) -> bool:
        return self.has_interval and (self.low > 1.0 or self.high < 1.0)  # type: ignore[operator]


@functools.lru_cache(maxsize=256)
def _median_index_table(n: int, side: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Middle order statistics (lower, upper) of ``resamples`` draws of n indices from range(n).

    For odd n both are the same index; for even n the median is their mean, as in
    ``statistics.median`` and numpy's linear interpolation.
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, n, side]))
    idx = rng.integers(0, n, size=(resamples, n), dtype=np.int32)
    lo_k, hi_k = (n - 1) // 2, n // 2
    part = np.partition(idx, (lo_k, hi_k) if lo_k != hi_k else lo_k, axis=1)
    return part[:, lo_k].copy(), part[:, hi_k].copy()


def _median(sorted_xs: np.ndarray) -> float:
    n = len(sorted_xs)
    return float((sorted_xs[(n - 1) // 2] + sorted_xs[n // 2]) / 2)


def _boot_medians(sorted_xs: np.ndarray, side: int, resamples: int, seed: int) -> np.ndarray:
    lo, hi = _median_index_table(len(sorted_xs), side, resamples, seed)
    return (sorted_xs[lo] + sorted_xs[hi]) / 2


def ratio_interval(
    base: Sequence[float],
    other: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> RatioInterval:
    """Ratio of medians other/base with a percentile bootstrap interval (seeded: same input, same answer)."""
    if not base or not other:
        raise ValueError("both sides need at least one sample")
    a = np.sort(np.asarray(base, dtype=np.float64))
    b = np.sort(np.asarray(other, dtype=np.float64))
    if a[0] <= 0 or b[0] <= 0 or not (np.isfinite(a[-1]) and np.isfinite(b[-1])):
        raise ValueError("timing samples must be positive and finite")
    ratio = _median(b) / _median(a)
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return RatioInterval(ratio, None, None, None, len(a), len(b))
    log_r = np.log(_boot_medians(b, 1, resamples, seed)) - np.log(_boot_medians(a, 0, resamples, seed))
    alpha = (1 - confidence) / 2
    q_lo, q_hi = np.quantile(log_r, [alpha, 1 - alpha])
    # The point estimate must lie inside its interval even when the bootstrap
    # distribution is lumpy (few distinct values): widen rather than mislead.
    low = min(math.exp(float(q_lo)), ratio)
    high = max(math.exp(float(q_hi)), ratio)
    return RatioInterval(ratio, low, high, float(np.std(log_r)), len(a), len(b))


def verdict(iv: RatioInterval, practical: float = PRACTICAL) -> str:
    """``slower`` / ``faster`` when the interval excludes 1.0 AND the change exceeds ``practical``;
    ``same`` otherwise; ``uncertain`` when there are too few samples for an interval.

    The practical threshold keeps rows with thousands of very stable samples from
    being called slower over a 0.3% shift nobody can act on.
    """
    if not iv.has_interval:
        return "uncertain"
    if iv.low > 1.0 and iv.ratio > 1.0 + practical:  # type: ignore[operator]
        return "slower"
    if iv.high < 1.0 and iv.ratio < 1.0 / (1.0 + practical):  # type: ignore[operator]
        return "faster"
    return "same"


@dataclass(frozen=True)
class Geomean:
    """Geometric mean of ratios, with an interval from the between-case spread.

    The interval is a Student-t interval on the mean log ratio (n-1 degrees of
    freedom, standard error = sample standard deviation of the log ratios / sqrt(n)),
    exponentiated. Cases that agree give a tight interval, cases that scatter a wide
    one, whatever each case's own bootstrap width; identical runs give exactly [1, 1].
    With one case the interval is that case's own bootstrap interval.
    ``count`` is how many ratios stand behind the number.
    """

    ratio: float
    low: float | None
    high: float | None
    count: int

    def excludes_one(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 1.0 or self.high < 1.0)


def geomean(intervals: Sequence[RatioInterval], confidence: float = CONFIDENCE) -> Geomean | None:
    """Geometric-mean ratio of several cases, or None when there are none."""
    if not intervals:
        return None
    if len(intervals) == 1:  # one case: its own bootstrap interval, not a normal approximation of it
        iv = intervals[0]
        return Geomean(iv.ratio, iv.low, iv.high, 1)
    logs = [math.log(iv.ratio) for iv in intervals]
    n = len(logs)
    mean = math.fsum(logs) / n
    if any(not iv.has_interval for iv in intervals):  # an under-sampled case: no interval, as for a single case
        return Geomean(math.exp(mean), None, None, n)
    sd = statistics.stdev(logs)
    half = t_quantile(confidence, n - 1) * sd / math.sqrt(n)
    # Keep the point estimate inside its interval against rounding in exp().
    ratio = math.exp(mean)
    return Geomean(ratio, min(math.exp(mean - half), ratio), max(math.exp(mean + half), ratio), n)


def geomean_verdict(g: Geomean, practical: float = PRACTICAL) -> str:
    """As ``verdict``, for a geometric mean."""
    if g.low is None or g.high is None:
        return "uncertain"
    if g.low > 1.0 and g.ratio > 1.0 + practical:
        return "slower"
    if g.high < 1.0 and g.ratio < 1.0 / (1.0 + practical):
        return "faster"
    return "same"
