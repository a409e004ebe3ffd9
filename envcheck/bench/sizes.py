"""Sizes given on the command line (``envcheck run --sizes``), parsed into shapes. One item is ``N`` (an element
count: ``1024``, ``1_048_576``, ``2^20``, ``2**20``, ``1e6``, or ``4K`` / ``1M`` / ``1G``, powers of two as GPU
sizes are), ``RxC``, ``MxNxK`` (matmul, the reductions' (a, b, c), linear_fwbw) or ``NxCxHxWxKxRxSTRIDE``
(conv2d); ``shape_for`` says which ops a size feeds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from envcheck.errors import UsageError
from envcheck.ops import spec

MAX_DIM = 1 << 40  # 4 TiB in fp32: no single benchmark tensor fits any GPU made

_MULTIPLIERS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_POWER = re.compile(r"^(\d+)(?:\^|\*\*)(\d+)$")
_SCALED = re.compile(r"^(\d+)([kmg]?)$")
_SCIENTIFIC = re.compile(r"^(\d+(?:\.\d+)?)e(\d+)$")


def _not_a_size(item: str, why: str = "") -> UsageError:
    return UsageError(f"error.not_a_size{'.' + why if why else ''}", item=repr(item))


def parse_count(text: str, item: str | None = None) -> int:
    """One positive dimension; ``item``: the whole ``--sizes`` item, for the error message."""
    whole = item if item is not None else text
    t = text.strip().lower().replace("_", "")
    value: int | None = None
    if m := _POWER.match(t):
        base, exp = int(m.group(1)), int(m.group(2))
        if exp > 64:
            raise _not_a_size(whole, "too_large")
        value = base**exp
    elif m := _SCALED.match(t):
        value = int(m.group(1)) * _MULTIPLIERS[m.group(2)]
    elif m := _SCIENTIFIC.match(t):
        mantissa, exp = m.group(1), int(m.group(2))
        if exp > 15:
            raise _not_a_size(whole, "too_large")
        x = float(mantissa) * 10**exp
        if not x.is_integer():
            raise _not_a_size(whole, "not_whole")
        value = int(x)
    if value is None:
        raise _not_a_size(whole)
    if value <= 0:
        raise _not_a_size(whole, "not_positive")
    if value > MAX_DIM:
        raise _not_a_size(whole, "too_large")
    return value


def parse_size(item: str) -> tuple[int, ...]:
    """One ``--sizes`` item as a shape of 1, 2, 3 or 7 (conv2d) dimensions."""
    parts = item.strip().lower().split("x")
    if not (1 <= len(parts) <= 3 or len(parts) == 7) or any(not p.strip() for p in parts):
        raise _not_a_size(item)
    return tuple(parse_count(p, item) for p in parts)


def parse_sizes(items: Iterable[str]) -> tuple[tuple[int, ...], ...]:
    """Every item parsed, duplicates dropped, the user's order kept."""
    out: dict[tuple[int, ...], None] = {}
    for item in items:
        out.setdefault(parse_size(item), None)
    return tuple(out)


def shape_for(op: str, size: tuple[int, ...], matmul_square: bool) -> tuple[int, ...] | None:
    """The shape ``op`` runs at for a parsed size, or None. ``matmul_square``: whether ``N`` also means an N^3 matmul
    (only where the user named matmul: ``--sizes 1M`` would plan 2^60 multiply-adds)."""
    family = spec(op).family
    if family == "matmul":
        if len(size) == 3:
            return size
        if len(size) == 1 and matmul_square:
            return (size[0],) * 3
        return None
    if len(size) != spec(op).rank:
        return None
    try:
        spec(op).check_shape(size)  # e.g. a conv2d stride larger than its kernel
    except ValueError:
        return None
    return size


