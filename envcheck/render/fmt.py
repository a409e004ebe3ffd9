"""Numbers as people read them, the one place a value becomes text so every medium shows the same digits: errors
in exponent form (``7.7e-4``), speedups ``1.02×``, a diff's ratios ``0.864×``, percentages whole above 10; no digit
grouping (``4814 GB/s`` stays one token for a parser of piped output)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from envcheck import units
from envcheck.errors import first_line as first_line  # the one definition; presentation reads it from here
from envcheck.ops import variant

DASH = "–"  # where a number does not exist (not measured, not applicable)


def num(x: float | None, digits: int = 3) -> str:
    """A number with ``digits`` significant digits; integers as they are; exponent only far from 1."""
    if x is None:
        return DASH
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return DASH
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if mag >= 7 or mag < -3:
        return exp(x, digits)
    decimals = max(digits - 1 - mag, 0)
    text = f"{x:.{decimals}f}"
    # Rounding can add a digit (9.996 -> "10.00"): say it with the digits asked for.
    if decimals and len(text.replace("-", "").replace(".", "").lstrip("0")) > digits:
        text = f"{x:.{decimals - 1}f}"
    return text


def exp(x: float, digits: int = 2) -> str:
    """Exponent form without the padding zero: ``7.7e-4``, ``1.2e+9`` -> ``1.2e9``."""
    mant, _, e = f"{x:.{max(digits - 1, 0)}e}".partition("e")
    return f"{mant}e{int(e)}"


RATE_UNITS = (("s", 1.0), ("min", 60.0), ("h", 3600.0), ("d", 86400.0))


def counter_rate(per_s: float | None) -> str:
    """A count per second in the first unit that makes it at least 1 (``12/s``, ``3.4/min``, ``0.52/d``)."""
    if per_s is None or not isinstance(per_s, (int, float)) or not math.isfinite(per_s):
        return DASH
    if per_s == 0:
        return "0"
    unit, size = next((u, s) for u, s in RATE_UNITS if per_s * s >= 1 or u == "d")
    return f"{num(per_s * size)}/{unit}"


def sci(x: float | None) -> str:
    """A numeric error or a tolerance: two significant digits in exponent form."""
    if x is None or not math.isfinite(x):
        return DASH
    return "0" if x == 0 else exp(x, 2)


def nbytes(x: float | None) -> str:
    """Bytes in binary units with one decimal (``140.4 GiB``, ``60.0 MiB``), as nvidia-smi shows MiB."""
    if x is None:
        return DASH
    v = float(x)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return DASH  # unreachable: the loop returns at TiB


def duration_us(x: float | None) -> str:
    """A time given in microseconds, in the unit that keeps three significant digits readable."""
    if x is None:
        return DASH
    if x >= 1e6:
        return f"{num(x / 1e6)} s"
    if x >= 1e3:
        return f"{num(x / 1e3)} ms"
    return f"{num(x)} µs"


def size_bytes(x: float | None) -> str:
    """``1 MiB``, ``4 GiB`` when an exact binary multiple (as nccl-tests' sizes), else ``nbytes``."""
    if x is None:
        return DASH
    n = int(x)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return nbytes(n)


def seconds(x: float | None) -> str:
    return DASH if x is None else duration_us(x * 1e6)


def pct(x: float | None) -> str:
    """A share already scaled to 0..100: whole numbers, one decimal below 10 so small shares are not "0%"."""
    if x is None:
        return DASH
    digits = 1 if 0 < abs(x) < 9.95 else 0
    return f"{x:.{digits}f}%"


def ratio_pct(x: float | None) -> str:
    """A ratio 0..1 as a percentage."""
    return DASH if x is None else pct(100 * x)


def speedup(x: float | None) -> str:
    return DASH if x is None else f"{x:.2f}×"


def ratio(x: float | None) -> str:
    """A diff's time ratio (other / baseline)."""
    return DASH if x is None else f"{x:.3f}×"


def interval(low: float | None, high: float | None) -> str:
    return DASH if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def general(x: float) -> str:
    """A setting such as a threshold or a confidence level: its shortest exact form (2, 95, 2.5)."""
    return f"{x:g}"


def rate(x: float | None, unit: str) -> str:
    return DASH if x is None else f"{num(x)} {unit}"


# --------------------------------------------------------------------------- sizes and labels


count = units.count
shape = units.shape  # what a size column shows; ``i18n.size`` names a convolution's dimensions


def shape_key(dims: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    """Numeric order of sizes: by elements, then by dimensions."""
    return (math.prod(dims), tuple(dims))


def precision_label(dtype: str, precision: str | None) -> str:
    """``fp32``, or ``fp32/tf32`` when the arithmetic differs from the dtype."""
    return variant(dtype, precision or dtype)


# --------------------------------------------------------------------------- parameters by unit


PARAM_UNITS: tuple[tuple[str | tuple[str, ...], Callable[[float], str]], ...] = (
    ("_us", duration_us), ("_s", seconds), ("_bytes", nbytes), ("_pct", pct), (("_err", "_tol"), sci), ("_x", speedup))


def param(name: str, v: object) -> str:
    """A note's, finding's or source's parameter, formatted by the unit its name carries."""
    if v is None:
        return DASH
    if isinstance(v, bool):
        return str(v).lower()
    if name.endswith("shapes"):
        return ", ".join(shape(x) for x in v) if isinstance(v, (tuple, list)) else shape(v)
    if name.endswith("shape") or name in ("size", "size_dims"):
        return shape(v)
    if isinstance(v, (tuple, list)):
        return ", ".join(param(name, x) for x in v)
    if not isinstance(v, (int, float)):
        return str(v)
    for suffix, show in PARAM_UNITS:
        if name.endswith(suffix):
            return show(v)
    if name in ("elements",) or name.endswith("_elements"):
        return count(int(v))
    if name.endswith("_mhz"):
        return num(v, 4)
    return num(v) if isinstance(v, float) else str(v)


def params(values: Mapping[str, object], escape: Callable[[str], str] = str) -> dict[str, str]:
    """Every parameter formatted (``param``) and then escaped for the medium."""
    return {k: escape(param(k, v)) for k, v in values.items()}


def fact_value(key: str, v: object, words: Callable[[str], str]) -> str:
    """A probed fact's value, formatted by the unit its key names; ``words`` translates yes/no/none."""
    if isinstance(v, bool):
        return words("yes") if v else words("no")
    if isinstance(v, (int, float)):
        if key.endswith("_bytes"):
            return nbytes(v)
        for suffix, unit in (("_mhz", "MHz"), ("_bits", "bit"), ("_gbps", "GB/s"), ("_w", "W"), ("_c", "°C")):
            if key.endswith(suffix):
                return f"{num(v, 4)} {unit}"
        if key.endswith("_s"):
            return seconds(v)
        return num(v, 4) if isinstance(v, float) else str(v)
    if isinstance(v, (list, tuple)):
        return ", ".join(fact_value(key, x, words) for x in v) if v else words("none")
    if isinstance(v, dict):
        if "name" in v and "version" in v:  # an installed package (platform.python_packages)
            return f"{v['name']} {v['version'] if v['version'] is not None else words('none')}"
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v)
