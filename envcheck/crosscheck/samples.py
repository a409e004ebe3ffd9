"""A tool's samples, taken only as a list of finite positive numbers: a worker's output is outside text."""

from __future__ import annotations

import math


def good_samples(value: object) -> list[float] | None:
    """``value`` as samples, or None when it is not a non-empty list of finite positive numbers."""
    if not isinstance(value, list) or not value:
        return None
    out = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
            return None
        out.append(float(x))
    return out
