"""What an independent tool measured, the reference envcheck's numbers are held against: nccl-tests' rows."""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.outside_json import Int


@dataclass(frozen=True)
class Placement:
    """One placement's columns: time (us), algbw and busbw (GB/s), #wrong (None when N/A)."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: Int | None


@dataclass(frozen=True)
class NcclTestsRow:
    """One size of one collective; ``runs``: how many nccl-tests runs it stands for (``analysis.collectives.medians``)."""

    op: str
    size_bytes: Int
    count: Int
    dtype: str
    out_of_place: Placement
    in_place: Placement
    runs: Int = 1
    busbw_range: tuple[tuple[float, float], tuple[float, float]] | None = None  # (out, in) placement: min, max
