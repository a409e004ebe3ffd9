"""The statistics only a comparison has: time ratios, their intervals, verdicts, geometric means.

Every other number a diff shows (throughput, shares of ceilings, flags, conditions) comes from
``envcheck.analysis``. This module knows nothing of reports: it takes samples, log ratios and
labels, and returns numbers.

**What a ratio's interval has to cover.** A case's time ratio (other / baseline median) moves
for two reasons besides a real change:

1. *within-run noise*: the median of one run's samples is itself uncertain. Measured here by
   bootstrapping each side's samples (``median_log_se``).
2. *run-to-run noise*: a second run of the same code on the same kind of machine lands a
   little elsewhere: another physical GPU, clocks under a power cap, the host's launch
   latency, the state the GPU was left in. This is usually the larger of the two, and the
   samples of one run cannot show it: the samples of a case are taken back to back, in one
   window. An interval built from (1) alone says "these two runs differed", not "a rerun
   would differ"; that is how a diff of two runs of the same PyTorch called 8 of 84 PyTorch
   rows significant (up to +5.8%) with intervals 0.13% wide.

So each ratio gets a **noise floor**, the standard deviation (log scale) of its run-to-run
noise, from the first of these that is at hand (``NoiseFloor.source``):

1. ``repeats``: the reports' own independent repeats of the case (``envcheck run --repeat N``:
   N fresh workers in interleaved passes, each repeat's samples kept; bench/repeat.py). Each
   repeat is a run, so the spread of the repeats' log medians *is* run-to-run noise, within-run
   noise included, measured without looking at the other report. The ratio is that of the two
   sides' mean log medians, its variance ``s_a^2/N_a + s_b^2/N_b`` with Welch's degrees of
   freedom; a side without repeats is taken to vary as much as one repeat of the other.
   Repeats of one run share what moves a whole run (the GPU's state, the process), which their
   spread cannot show: where a floor is shipped for the GPU model and kind of case (2. below;
   learned from single runs, so its variance is twice that run-level variance plus each side's
   repeat-to-repeat variance), what is left of it after the repeats' own variances is added
   (``with_run_share``). On the controls with repeats of 2026-11-26 (H100 and H200, 48 rows
   each) the repeats alone left 3 of 48 intervals excluding 1 on each, against at most 5%; with
   the run-level share 1 of 48 on each.
2. ``shipped``: the floor of this GPU model and kind of case learned from committed
   back-to-back controls (``compare/shipped.py``, ``noise_floors.json``), for two reports of
   one physical GPU without repeats. Added to the within-run noise below.
3. With neither, the floor is estimated from the two runs being judged (the scheme below,
   ``controls`` / ``spread`` / ``none``): the least trustworthy, named as such in the output.

The estimate from the pair has two parts:

* **scatter**: cases of one *kind* (op and size category: a 1 us launch-bound vector add
  and a power-capped 8192^3 matmul drift very differently) scatter around the kind's median
  ratio. Measured robustly, as 1.4826 x the median absolute deviation of the kind's log
  ratios less the typical within-run variance, so a minority of real changes in the kind
  does not inflate it. Taken over the kind when it has at least ``MIN_FLOOR_CASES`` rows,
  else over its op, else its size category, else every row.
* **shift**: a kind as a whole moves between runs (another physical GPU launches 2% faster;
  the power cap lands elsewhere), and every case of the kind shares that move. Measured on
  **controls**, rows whose implementation did not change between the reports (same PyTorch
  for torch rows, same Triton and kernel for Triton rows, both for torch.compile; same
  driver, CUDA, GPU model, envcheck and settings; another physical GPU of the same model is
  allowed, since a rerun meets exactly that: ``compare/controls.py``). Each kind's median
  control ratio is taken against the median of all controls, and the robust scatter of those
  kind medians is the shift. The controls' common move is not noise: a whole machine 10%
  slower with nothing changed is a finding, and relu alone 30% slower stands out against
  the other kinds. Without controls (another GPU model, a new driver) the shift is unknown
  and left out: ``NoiseFloor.source`` says ``spread`` instead of ``controls``.

A case's interval is then

    log ratio +- t(confidence, df) x sqrt(within_se^2 + floor^2)     (repeats: x floor alone)

where df counts what the floor was estimated from (the repeats; the shipped floor's rows; for
the pair's estimate, the rows or kinds at the MAD's efficiency, 0.37: a median absolute
deviation is as precise as a standard deviation from about a third as many normal values), so
a floor estimated from little gives a wider interval. With fewer than ``MIN_FLOOR_CASES``
comparable rows and nothing else there is no floor, and the interval covers within-run noise
only (``source`` ``none``).

**Many rows at once.** A diff tests every row: at 95%, 250 rows where nothing changed give
about 12 intervals excluding 1 by chance. The rows with an interval are one family; each row's
p-value (``p_value``, from the same t as its interval) goes through Benjamini-Hochberg
(``bh_significant``) at a false discovery rate of 1 - confidence, and only a row significant
after that, and beyond the practical threshold, is called faster or slower. When nothing
changed, the chance of calling any row is then at most 5% however many rows there are; when
some did, most of them are still found (tests/test_diff_noise.py plants both). The intervals
shown are each row's own, before the correction.

Measured on the committed negative control of 2026-11-22 (two H200 runs on two physical GPUs,
same PyTorch; only envcheck's Triton matmul kernels changed), with the estimate from the pair:
2 of the 84 PyTorch rows were called faster or slower and 4 intervals excluded 1, against 8 and
71 of 84 with within-run intervals only. A 10% slowdown planted in copies of the later run
(3 draws each, calls corrected over the ~250 rows) is found (called slower) in 97% of the slowed
rows when it hits a quarter of the Triton rows and Triton is marked as upgraded, 75% when it
hits a quarter of the PyTorch rows and PyTorch is marked as upgraded, 76% of a quarter of the
PyTorch rows and 6 of 8 of one row in ten with nothing marked changed; every relu row 30%
slower: all 40 found. Rows with a wide
floor of their own (torch.compile at 1 MiB varies by 15% between runs) are where a 10% change
goes unseen.

**Geometric means** (per op, overall) use the same two-level model: the cases of one kind
share its shift, so within a kind their shift standard deviations add, while across kinds,
and for each case's own scatter and within-run noise, variances add::

    var(mean log ratio) = (sum over kinds of (n_kind x shift)^2 + sum over cases of
                           (scatter^2 + within_se^2)) / n^2

so 200 cases of a handful of kinds are never taken for 200 independent measurements, and a
kind that moved together moves the mean by its whole shift. A shift common to every kind of
one run (the whole machine a little slower) cannot be told from a real change by two
reports; repetitions would measure it.

**Within-run standard errors, fast.** A resampled median depends only on which order
statistics of the sorted samples are drawn. For n samples the resample's median is the
m-th order statistic of n uniform draws, ``U(m) ~ Beta(m, n - m + 1)``, mapped to the index
``floor(n U(m))``; for even n the next one is ``U(m) + (1 - U(m)) Beta(1, n - m)``. So the
``RESAMPLES`` index pairs are drawn once per sample count n (not n draws per resample), kept
as the distinct pairs with their weights, and every case with n samples costs one gather of
those pairs and a weighted variance: exactly the percentile bootstrap's variance of the log
median, for a 20,000-case report in well under a second.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20261121
MIN_SAMPLES = 5  # below this an interval from the samples means little: no verdict is given
PRACTICAL = 0.02  # a change smaller than 2% is never called faster/slower, however significant
MIN_FLOOR_CASES = 5  # rows (or kinds) a noise-floor estimate needs
MIN_KIND_CONTROLS = 3  # controls a kind needs for its median to count towards the kind shift
MAD_TO_SD = 1.4826  # MAD x this = the standard deviation, for normal data
# Where a row's run-to-run allowance came from, most trusted first (NoiseFloor.source).
ALLOWANCE_SOURCES = ("repeats", "shipped", "controls", "spread", "none")
CORRECTION = "benjamini-hochberg"  # how a family of rows is controlled for multiple testing
MAD_EFFICIENCY = 0.37  # the MAD's asymptotic efficiency against the standard deviation, normal data
_CHUNK = 256  # timings gathered at once: bounds the temporary (chunk x distinct pairs) array


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


@functools.lru_cache(maxsize=1024)
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


# --------------------------------------------------------------------------- within-run noise


@functools.lru_cache(maxsize=4096)
def _median_pairs(n: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (lower, upper) middle order-statistic indices of ``resamples`` bootstrap
    resamples of n values, and the share of resamples drawing each pair (see the module
    docstring). For odd n the two indices are equal."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, n]))
    if n % 2:
        m = (n + 1) // 2
        lo = np.minimum((rng.beta(m, n - m + 1, resamples) * n).astype(np.int64), n - 1)
        hi = lo
    else:
        m = n // 2
        u = rng.beta(m, n - m + 1, resamples)
        # The next order statistic: the smallest of the n - m draws above u, i.e. u plus
        # (1 - u) x Beta(1, n - m), whose inverse CDF is 1 - v^(1/(n-m)).
        u2 = u + (1.0 - u) * -np.expm1(np.log(rng.random(resamples)) / (n - m))
        lo = np.minimum((u * n).astype(np.int64), n - 1)
        hi = np.minimum((u2 * n).astype(np.int64), n - 1)
    pairs, counts = np.unique(lo * n + hi, return_counts=True)
    return pairs // n, pairs % n, counts / resamples


def median_log_se(timings: Sequence[np.ndarray], *, lengths: Sequence[int] | None = None,
                  resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """Bootstrap standard error of log(median) of each array of samples (NaN for fewer than
    ``MIN_SAMPLES``). Arrays of one length are handled together; every array of length n
    uses the same resampling pattern, so results are reproducible and independent of order.
    ``lengths``: the arrays' lengths, when ``timings`` makes each array only as it is read
    (then only one batch of them is ever held at once)."""
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


# --------------------------------------------------------------------------- run-to-run noise


@dataclass(frozen=True)
class NoiseFloor:
    """The run-to-run noise of one case, as a standard deviation of its log time ratio.

    Two parts (module docstring): ``spread_sd``, how the cases of its kind scatter around the
    kind's median, and ``shift_sd``, how far a kind as a whole moves between runs, which every
    case of the kind shares. ``log_sd`` combines them. ``source``, most trusted first:
    ``repeats`` (the reports' own independent repeats of the case: ``log_sd`` is the whole
    standard error of the log ratio, within-run noise included; ``cases`` counts the repeats),
    ``shipped`` (the noise floor of this GPU model and kind of case learned from committed
    back-to-back controls, ``noise_floors.json``), then, estimated from the two runs judged
    (neither of the above at hand): ``controls`` (the shift was measured on rows whose
    implementation did not change), ``spread`` (no controls: only the scatter is covered) or
    ``none`` (too few rows: only within-run noise is covered).
    ``kind``: what the scatter was estimated over, most specific first (("matmul", "large"),
    ("matmul",), ("large",), or () for every row), over ``cases`` rows; ``kinds``: the kinds
    the shift was estimated over; ``df``: degrees of freedom of the estimate.
    """

    log_sd: float
    source: str
    kind: tuple[str, ...]
    cases: int
    df: int | None
    spread_sd: float = 0.0
    shift_sd: float = 0.0
    kinds: int = 0

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
class FloorRow:
    """One comparable case, as the floor estimate sees it. ``kinds``: the kinds it belongs to,
    most specific first (each a tuple of labels; () is every row). ``control``: its
    implementation did not change between the two reports."""

    log_ratio: float
    within_se: float
    kinds: tuple[tuple[str, ...], ...]
    control: bool


def _mad_df(n: int) -> int:
    """Degrees of freedom of a MAD-based scale from n values: the MAD is as precise as a
    standard deviation from ``MAD_EFFICIENCY`` times as many normal values."""
    return max(1, round(MAD_EFFICIENCY * (n - 1)))


def _spread(rows: Sequence[FloorRow]) -> tuple[float, int]:
    """Robust scatter of the rows' log ratios around their median, less within-run noise."""
    lr = np.array([r.log_ratio for r in rows])
    se = np.array([r.within_se for r in rows])
    mad_sd = MAD_TO_SD * float(np.median(np.abs(lr - np.median(lr))))
    return math.sqrt(max(0.0, mad_sd**2 - float(np.median(se**2)))), _mad_df(len(rows))


def _shift(rows: Sequence[FloorRow]) -> tuple[float, int, int] | None:
    """How far kinds of controls move as a whole: the robust scatter of each kind's median
    control log ratio around the median of all controls (sd, df, kinds), or None when fewer
    than ``MIN_FLOOR_CASES`` kinds have ``MIN_KIND_CONTROLS`` controls."""
    controls = [r for r in rows if r.control]
    if not controls:
        return None
    centre = float(np.median([r.log_ratio for r in controls]))
    by_kind: dict[tuple[str, ...], list[float]] = {}
    for r in controls:
        by_kind.setdefault(r.kinds[0], []).append(r.log_ratio)
    medians = np.array([np.median(v) for v in by_kind.values() if len(v) >= MIN_KIND_CONTROLS]) - centre
    if len(medians) < MIN_FLOOR_CASES:
        return None
    return MAD_TO_SD * float(np.median(np.abs(medians))), _mad_df(len(medians)), len(medians)


def noise_floors(rows: Sequence[FloorRow]) -> list[NoiseFloor]:
    """The noise floor of every row (see the module docstring), in order."""
    members: dict[tuple[str, ...], list[FloorRow]] = {}
    for r in rows:
        for k in r.kinds:
            members.setdefault(k, []).append(r)
    spreads: dict[tuple[str, ...], tuple[float, int] | None] = {}

    def spread(kind: tuple[str, ...]) -> tuple[float, int] | None:
        if kind not in spreads:
            pool = members[kind]
            spreads[kind] = _spread(pool) if len(pool) >= MIN_FLOOR_CASES else None
        return spreads[kind]

    shift = _shift(rows)
    out = []
    for r in rows:
        kind = next((k for k in r.kinds if spread(k) is not None), None)
        if kind is None and shift is None:
            out.append(NO_FLOOR)
            continue
        sp_sd, sp_df = spread(kind) if kind is not None else (0.0, None)  # type: ignore[misc]
        sh_sd, sh_df, kinds = shift if shift is not None else (0.0, None, 0)
        dfs = [d for d in (sp_df, sh_df) if d is not None]
        out.append(NoiseFloor(math.hypot(sp_sd, sh_sd), "controls" if shift is not None else "spread",
                              kind if kind is not None else (), len(members[kind]) if kind is not None else 0,
                              min(dfs), sp_sd, sh_sd, kinds))
    return out


# --------------------------------------------------------------------------- repeats


@dataclass(frozen=True)
class Repeats:
    """One side's independent repeats of a case: the mean and sample variance of the log
    median of each repeat, over ``count`` repeats (at least 2)."""

    mean_log: float
    var_log: float
    count: int


def repeats_of(samples: np.ndarray, passes: Sequence[int]) -> Repeats | None:
    """The repeats of one timing, its samples split in ``passes`` (lengths, in order), or None
    for fewer than two repeats."""
    if len(passes) < 2:
        return None
    bounds = np.cumsum((0, *passes))
    if bounds[-1] != len(samples):
        raise ValueError(f"passes add up to {bounds[-1]} samples, the timing has {len(samples)}")
    logs = np.array([math.log(float(np.median(samples[lo:hi]))) for lo, hi in zip(bounds[:-1], bounds[1:],
                                                                                  strict=True)])
    return Repeats(float(logs.mean()), float(logs.var(ddof=1)), len(logs))


def repeat_floor(base: Repeats | None, other: Repeats | None) -> NoiseFloor | None:
    """The run-to-run noise of a log ratio from the repeats (None when neither side has any).

    Both sides: the variance of the difference of two means of repeat medians, with Welch's
    degrees of freedom. One side only: the other side's single run is taken to vary as much
    as one of its repeats, so var = v (1 + 1/n) with n - 1 degrees of freedom."""
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
    sd = math.sqrt(var)
    # Every case of a kind is taken to share its repeats' moves (a whole pass a little slower):
    # the geometric means then never count a kind's cases as independent (``geomean``).
    return NoiseFloor(sd, "repeats", (), count, df, 0.0, sd, 0)


def with_run_share(repeats: NoiseFloor, base: Repeats | None, other: Repeats | None, single: NoiseFloor,
                   within_se: tuple[float, float] = (math.nan, math.nan)) -> NoiseFloor:
    """The repeats' allowance with the run-level share of ``single`` added (module docstring, 1.).

    ``single``: how far one run's log time moves against another's beyond within-run noise (a
    shipped floor), whose variance is ``2 s_run^2 + s_a^2 + s_b^2``: what moves a whole run, which
    all its repeats share, twice, plus each side's repeat-to-repeat variance beyond within-run noise.
    The latter is the repeats' ``var_log`` less the within-run variance of one repeat's median
    (``within_se``: each side's standard error of its median over all its samples, so one repeat's is
    ``within_se^2 x repeats``; NaN: not known, nothing taken off); a side without repeats varies as
    much as one repeat of the other. What is left of ``single`` is ``2 s_run^2``, added to the variance
    of the repeats' means; degrees of freedom by Satterthwaite. ``repeats`` unchanged when nothing is
    left."""
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
    sd = math.sqrt(var)
    return NoiseFloor(sd, "repeats", single.kind, repeats.cases, df, 0.0, sd, 0)


# --------------------------------------------------------------------------- one case


@dataclass(frozen=True)
class RatioInterval:
    """``ratio`` = median(other) / median(baseline), with its interval [low, high].

    ``within_log_se``: standard error of log(ratio) from the two runs' own samples (None when
    either side has fewer than ``MIN_SAMPLES``: then there is no interval); ``floor``: the
    run-to-run noise added to it; ``log_se``: the two combined, what ``low``/``high`` are
    built from.
    """

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


def interval(ratio: float, within_se: float | None, floor: NoiseFloor, n_base: int, n_other: int,
             confidence: float = CONFIDENCE) -> RatioInterval:
    """The interval of one ratio: within-run and run-to-run noise combined (module docstring)."""
    has_within = within_se is not None and math.isfinite(within_se)
    if not has_within and not floor.includes_within:
        return RatioInterval(ratio, None, None, None, n_base, n_other, None, floor)
    # Repeats measured the spread of whole medians: within-run noise is already in their floor,
    # and an interval stands even where one repeat had too few samples for a bootstrap.
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
    """Ratio of medians other/base with an interval for within-run noise only (no floor):
    what two sets of samples alone can say."""
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
    """``slower`` / ``faster`` when the change is significant AND exceeds ``practical``; ``same``
    otherwise; ``uncertain`` when there are too few samples for an interval.

    ``significant``: the row's call after the family's multiple-testing correction
    (``bh_significant``); when not given, the row alone: its interval excludes 1.0. The
    practical threshold keeps rows with thousands of very stable samples from being called
    slower over a 0.3% shift nobody can act on.
    """
    if not iv.has_interval:
        return "uncertain"
    if significant is None:
        significant = iv.excludes_one()
    if significant and iv.ratio > 1.0 + practical:
        return "slower"
    if significant and iv.ratio < 1.0 / (1.0 + practical):
        return "faster"
    return "same"


# --------------------------------------------------------------------------- many rows at once


def p_value(iv: RatioInterval) -> float | None:
    """Two-sided p-value of "nothing changed" (log ratio 0) for one row: the t (or normal, when
    nothing was estimated) tail beyond |log ratio| / se, with the interval's own degrees of
    freedom. None without an interval."""
    if not iv.has_interval or iv.log_se is None:
        return None
    if iv.log_se <= 0.0:
        return 0.0 if iv.ratio != 1.0 else 1.0
    z = abs(math.log(iv.ratio)) / iv.log_se
    df = iv.floor.df if iv.floor is not None else None
    if df is None:
        return 2.0 * (1.0 - statistics.NormalDist().cdf(z))
    if df > _T_SERIES_MAX_DF:  # the series needs ~df terms; the normal tail is within 1e-3 there
        return 2.0 * (1.0 - statistics.NormalDist().cdf(z))
    return max(0.0, 1.0 - _t_central(z, df))


def bh_significant(pvalues: Sequence[float | None], level: float = 1.0 - CONFIDENCE) -> list[bool]:
    """Benjamini-Hochberg: which of a family of rows are significant with the false discovery
    rate held at ``level`` (None: a row without an interval, never significant and not counted
    as tested). When nothing changed anywhere, the chance of calling any row is at most
    ``level``, however many rows are tested; when some rows did change it calls far more of
    them than a per-row Bonferroni or Holm bound would."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(idx)
    out = [False] * len(pvalues)
    if not m:
        return out
    order = sorted(idx, key=lambda i: pvalues[i])  # type: ignore[arg-type, return-value]
    cut = 0
    for rank, i in enumerate(order, start=1):
        if pvalues[i] <= level * rank / m:  # type: ignore[operator]
            cut = rank
    for i in order[:cut]:
        out[i] = True
    return out


# --------------------------------------------------------------------------- many cases


@dataclass(frozen=True)
class Geomean:
    """Geometric mean of case ratios with an interval that treats the cases of one kind as
    moving together (module docstring). ``count``: ratios behind it; ``clusters``: the kinds
    they fall in."""

    ratio: float
    low: float | None
    high: float | None
    count: int
    clusters: int = 1

    def excludes_one(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 1.0 or self.high < 1.0)


def geomean(intervals: Sequence[RatioInterval], clusters: Sequence[Hashable] | None = None,
            confidence: float = CONFIDENCE) -> Geomean | None:
    """Geometric-mean ratio of several cases, or None when there are none. ``clusters``: the
    kind of each case, whose shift its cases share (default: each case its own)."""
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
        shifts[c] = shifts.get(c, 0.0) + (iv.floor.shift_sd if iv.floor else 0.0)
    if any(not iv.has_interval for iv in intervals):  # an under-sampled case: no interval for the group
        return Geomean(ratio, None, None, n, len(shifts))
    # A kind's shift moves all its cases together: within a kind the standard deviations add,
    # across kinds the variances. The scatter within a kind and within-run noise are each
    # case's own: their variances add.
    own = math.fsum((iv.floor.spread_sd if iv.floor else 0.0) ** 2
                    + (0.0 if iv.floor is not None and iv.floor.includes_within
                       else iv.within_log_se if iv.within_log_se is not None else iv.log_se or 0.0) ** 2
                    for iv in intervals)
    var = (math.fsum(s**2 for s in shifts.values()) + own) / n**2
    dfs = [iv.floor.df for iv in intervals if iv.floor is not None and iv.floor.df is not None]
    half = _quantile(confidence, min(dfs) if dfs else None) * math.sqrt(var)
    return Geomean(ratio, min(math.exp(mean - half), ratio), max(math.exp(mean + half), ratio), n, len(shifts))


def geomean_verdict(g: Geomean, practical: float = PRACTICAL) -> str:
    """As ``verdict``, for a geometric mean."""
    if g.low is None or g.high is None:
        return "uncertain"
    if g.low > 1.0 and g.ratio > 1.0 + practical:
        return "slower"
    if g.high < 1.0 and g.ratio < 1.0 / (1.0 + practical):
        return "faster"
    return "same"
