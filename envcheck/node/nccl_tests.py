"""nccl-tests' output (``all_reduce_perf -b 1M -e 4G -f 4 -g 2``), read so envcheck's own bus bandwidth
can be held against it at the same sizes: the evidence that the numbers mean the same thing.

One row per size, with both placements (nccl-tests 2.19 prints out-of-place, then in-place)::

  #       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
     1048576        262144     float     sum      -1    15.25   68.77   68.77       0    14.60   71.82   71.82       0

``#wrong`` is ``N/A`` where nccl-tests does not check (alltoall in place).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

# nccl-tests' binary names -> envcheck's collective names
BINARIES = {"all_reduce_perf": "all_reduce", "all_gather_perf": "all_gather", "reduce_scatter_perf": "reduce_scatter",
            "alltoall_perf": "all_to_all", "broadcast_perf": "broadcast"}
_START = re.compile(r"^# Collective test starting: (\S+)")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s+" + r"\s+".join([r"(\S+)"] * 8) + r"\s*$")


@dataclass(frozen=True)
class Placement:
    """One placement's columns: time (us), algbw and busbw (GB/s), #wrong (None when N/A)."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None


@dataclass(frozen=True)
class NcclTestsRow:
    """One size of one collective; ``runs``: how many nccl-tests runs it stands for (see :func:`medians`)."""

    op: str
    size_bytes: int
    count: int
    dtype: str
    out_of_place: Placement
    in_place: Placement
    runs: int = 1
    busbw_range: tuple[tuple[float, float], tuple[float, float]] | None = None  # (out, in) placement: min, max


def _median_placement(ps: list[Placement]) -> Placement:
    wrong = [p.wrong for p in ps if p.wrong is not None]
    return Placement(statistics.median(p.time_us for p in ps), statistics.median(p.algbw_gbps for p in ps),
                     statistics.median(p.busbw_gbps for p in ps), max(wrong) if wrong else None)


def medians(rows: Iterable[NcclTestsRow]) -> tuple[NcclTestsRow, ...]:
    """Rows of several nccl-tests runs of the same sizes (one log holding every run) as one row per
    (op, size): each column the median over the runs, ``#wrong`` the largest, with the runs counted and
    each placement's busbw range kept. nccl-tests' own run-to-run spread at 1 GiB reached 2.6% on 2 x H200
    (reduce_scatter 1992 against 1941 us, reports/device-logs/2026-11-26_0019Z_2x-h200_nccl-tests.tgz),
    as wide as the 2% bar: one run is too unsteady a reference. A single run comes back unchanged."""
    groups: dict[tuple[str, int], list[NcclTestsRow]] = {}
    for r in rows:
        groups.setdefault((r.op, r.size_bytes), []).append(r)
    out = []
    for same in groups.values():
        if len(same) == 1:
            out.append(same[0])
            continue
        first = same[0]
        spans = tuple((min(b), max(b)) for b in ([r.out_of_place.busbw_gbps for r in same],
                                                   [r.in_place.busbw_gbps for r in same]))
        out.append(NcclTestsRow(first.op, first.size_bytes, first.count, first.dtype,
                                _median_placement([r.out_of_place for r in same]),
                                _median_placement([r.in_place for r in same]), len(same), (spans[0], spans[1])))
    return tuple(out)


def _num(text: str) -> float:
    return float(text)


def _wrong(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def parse(text: str) -> tuple[NcclTestsRow, ...]:
    """Every result row of one or more nccl-tests runs concatenated (one log, several binaries)."""
    op: str | None = None
    rows = []
    for line in text.splitlines():
        m = _START.match(line)
        if m:
            op = BINARIES.get(m.group(1))
            continue
        m = _ROW.match(line)
        if m and op:
            g = m.groups()
            rows.append(NcclTestsRow(op, int(g[0]), int(g[1]), g[2],
                                     Placement(_num(g[5]), _num(g[6]), _num(g[7]), _wrong(g[8])),
                                     Placement(_num(g[9]), _num(g[10]), _num(g[11]), _wrong(g[12]))))
    return tuple(rows)
