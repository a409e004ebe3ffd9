"""How two ways of joining a size's graph captures into one GPU time agree with nccl-tests, over committed node runs:
the mean of the captures' times and their median (each capture's time: its replays' mean on each rank, averaged
over the ranks, ``analysis.collectives.capture_means_us``). For every run and every size with pooled captures, the
busbw of each against nccl-tests' median over its CUDA-graph runs (the reference ``tools/evidence/compare_node.py`` uses),
then, by kind of size (captures of one allocation, on several communicators; captures on fresh allocations each),
how many rows lie outside the 2% bar (from 64 MiB) or 5% (below) with each.

    PYTHONPATH=. python3 tools/evidence/gpu_time_estimators.py RUN.json:GRAPH.txt [RUN.json:GRAPH.txt ...]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict

from envcheck import model
from envcheck.analysis.collectives import (
    IN_PLACE_OPS,
    NCCL_TESTS_LARGE_BYTES,
    bandwidths_gbps,
    capture_means_us,
    medians,
    nccl_tests_tolerance,
)
from envcheck.node import nccl_tests


def rows(run: str, graph: str) -> list[tuple[str, str, int, float, float, float]]:
    """(kind, op, size, mean busbw, median busbw, nccl-tests busbw) of every pooled size of one run."""
    with open(graph, encoding="utf-8") as f:
        ref = {(r.op, r.size_bytes): r for r in medians(nccl_tests.parse(f.read()))}
    out = []
    for sweep in model.load(run).node.collectives:
        for r in sweep.results:
            caps = capture_means_us(r)
            theirs = ref.get((r.op, r.size_bytes))
            if len(caps) < 2 or theirs is None:
                continue
            col = theirs.in_place if r.op in IN_PLACE_OPS else theirs.out_of_place
            n = len(r.ranks)
            mean, median = (bandwidths_gbps(r.op, r.size_bytes, n, t)[1] for t in (statistics.fmean(caps),
                                                                                    statistics.median(caps)))
            kind = "fresh allocations" if r.allocations > 1 else "one allocation"
            out.append((kind, r.op, r.size_bytes, mean or 0.0, median or 0.0, col.busbw_gbps))
    return out


def main(argv: list[str]) -> int:
    if not argv or any(":" not in a for a in argv):
        print("usage: gpu_time_estimators.py RUN.json:GRAPH.txt ...", file=sys.stderr)
        return 2
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # rows, misses with the mean, with the median
    for arg in argv:
        run, graph = arg.rsplit(":", 1)
        for kind, op, size, mean, median, theirs in rows(run, graph):
            # The bar and its test as analysis.collectives.agreements applies them.
            off = [abs(x / theirs - 1) > nccl_tests_tolerance(size) for x in (mean, median)]
            t = tally[f"{kind}, {'from' if size >= NCCL_TESTS_LARGE_BYTES else 'below'} 64 MiB"]
            t[0] += 1
            t[1] += off[0]
            t[2] += off[1]
            if any(off):
                print(f"{run.rsplit('/', 1)[-1]}: {op} {size >> 20} MiB: mean {mean:.1f} ({mean / theirs:.3f}), "
                      f"median {median:.1f} ({median / theirs:.3f}), nccl-tests {theirs:.1f}")
    for kind, (n, by_mean, by_median) in sorted(tally.items()):
        print(f"{kind}: {n} rows; outside the bar: {by_mean} with the mean, {by_median} with the median")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
