"""nccl-tests' output (``all_reduce_perf -b 1M -e 4G -f 4 -g 2``), to hold envcheck's bus bandwidth against: a row
per size, out-of-place then in-place (nccl-tests 2.19; ``#wrong`` is ``N/A`` where it does not check)::

  #       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
     1048576        262144     float     sum      -1    15.25   68.77   68.77       0    14.60   71.82   71.82       0"""

from __future__ import annotations

import math
import re

from envcheck.model.crosscheck import NcclTestsRow, Placement

# nccl-tests' binary names -> envcheck's collective names
BINARIES = {"all_reduce_perf": "all_reduce", "all_gather_perf": "all_gather", "reduce_scatter_perf": "reduce_scatter",
            "alltoall_perf": "all_to_all", "broadcast_perf": "broadcast"}
_START = re.compile(r"^# Collective test starting: (\S+)")
_VERSION = re.compile(r"^# nccl-tests version (\S+)(?: nccl-headers=(\d+))?(?: nccl-library=(\d+))?", re.M)
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s+" + r"\s+".join([r"(\S+)"] * 8) + r"\s*$")


def _num(text: str) -> float:
    """A time or bandwidth column; ValueError for what is not a finite number (``-nan``, ``inf``, a cut line)."""
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {text!r}")
    return x


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
            try:
                rows.append(NcclTestsRow(op, int(g[0]), int(g[1]), g[2],
                                         Placement(_num(g[5]), _num(g[6]), _num(g[7]), _wrong(g[8])),
                                         Placement(_num(g[9]), _num(g[10]), _num(g[11]), _wrong(g[12]))))
            except ValueError:  # a row nccl-tests could not time (-nan) or a line cut short: no number to hold
                continue
    return tuple(rows)


def version(text: str) -> str | None:
    """nccl-tests' version line, e.g. ``2.19.6 (NCCL 22809)``, from its output; None when it printed none."""
    m = _VERSION.search(text)
    if m is None:
        return None
    return f"{m.group(1)} (NCCL {m.group(3)})" if m.group(3) else m.group(1)
