"""Copy bandwidths (host <-> GPU, GPU <-> GPU) against what the link allows."""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.analysis.links import host_link_gbps, pair_path
from envcheck.model.node import (
    Copy,
    PeerCopies,
    Topology,
)

# --------------------------------------------------------------------------- copies


@dataclass(frozen=True)
class CopyRow:
    """One copy measurement's bandwidth against what the link allows.

    ``gbps``: bytes over the median time, counting what crossed the link: one direction, or both
    for a bidirectional copy (``directions`` 2). ``expected_gbps`` counts the same directions.
    """

    kind: str
    method: str
    src: int | None
    dst: int | None
    directions: int
    gbps: float | None
    expected_gbps: float | None
    pct_expected: float | None
    wrong: int | None
    error: str | None
    via: str | None = None


def copy_row(c: Copy, topology: Topology | None) -> CopyRow:
    directions = 2 if c.bidirectional else 1
    gbps = None
    if c.timing is not None and len(c.timing.samples_us):
        t = c.timing.median_us
        gbps = c.bytes_per_direction * directions / (t * 1e-6) / 1e9 if t > 0 else None
    expected = via = None
    if topology is not None:
        if c.kind == "d2d" and c.src is not None and c.dst is not None:
            p = pair_path(topology, c.src, c.dst)
            if p is not None:
                via = p.via
                expected = p.expected_gbps * directions if p.expected_gbps is not None else None
        else:
            gpu = c.dst if c.kind == "h2d" else c.src
            one = host_link_gbps(topology, gpu) if gpu is not None else None
            via = "pcie"
            expected = one * directions if one is not None else None
    pct = 100 * gbps / expected if gbps is not None and expected else None
    return CopyRow(c.kind, c.method, c.src, c.dst, directions, gbps, expected, pct, c.wrong, c.error, via)


def copy_rows(peer: PeerCopies, topology: Topology | None) -> tuple[CopyRow, ...]:
    return tuple(copy_row(c, topology) for c in peer.copies)
