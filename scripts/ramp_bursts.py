"""Which bursts of ``diag_alltoall_ramp.py`` ran slow, and on how many communicators: for each process's log (the
sections of a combined log, each headed ``#### name``), each burst's busbw from 5 ms on (the mean of its window
medians), the bursts over 2% below the process's median burst, the communicators they ran on, and how many of
those were slow in every one of their bursts.

    python3 scripts/ramp_bursts.py reports/device-logs/2026-11-26_1713Z_2x-h100_diag_alltoall_nccl_settings.log
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict

SLOW = 0.98  # a burst this far below its process's median burst is slow
FIRST_WINDOW = 2  # the windows from 5 ms on (diag_alltoall_ramp.WINDOWS_MS[2:])


def sections(text: str) -> dict[str, list[tuple[int, float]]]:
    """(communicator, busbw from 5 ms on) of every burst, by section."""
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    name = "log"
    for line in text.splitlines():
        if line.startswith("#### "):
            name = line[5:].strip()
        elif line.startswith("ramp comm "):
            head, cells = line.split(":", 1)
            values = [float(x) for x in cells.split("|")[0].split()[FIRST_WINDOW:] if x != "-"]
            out[name].append((int(head.split()[2]), statistics.fmean(values)))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: ramp_bursts.py LOG", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        found = sections(f.read())
    for name, bursts in found.items():
        median = statistics.median(b for _, b in bursts)
        per: dict[int, list[bool]] = defaultdict(list)
        for comm, busbw in bursts:
            per[comm].append(busbw < SLOW * median)
        slow = sum(sum(v) for v in per.values())
        comms = [c for c, v in per.items() if any(v)]
        every = [c for c, v in per.items() if all(v)]
        print(f"{name}: median burst {median:.1f} GB/s, slow {slow}/{len(bursts)} bursts on {len(comms)} of "
              f"{len(per)} communicators, {len(every)} slow in every burst; slowest {min(b for _, b in bursts):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
