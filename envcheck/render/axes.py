"""Axis maths for ``svgchart``: which scale, which domain, which ticks, and how tick labels read.

The rules, in one place, so a chart can be checked against them:

* **Scale.** ``auto`` is log10 when every value is positive and they span more than 1.5 decades
  (max / min > 10^1.5), else linear.
* **Linear domain.** Includes zero by default, so bar-like comparisons keep their proportions.
  With ``zero=False`` it is at least +-10% of the largest magnitude wide (``MIN_REL_SPAN``): a 0.1%
  difference then fills at most 0.5% of the height instead of the whole plot, and ``broken`` tells
  the chart to mark the axis as not starting at zero. A domain widened that way stops at zero rather
  than give a positive quantity negative ticks. Both ends are widened to the first and last tick.
* **Log domain.** Spans at least a factor of ten (``MIN_LOG_RATIO``) for the same reason, plus 3% of
  its width at each end so no marker sits on the frame.
* **Linear ticks.** ``k x step`` with step in {1, 2, 2.5, 5} x 10^n: the smallest step that gives at
  most ``max_ticks`` ticks.
* **Log ticks.** Every s-th power of the base (k divisible by s), s the smallest stride that gives at
  most ``max_ticks`` ticks: s in 1, 2, 3, 5, 10, 20, ... for base 10 and 1, 2, 4, 5, 10, 20, ... for
  base 2 (strides that land on 2^10, 2^20). A log10 axis with fewer than five powers in view adds
  3x ticks (1 3 10 30), with fewer than three 2x and 5x ones (1 2 5 10), where they fit.
* **Labels**, one notation per axis:
  - base 2: binary prefixes, upper case ``1 2 ... 512 1K 4K 1M 256M`` (K = 1024); ``2⁻³`` powers
    when a tick is below 1;
  - base 10 and linear: plain decimals (``0.01 0.5 250 4000``); when the largest tick is at least
    10^4, thousands and up take SI prefixes, lower case k (= 1000) so they cannot be read as the
    binary K: ``1 10 100 1k 10k 1M``; ``10⁻⁶`` powers when a tick is below 0.001 or above 10^18.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

Scale = Literal["auto", "linear", "log2", "log10"]
SCALES: tuple[str, ...] = ("auto", "linear", "log2", "log10")

MAX_TICKS = 8
AUTO_LOG_RATIO = 10**1.5
MIN_LOG_RATIO = 10.0
MIN_REL_SPAN = 0.2
_LOG_PAD = 0.03
_LINEAR_PAD = 0.02
_SI_FROM = Decimal(10_000)
_SI_PREFIXES = "kMGTPE"
_BINARY_PREFIXES = "KMGTPE"
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
MINUS = "−"  # U+2212: as wide as a digit's neighbourhood expects, unlike the hyphen


@dataclass(frozen=True)
class AxisPlan:
    """A resolved axis: ``scale`` is linear, log2 or log10; ``ticks`` lie within [lo, hi]."""

    scale: str
    lo: float
    hi: float
    ticks: tuple[float, ...]
    labels: tuple[str, ...]
    broken: bool = False  # a linear domain that leaves zero out: the chart says so
    _a: float = field(init=False, repr=False, compare=False)
    _span: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.lo < self.hi:
            raise ValueError(f"axis domain must be increasing, got [{self.lo}, {self.hi}]")
        if self.scale == "linear":
            a, b = self.lo, self.hi
        else:
            if self.lo <= 0:
                raise ValueError(f"a {self.scale} axis needs a positive domain, got [{self.lo}, {self.hi}]")
            a, b = math.log(self.lo), math.log(self.hi)
        object.__setattr__(self, "_a", a)
        object.__setattr__(self, "_span", b - a)

    def frac(self, v: float) -> float:
        """Position of ``v`` along the axis, 0 at ``lo`` and 1 at ``hi`` (outside for values outside)."""
        if self.scale == "linear":
            return (v - self._a) / self._span
        return (math.log(v) - self._a) / self._span


def resolve_scale(scale: str, values: list[float] | tuple[float, ...]) -> str:
    if scale not in SCALES:
        raise ValueError(f"unknown axis scale {scale!r}: expected one of {', '.join(SCALES)}")
    if scale != "auto":
        return scale
    if values and min(values) > 0 and max(values) / min(values) > AUTO_LOG_RATIO:
        return "log10"
    return "linear"


def plan_axis(values: list[float] | tuple[float, ...], scale: str = "auto", *, zero: bool = True,
              max_ticks: int = MAX_TICKS) -> AxisPlan:
    """The domain, ticks and tick labels for ``values`` (data plus anything that must stay in view)."""
    kind = resolve_scale(scale, values)
    max_ticks = max(2, min(max_ticks, MAX_TICKS))
    if kind == "linear":
        return _linear(values or (0.0, 1.0), zero, max_ticks)
    if values and min(values) <= 0:
        raise ValueError(f"a {kind} axis cannot show {min(values)}: values must be positive")
    return _log(values or (1.0, 10.0), 2 if kind == "log2" else 10, max_ticks)


# --------------------------------------------------------------------------- linear


def _linear(values: list[float] | tuple[float, ...], zero: bool, max_ticks: int) -> AxisPlan:
    d_lo, d_hi = min(values), max(values)
    lo, hi = d_lo, d_hi
    if zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    else:
        need = MIN_REL_SPAN * max(abs(lo), abs(hi))
        if hi - lo < need:
            mid = (lo + hi) / 2
            lo, hi = mid - need / 2, mid + need / 2
        if d_lo >= 0 > lo:
            lo = 0.0
        if d_hi <= 0 < hi:
            hi = 0.0
    if lo == hi:  # all zero
        hi = 1.0
    # Pad only the ends the data set, so a point on the top tick does not sit on the frame; zero stays zero.
    pad = _LINEAR_PAD * (hi - lo)
    lo = lo - pad if lo != 0 else lo
    hi = hi + pad if hi != 0 else hi
    decs = _linear_ticks(lo, hi, max_ticks)
    ticks = tuple(float(d) for d in decs)
    return AxisPlan("linear", ticks[0], ticks[-1], ticks, _decimal_labels(decs), broken=ticks[0] > 0 or ticks[-1] < 0)


def _linear_ticks(lo: float, hi: float, max_ticks: int) -> list[Decimal]:
    # Steps are m x 10^e with m in {10, 20, 25, 50} (1, 2, 2.5, 5 one decade up); ticks are built from
    # Decimal so 0.1 + 0.2 never prints as 0.30000000000000004 and labels are exact.
    e = math.floor(math.log10((hi - lo) / max_ticks)) - 1
    while True:
        for m in (10, 20, 25, 50):
            step = Decimal(m).scaleb(e)
            a = math.floor(Decimal(repr(lo)) / step)
            b = math.ceil(Decimal(repr(hi)) / step)
            if b - a + 1 <= max_ticks:
                return [(step * k).normalize() for k in range(a, b + 1)]
        e += 1


# --------------------------------------------------------------------------- log


def _log(values: list[float] | tuple[float, ...], base: int, max_ticks: int) -> AxisPlan:
    lo, hi = min(values), max(values)
    if hi / lo < MIN_LOG_RATIO:
        g, r = math.sqrt(lo * hi), math.sqrt(MIN_LOG_RATIO)
        lo, hi = g / r, g * r
    log = math.log2 if base == 2 else math.log10
    la, lb = log(lo), log(hi)
    pad = _LOG_PAD * (lb - la)
    la, lb = la - pad, lb + pad
    lo, hi = float(base) ** la, float(base) ** lb
    first, last = math.ceil(la - 1e-9), math.floor(lb + 1e-9)
    strides = (1, 2, 4, 5) if base == 2 else (1, 2, 3, 5)
    stride = next(s for s in (*strides, *range(10, 10_000, 10)) if _count(first, last, s) <= max_ticks)
    powers = [k for k in range(first, last + 1) if k % stride == 0]
    if base == 2:
        ticks = tuple(math.ldexp(1.0, k) for k in powers)
        return AxisPlan("log2", lo, hi, ticks, _binary_labels(powers))
    decs = [Decimal(1).scaleb(k) for k in powers]
    in_view = last - first + 1
    if in_view < 5:  # few decades: label between the powers too, 1-2-5 or 1-3, where they fit
        for mantissas in ((1, 2, 5), (1, 3)) if in_view < 3 else ((1, 3),):
            finer = [Decimal(m).scaleb(k) for k in range(first - 1, last + 1) for m in mantissas]
            finer = [d for d in finer if lo <= float(d) <= hi]
            if len(finer) <= max_ticks:
                decs = finer
                break
    return AxisPlan("log10", lo, hi, tuple(float(d) for d in decs), _decimal_labels(decs))


def _count(first: int, last: int, stride: int) -> int:
    return last // stride - (first - 1) // stride


def _binary_labels(powers: list[int]) -> tuple[str, ...]:
    if any(k < 0 for k in powers):
        return tuple("2" + str(k).translate(_SUPERSCRIPT) for k in powers)
    out = []
    for k in powers:
        group = k // 10
        if group == 0:
            out.append(str(2**k))
        elif group <= len(_BINARY_PREFIXES):
            out.append(f"{2 ** (k % 10)}{_BINARY_PREFIXES[group - 1]}")
        else:
            out.append("2" + str(k).translate(_SUPERSCRIPT))
    return tuple(out)


# --------------------------------------------------------------------------- decimal labels


def _decimal_labels(decs: list[Decimal]) -> tuple[str, ...]:
    nonzero = [abs(d) for d in decs if d != 0]
    if nonzero and (min(nonzero) < Decimal("0.001") or max(nonzero) >= Decimal("1e18")):
        return tuple(_power_label(d) for d in decs)
    si = bool(nonzero) and max(nonzero) >= _SI_FROM
    return tuple(_si_label(d, si) for d in decs)


def _si_label(d: Decimal, si: bool) -> str:
    sign = MINUS if d < 0 else ""
    d = abs(d)
    suffix = ""
    if si and d >= 1000:
        group = min((d.adjusted()) // 3, len(_SI_PREFIXES))
        d = d.scaleb(-3 * group)
        suffix = _SI_PREFIXES[group - 1]
    return sign + _plain(d) + suffix


def _power_label(d: Decimal) -> str:
    if d == 0:
        return "0"
    sign = MINUS if d < 0 else ""
    d = abs(d)
    exp = d.adjusted()
    mantissa = d.scaleb(-exp).normalize()
    head = "" if mantissa == 1 else _plain(mantissa) + "×"
    return f"{sign}{head}10{str(exp).translate(_SUPERSCRIPT)}"


def _plain(d: Decimal) -> str:
    text = format(d.normalize(), "f")
    return text if text != "-0" else "0"
