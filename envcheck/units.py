"""Byte sizes, intervals and counter rates as plain text, one spelling for the terminal, the checks and
``envcheck diff``.

What envcheck shows is formatted by ``render.fmt`` instead.
"""

from __future__ import annotations

from typing import Any


def gib(n: Any) -> str | None:
    """``85899345920`` -> ``80.0 GiB``; None when ``n`` is not a number (a missing fact)."""
    return f"{n / 2**30:.1f} GiB" if isinstance(n, (int, float)) else None


def span(seconds: float) -> str:
    """A counting interval in the plain unit that fits it: ``45 s``, ``12 min``, ``5.2 h``, ``3.1 d``."""
    for unit, size, limit in (("s", 1, 120), ("min", 60, 7200), ("h", 3600, 172800)):
        if seconds < limit:
            return f"{seconds / size:.2g} {unit}" if seconds / size < 10 else f"{seconds / size:.0f} {unit}"
    return f"{seconds / 86400:.1f} d"


def per_unit(count: float, seconds: float) -> str:
    """``count`` over ``seconds`` as a plain number per the first unit that makes it at least 1
    (``1,063/min``, ``0.4/d``): never an exponent, never "per hour over 0.0 h"."""
    for unit, size in (("s", 1), ("min", 60), ("h", 3600), ("d", 86400)):
        per = count / seconds * size
        if per >= 1 or unit == "d":
            return f"{per:,.0f}/{unit}" if per >= 100 else f"{per:.3g}/{unit}"
    return ""  # unreachable: the last unit always answers
