"""``envcheck run --crosscheck``: independent tools time the work envcheck timed, in the same run (``run.py``);
the raw numbers land in ``model.crosscheck``, ratios and findings are ``analysis.crosscheck``'s."""

from __future__ import annotations

import math


def good_samples(value: object) -> list[float] | None:
    """``value`` as samples (a worker's output is outside text), or None unless a non-empty list of finite positive
    numbers."""
    if not isinstance(value, list) or not value:
        return None
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0 for x in value):
        return None
    return [float(x) for x in value]
