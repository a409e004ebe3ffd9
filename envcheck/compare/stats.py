"""The statistics only a comparison has: time ratios, intervals, verdicts, geometric means, from samples, log
ratios and labels (docs/compare.md). An interval is ``log ratio +- t(confidence, df) x sqrt(within_se^2 +
floor^2)``: within-run noise (bootstrapped medians) plus the **noise floor** from the reports' repeats or shipped
for the GPU model, never from the two runs judged. The rows are one family (Benjamini-Hochberg); geometric means
treat the cases of one kind as sharing its floor. A resampled median is an order statistic, ``U(m) ~ Beta(m,
n-m+1)``: the index pairs are drawn once per n, so each case costs one gather and a weighted variance.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from envcheck.model import Note

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20261121
MIN_SAMPLES = 5  # below this an interval from the samples means little: no verdict is given
PRACTICAL = 0.02  # a change smaller than 2% is never called faster/slower, however significant
MIN_FLOOR_CASES = 5  # rows a shipped floor of a kind needs
# Where a row's run-to-run allowance came from, most trusted first (NoiseFloor.source).
ALLOWANCE_SOURCES = ("repeats", "shipped")
CORRECTION = "benjamini-hochberg"  # how a family of rows is controlled for multiple testing
_CHUNK = 256  # timings gathered at once: bounds the temporary (chunk x distinct pairs) array


def normal_quantile(confidence: float) -> float:
    """Two-sided normal critical value: z with P(|Z| < z) = confidence."""
    if not (0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return statistics.NormalDist().inv_cdf((1.0 + confidence) / 2.0)


def _t_central(t: float, df: int) -> float:
    """P(|T| < t) for Student's t, integer ``df`` >= 1, t >= 0: the exact finite series of Abramowitz &
    Stegun 26.7.3-4 in theta = atan(t / sqrt(df)) (no scipy), stopped once its terms no longer count."""
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    # odd df: 2/pi * (theta + sin*cos * (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...));
    # even df: sin * (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    odd = df % 2
    term, total = 1.0, 1.0 if df > 1 else 0.0
    for k in range(1, (df - odd) // 2):
        term *= c2 * (2 * k - 1 + odd) / (2 * k + odd)
        total += term
        if term < 1e-17 * total:
            break
    return min(1.0, 2.0 / math.pi * (theta + s * math.cos(theta) * total) if odd else s * total)


_T_SERIES_MAX_DF = 200


@functools.lru_cache(maxsize=1024)
def t_quantile(confidence: float, df: int) -> float:
    """Two-sided Student-t critical value for integer ``df`` >= 1: ``_t_central`` inverted by bisection up
    to ``_T_SERIES_MAX_DF``, the Cornish-Fisher expansion beyond (A&S 26.7.5; error below 1e-9 there)."""
    z = normal_quantile(confidence)  # checks the confidence
    if df < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    if df == 1:  # Cauchy: closed form
        return math.tan(math.pi * confidence / 2.0)
    if df > _T_SERIES_MAX_DF:
        g = ((z**3 + z) / 4,
             (5 * z**5 + 16 * z**3 + 3 * z) / 96,
             (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
             (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)
        return float(z + sum(gi / df ** (i + 1) for i, gi in enumerate(g)))
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


def _quantile(confidence: float, df: int | None) -> float:
    """t for ``df`` degrees of freedom; the normal quantile when df is None (nothing estimated)."""
    return normal_quantile(confidence) if df is None else t_quantile(confidence, df)


@functools.lru_cache(maxsize=4096)
def _median_pairs(n: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (lower, upper) middle order-statistic indices of ``resamples`` bootstrap resamples of n values,
    and the share of resamples drawing each pair (equal indices for odd n)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, n]))
    if n % 2:
        m = (n + 1) // 2
        lo = np.minimum((rng.beta(m, n - m + 1, resamples) * n).astype(np.int64), n - 1)
        hi = lo
    else:
        m = n // 2
        u = rng.beta(m, n - m + 1, resamples)
        # The next order statistic: u plus (1 - u) x Beta(1, n - m), whose inverse CDF is 1 - v^(1/(n-m)).
        u2 = u + (1.0 - u) * -np.expm1(np.log(rng.random(resamples)) / (n - m))
        lo = np.minimum((u * n).astype(np.int64), n - 1)
        hi = np.minimum((u2 * n).astype(np.int64), n - 1)
    pairs, counts = np.unique(lo * n + hi, return_counts=True)
    return pairs // n, pairs % n, counts / resamples


def median_log_se(timings: Sequence[np.ndarray], *, lengths: Sequence[int] | None = None,
                  resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """Bootstrap standard error of log(median) of each array (NaN below ``MIN_SAMPLES``), one resampling pattern
    per length. ``lengths``: when ``timings`` makes each array as it is read (one batch held at once)."""
    sizes = lengths if lengths is not None else [len(x) for x in timings]
    out = np.full(len(sizes), np.nan)
    by_n: dict[int, list[int]] = {}
    for i, n in enumerate(sizes):
        if n >= MIN_SAMPLES:
            by_n.setdefault(n, []).append(i)
    for n, idx in by_n.items():
        lo, hi, w = _median_pairs(n, resamples, seed)
        for start in range(0, len(idx), _CHUNK):
            part = idx[start:start + _CHUNK]
            # float32 as stored: sorting and gathering need no wider type; the logs do.
            x = np.stack([timings[i] for i in part]).astype(np.float32, copy=False)
            x.sort(axis=1)
            logs = np.log((x[:, lo].astype(np.float64) + x[:, hi]) * 0.5)
            mean = logs @ w
            var = ((logs - mean[:, None]) ** 2) @ w
            out[part] = np.sqrt(np.maximum(var, 0.0))
    return out


@dataclass(frozen=True)
class NoiseFloor:
    """The run-to-run noise of one case (a standard deviation of its log time ratio), its source, the kind it was
    learned for and its degrees of freedom; every case of a kind shares it."""

    log_sd: float
    source: str
    kind: tuple[str, ...]
    cases: int
    df: int | None

    @property
    def pct(self) -> float:
        """The floor as a percentage of the time (one standard deviation)."""
        return math.expm1(self.log_sd) * 100.0

    @property
    def includes_within(self) -> bool:
        """Repeats measure the run-to-run spread of whole medians: within-run noise is in it."""
        return self.source == "repeats"


NO_FLOOR = NoiseFloor(0.0, "none", (), 0, None)


@dataclass(frozen=True)
class Repeats:
    """One side's independent repeats of a case: mean and sample variance of their log medians (``count`` >= 2)."""

    mean_log: float
    var_log: float
    count: int


def repeats_of(samples: np.ndarray, passes: Sequence[int]) -> Repeats | None:
    """The repeats of one timing, its samples split in ``passes`` (lengths); None for fewer than two."""
    if len(passes) < 2:
        return None
    bounds = np.cumsum((0, *passes))
    if bounds[-1] != len(samples):
        raise ValueError(f"passes add up to {bounds[-1]} samples, the timing has {len(samples)}")
    logs = np.array([math.log(float(np.median(samples[lo:hi]))) for lo, hi in zip(bounds[:-1], bounds[1:],
                                                                                  strict=True)])
    return Repeats(float(logs.mean()), float(logs.var(ddof=1)), len(logs))


def repeat_floor(base: Repeats | None, other: Repeats | None) -> NoiseFloor | None:
    """The run-to-run noise of a log ratio from the repeats (None without any): Welch's variance of the
    difference of the two means; one side only: the other's single run varies as one of its repeats."""
    if base is None and other is None:
        return None
    if base is not None and other is not None:
        va, vb = base.var_log / base.count, other.var_log / other.count
        var = va + vb
        denom = va**2 / (base.count - 1) + vb**2 / (other.count - 1)
        df = max(1, math.floor(var**2 / denom)) if denom > 0 else base.count + other.count - 2
        count = base.count + other.count
    else:
        one = base if base is not None else other
        assert one is not None
        var = one.var_log * (1.0 + 1.0 / one.count)
        df, count = one.count - 1, one.count
    return NoiseFloor(math.sqrt(var), "repeats", (), count, df)


def with_run_share(repeats: NoiseFloor, base: Repeats | None, other: Repeats | None, single: NoiseFloor,
                   within_se: tuple[float, float] = (math.nan, math.nan)) -> NoiseFloor:
    """The repeats' allowance plus the run-level share of ``single`` (a shipped floor): its variance
    ``2 s_run^2 + s_a^2 + s_b^2`` less each side's repeat-to-repeat variance beyond within-run noise
    (``within_se``; NaN: unknown) leaves what moves a whole run and its repeats alike (Satterthwaite's df)."""
    sides = []
    for r, se in zip((base, other), within_se, strict=True):
        if r is not None:
            sides.append(max(0.0, r.var_log - (se * se * r.count if math.isfinite(se) else 0.0)))
    var_repeat = math.fsum(sides) * (2 / len(sides)) if sides else 0.0
    run_var = max(0.0, single.log_sd**2 - var_repeat)
    if run_var == 0.0:
        return repeats
    mean_var = repeats.log_sd**2
    var = run_var + mean_var
    parts = [(run_var, single.df), (mean_var, repeats.df)]
    denom = math.fsum(v**2 / d for v, d in parts if d)
    df = max(1, math.floor(var**2 / denom)) if denom > 0 else None
    return NoiseFloor(math.sqrt(var), "repeats", single.kind, repeats.cases, df)


NOT_JUDGED = "not judged"  # a ratio shown without a verdict: no noise floor covers the row


@dataclass(frozen=True)
class RatioInterval:
    """``ratio`` = median(other) / median(baseline) with its interval; ``within_log_se``: the samples' own
    standard error of log(ratio) (None below ``MIN_SAMPLES``), ``floor`` the run-to-run noise added to it."""

    ratio: float
    low: float | None
    high: float | None
    log_se: float | None
    n_base: int
    n_other: int
    within_log_se: float | None = None
    floor: NoiseFloor | None = None

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def excludes_one(self) -> bool:
        return self.has_interval and (self.low > 1.0 or self.high < 1.0)  # type: ignore[operator]


@dataclass(frozen=True)
class RatioRow:
    """A compared row (a case, a collective, a copy): other / baseline time, its interval (``floor`` included),
    verdict and ``reasons`` when not comparable or not judged; ``judged``: held against a noise floor."""

    verdict: str  # faster | slower | same | uncertain | not comparable | not judged
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    n_base: int = 0
    n_other: int = 0
    within_log_se: float | None = None
    floor: NoiseFloor | None = None
    reasons: tuple[Note, ...] = ()
    log_se: float | None = None

    @property
    def compared(self) -> bool:
        return self.ratio is not None and self.verdict != "not comparable"

    @property
    def judged(self) -> bool:
        return self.compared and self.verdict != NOT_JUDGED

    def interval(self) -> RatioInterval | None:
        if self.ratio is None:
            return None
        return RatioInterval(self.ratio, self.low, self.high, self.log_se, self.n_base, self.n_other,
                             self.within_log_se, self.floor)


def interval(ratio: float, within_se: float | None, floor: NoiseFloor, n_base: int, n_other: int,
             confidence: float = CONFIDENCE) -> RatioInterval:
    """The interval of one ratio: within-run and run-to-run noise combined (module docstring)."""
    has_within = within_se is not None and math.isfinite(within_se)
    if not has_within and not floor.includes_within:
        return RatioInterval(ratio, None, None, None, n_base, n_other, None, floor)
    # Repeats measured whole medians: within-run noise is in their floor, even with too few samples to bootstrap.
    se = floor.log_sd if floor.includes_within else math.sqrt(within_se**2 + floor.log_sd**2)  # type: ignore[operator]
    within_se = within_se if has_within else None
    half = _quantile(confidence, floor.df) * se
    log_r = math.log(ratio)
    # Keep the point estimate inside its interval against rounding in exp().
    low = min(math.exp(log_r - half), ratio)
    high = max(math.exp(log_r + half), ratio)
    return RatioInterval(ratio, low, high, se, n_base, n_other, within_se, floor)


def within_interval(base: Sequence[float], other: Sequence[float], *, confidence: float = CONFIDENCE,
                    resamples: int = RESAMPLES, seed: int = SEED) -> RatioInterval:
    """Ratio of medians other/base with an interval of within-run noise only: what two sets of samples can say."""
    a = np.asarray(base, dtype=np.float64)
    b = np.asarray(other, dtype=np.float64)
    if not len(a) or not len(b):
        raise ValueError("both sides need at least one sample")
    if min(a.min(), b.min()) <= 0 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("timing samples must be positive and finite")
    ratio = float(np.median(b) / np.median(a))
    se_a, se_b = median_log_se([a, b], resamples=resamples, seed=seed)
    within = float(math.hypot(se_a, se_b)) if math.isfinite(se_a) and math.isfinite(se_b) else None
    return interval(ratio, within, NO_FLOOR, len(a), len(b), confidence)


def verdict(iv: RatioInterval, practical: float = PRACTICAL, significant: bool | None = None) -> str:
    """``slower`` / ``faster`` when significant (``significant``: after the family's correction; else the
    interval excluding 1) and beyond ``practical``; ``same`` otherwise; ``uncertain`` without an interval."""
    if not iv.has_interval:
        return "uncertain"
    if significant is None:
        significant = iv.excludes_one()
    if significant and iv.ratio > 1.0 + practical:
        return "slower"
    if significant and iv.ratio < 1.0 / (1.0 + practical):
        return "faster"
    return "same"


def p_value(iv: RatioInterval) -> float | None:
    """Two-sided p-value of "nothing changed" for one row, from the same t as its interval (None without one)."""
    if not iv.has_interval or iv.log_se is None:
        return None
    if iv.log_se <= 0.0:
        return 0.0 if iv.ratio != 1.0 else 1.0
    z = abs(math.log(iv.ratio)) / iv.log_se
    df = iv.floor.df if iv.floor is not None else None
    if df is None or df > _T_SERIES_MAX_DF:  # the series needs ~df terms; the normal tail is within 1e-3 there
        return 2.0 * (1.0 - statistics.NormalDist().cdf(z))
    return max(0.0, 1.0 - _t_central(z, df))


def judge(rows: Sequence[tuple[float, float | None, NoiseFloor | None, int, int, str]], practical: float,
          confidence: float) -> tuple[list[RatioRow], list[NoiseFloor]]:
    """The one verdict core of every comparison: each (ratio, within-run se, floor, n_base, n_other, why) row's
    interval and verdict (``NOT_JUDGED`` without a floor, ``why`` its reason), the rows with an interval called as
    one family (Benjamini-Hochberg); and the distinct floors they used, largest first."""
    ivs = [interval(r, w, f, nb, no, confidence) if f is not None else RatioInterval(r, None, None, None, nb, no, w)
           for r, w, f, nb, no, _ in rows]
    significant = bh_significant([p_value(iv) for iv in ivs], 1.0 - confidence)
    out = [RatioRow(verdict(iv, practical, sig), iv.ratio, iv.low, iv.high, iv.n_base, iv.n_other,
                    iv.within_log_se, iv.floor, log_se=iv.log_se) if floor is not None
           else RatioRow(NOT_JUDGED, iv.ratio, n_base=iv.n_base, n_other=iv.n_other, within_log_se=iv.within_log_se,
                         reasons=(Note(why),))
           for (_, _, floor, _, _, why), iv, sig in zip(rows, ivs, significant, strict=True)]
    used = {iv.floor for iv in ivs if iv.floor is not None and iv.has_interval}
    return out, sorted(used, key=lambda f: (-f.log_sd, f.source, f.kind))


def bh_significant(pvalues: Sequence[float | None], level: float = 1.0 - CONFIDENCE) -> list[bool]:
    """Benjamini-Hochberg: which rows are significant at false discovery rate ``level``."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(idx)
    out = [False] * len(pvalues)
    if not m:
        return out
    order = sorted(idx, key=lambda i: pvalues[i])  # type: ignore[arg-type, return-value]
    cut = max((rank for rank, i in enumerate(order, start=1) if pvalues[i] <= level * rank / m),  # type: ignore[operator]
              default=0)
    for i in order[:cut]:
        out[i] = True
    return out


@dataclass(frozen=True)
class Geomean:
    """Geometric mean of case ratios, the cases of one kind moving together; ``clusters``: the kinds."""

    ratio: float
    low: float | None
    high: float | None
    count: int
    clusters: int = 1


def geomean(intervals: Sequence[RatioInterval], clusters: Sequence[Hashable] | None = None,
            confidence: float = CONFIDENCE) -> Geomean | None:
    """Geometric-mean ratio of several cases (None for none); ``clusters``: each case's kind (default: its own)."""
    if not intervals:
        return None
    labels: Sequence[Hashable] = clusters if clusters is not None else range(len(intervals))
    if len(labels) != len(intervals):
        raise ValueError("one cluster label per interval")
    n = len(intervals)
    mean = math.fsum(math.log(iv.ratio) for iv in intervals) / n
    ratio = math.exp(mean)
    shifts: dict[Hashable, float] = {}
    for iv, c in zip(intervals, labels, strict=True):
        shifts[c] = shifts.get(c, 0.0) + (iv.floor.log_sd if iv.floor else 0.0)
    if any(not iv.has_interval for iv in intervals):  # an under-sampled case: no interval for the group
        return Geomean(ratio, None, None, n, len(shifts))
    # A kind's floor moves all its cases together: within a kind the standard deviations add, across
    # kinds the variances; within-run noise is each case's own.
    own = math.fsum((0.0 if iv.floor is not None and iv.floor.includes_within
                     else iv.within_log_se if iv.within_log_se is not None else iv.log_se or 0.0) ** 2
                    for iv in intervals)
    var = (math.fsum(s**2 for s in shifts.values()) + own) / n**2
    dfs = [iv.floor.df for iv in intervals if iv.floor is not None and iv.floor.df is not None]
    half = _quantile(confidence, min(dfs) if dfs else None) * math.sqrt(var)
    return Geomean(ratio, min(math.exp(mean - half), ratio), max(math.exp(mean + half), ratio), n, len(shifts))


def geomean_verdict(g: Geomean, practical: float = PRACTICAL) -> str:
    """As ``verdict``, for a geometric mean (its ratio lies inside its interval)."""
    return verdict(RatioInterval(g.ratio, g.low, g.high, None, g.count, g.count), practical)
