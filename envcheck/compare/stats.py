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
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20261121
MIN_SAMPLES = 5  # below this an interval from the samples means little: no verdict is given
PRACTICAL = 0.02  # a change smaller than 2% is never called faster/slower, however significant

_Z = {0.90: 1.6448536269514722, 0.95: 1.959963984540054, 0.99: 2.5758293035489004}


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
    """Geometric mean of ratios, with a normal-approximation interval on the log scale.

    The interval treats cases as independent measurements: each case's log-ratio
    variance comes from its bootstrap; the mean's variance is their sum / count².
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
    mean = sum(logs) / len(logs)
    ses = [iv.log_se for iv in intervals]
    if any(se is None for se in ses):
        return Geomean(math.exp(mean), None, None, len(logs))
    se = math.sqrt(sum(s * s for s in ses)) / len(logs)  # type: ignore[operator]
    z = _Z.get(round(confidence, 2), 1.959963984540054)
    return Geomean(math.exp(mean), math.exp(mean - z * se), math.exp(mean + z * se), len(logs))


def geomean_verdict(g: Geomean, practical: float = PRACTICAL) -> str:
    """As ``verdict``, for a geometric mean."""
    if g.low is None or g.high is None:
        return "uncertain"
    if g.low > 1.0 and g.ratio > 1.0 + practical:
        return "slower"
    if g.high < 1.0 and g.ratio < 1.0 / (1.0 + practical):
        return "faster"
    return "same"
