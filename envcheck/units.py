"""Sizes, byte sizes, intervals and counter rates as plain text: one spelling for every view and check."""

from __future__ import annotations

from collections.abc import Sequence

_BINARY = (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10))


def count(n: int) -> str:
    """An element count: ``1K``, ``10K``, ``1M`` (K = 1024) when an exact binary multiple, else the integer."""
    for prefix, unit in _BINARY:
        if n >= unit and n % unit == 0:
            return f"{n // unit}{prefix}"
    return str(n)


def shape(dims: Sequence[int] | int | str) -> str:
    """The one way a size is written: an element count for vectors (``256M``), ``4096×11008×4096`` otherwise (views
    name a convolution's dimensions: ``render.i18n.size``). ``dims`` may be ``AxB`` text; other text stays."""
    if isinstance(dims, str):
        if not all(d.isdigit() for d in dims.split("x")):
            return dims
        dims = [int(d) for d in dims.split("x")]
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return count(dims[0]) if len(dims) == 1 else "×".join(str(d) for d in dims)


def gib(n: object) -> str | None:
    """``85899345920`` -> ``80.0 GiB``; None when ``n`` is not a number (a missing fact)."""
    return f"{n / 2**30:.1f} GiB" if isinstance(n, (int, float)) else None


def span(seconds: float) -> str:
    """A counting interval in the plain unit that fits it: ``45 s``, ``12 min``, ``5.2 h``, ``3.1 d``."""
    for unit, size, limit in (("s", 1, 120), ("min", 60, 7200), ("h", 3600, 172800)):
        if seconds < limit:
            return f"{seconds / size:.2g} {unit}" if seconds / size < 10 else f"{seconds / size:.0f} {unit}"
    return f"{seconds / 86400:.1f} d"


def per_unit(count: float, seconds: float) -> str:
    """``count`` over ``seconds`` per the first unit that makes it at least 1 (``1,063/min``, ``0.4/d``)."""
    for unit, size in (("s", 1), ("min", 60), ("h", 3600), ("d", 86400)):
        per = count / seconds * size
        if per >= 1 or unit == "d":
            return f"{per:,.0f}/{unit}" if per >= 100 else f"{per:.3g}/{unit}"
    return ""  # unreachable: the last unit always answers
