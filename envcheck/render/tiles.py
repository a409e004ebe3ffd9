"""The summary tiles at the head of a document: a label, a value, and what backs it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tile:
    label: str
    value: str
    lines: tuple[str, ...] = ()
    status: str | None = None  # fail: the value is bad news
    op: str | None = None  # the section the tile sums up
    precisions: tuple[str, ...] = ()  # the columns of ``speedups``
    speedups: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (impl, speedup per precision) per non-torch impl
