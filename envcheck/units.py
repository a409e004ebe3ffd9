"""Byte sizes as plain text, one spelling for the terminal, the checks and ``envcheck diff``.

What envcheck shows is formatted by ``render.fmt`` instead.
"""

from __future__ import annotations

from typing import Any


def gib(n: Any) -> str | None:
    """``85899345920`` -> ``80.0 GiB``; None when ``n`` is not a number (a missing fact)."""
    return f"{n / 2**30:.1f} GiB" if isinstance(n, (int, float)) else None
