"""Narrowing a slow collective down to a rank, a link, a node or the network between groups: a bisection over
the ranks (halves split by nodes, so a node is never cut), down the slower half, the last few ranks settled with
pairs held to the best pair of their own kind. The same walk picks the next group while the ranks run it
(``envcheck.node.collective_worker``) and explains the steps afterwards. Pure: ranks, hosts and busbw only.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_NARROW_MARGIN = 0.10
MAX_NARROW_STEPS = 16


@dataclass(frozen=True)
class NarrowStep:
    """A sub-group's bus bandwidth at the narrowing size (None: the collective failed on it)."""

    ranks: tuple[int, ...]
    busbw_gbps: float | None


@dataclass(frozen=True)
class Conclusion:
    """What the bisection found (``kind``): ``none``, ``rank`` (its GPU and own links), ``link`` (between two
    ranks), ``between`` (each side fine alone, slow together: the connection, across nodes the network),
    ``group`` (slower than its sibling, uniform inside), ``inconclusive``, ``not_applicable`` (under three ranks)."""

    kind: str
    ranks: tuple[int, ...] = ()
    other: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()

    @property
    def located(self) -> bool:
        """Whether the bisection named where the slowness is (a rank, a link, a connection or a group)."""
        return self.kind in LOCATED_KINDS


def halves(group: tuple[int, ...], hosts: Sequence[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A group split in two: by nodes while it spans several (so a node is never cut), else by ranks."""
    nodes = list(dict.fromkeys(hosts[r] for r in group))
    if len(nodes) > 1:
        first = set(nodes[: len(nodes) // 2])
        a = tuple(r for r in group if hosts[r] in first)
        return a, tuple(r for r in group if hosts[r] not in first)
    k = len(group) // 2
    return group[:k], group[k:]


def _slower(x: float | None, y: float | None, margin: float) -> bool:
    """Whether ``x`` is slower than ``y`` by more than ``margin`` (a failed run counts as slowest)."""
    return y is not None and (x is None or x < y * (1 - margin))


def _hosts_of(ranks: tuple[int, ...], hosts: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(hosts[r] for r in ranks))


def _walk(steps: Sequence[NarrowStep], world: tuple[int, ...], hosts: Sequence[str],
          margin: float) -> tuple[tuple[int, ...] | None, Conclusion | None]:
    """The next group to measure, or the conclusion: the same walk decides and, later, explains."""
    bw = {s.ranks: s.busbw_gbps for s in steps}
    if len(world) < 3:
        return None, Conclusion("not_applicable")
    if world not in bw:
        return world, None
    suspect, descended = world, False
    while len(suspect) > 3:
        h1, h2 = halves(suspect, hosts)
        for h in (h1, h2):
            if len(h) >= 2 and h not in bw:
                return h, None
        if len(h1) < 2 or len(h2) < 2:
            break  # a one-rank half: settle it with pairs
        b1, b2, bp = bw[h1], bw[h2], bw[suspect]
        if _slower(b1, b2, margin) or _slower(b2, b1, margin):
            suspect, descended = h1 if _slower(b1, b2, margin) else h2, True
            continue
        if b1 is not None and b2 is not None and _slower(bp, min(b1, b2), margin):
            return None, Conclusion("between", h1, h2, _hosts_of(suspect, hosts))
        if descended:
            return None, Conclusion("group", suspect, (), _hosts_of(suspect, hosts))
        return None, Conclusion("none")
    # Pairs settle it: within the suspect, plus a reference rank from outside for a lone pair.
    members = suspect
    ref = None
    if len(members) == 2:
        same = [r for r in world if r not in members and hosts[r] == hosts[members[0]]]
        other = [r for r in world if r not in members]
        ref = (same or other)[0]
        members = tuple(sorted((*members, ref)))
    pairs = list(itertools.combinations(members, 2))
    for p in pairs:
        if p not in bw:
            return p, None

    # A pair inside a node runs on NVLink, one across nodes on the network, ~10x slower on an H200
    # node: each pair is held only to the best pair of its own kind.
    def best_of(p: tuple[int, ...]) -> float | None:
        kind = len(_hosts_of(p, hosts))
        known = {q: v for q in pairs if (v := bw[q]) is not None}
        return max([v for q, v in known.items() if len(_hosts_of(q, hosts)) == kind] or known.values(), default=None)

    slow = [p for p in pairs if _slower(bw[p], best_of(p), margin)]
    if not slow:
        return None, (Conclusion("group", suspect, (), _hosts_of(suspect, hosts)) if descended else Conclusion("none"))
    if len(slow) == 1:
        if ref is not None and descended and ref in slow[0]:
            # The suspect pair was slower than its sibling, and of the reference's links to it only the one
            # to this member is slow: the member is the cause.
            r = next(x for x in slow[0] if x != ref)
            return None, Conclusion("rank", (r,), (), (hosts[r],))
        return None, Conclusion("link", slow[0], (), _hosts_of(slow[0], hosts))
    common = set(slow[0]).intersection(*slow[1:])
    if len(common) == 1:
        r = common.pop()
        return None, Conclusion("rank", (r,), (), (hosts[r],))
    return None, Conclusion("inconclusive", suspect, (), _hosts_of(suspect, hosts))


def next_narrowing_group(steps: Sequence[NarrowStep], world: tuple[int, ...], hosts: Sequence[str],
                         margin: float = DEFAULT_NARROW_MARGIN) -> tuple[int, ...] | None:
    """The sub-group to measure next, or None when the bisection has its answer (or ran out of steps)."""
    return None if len(steps) >= MAX_NARROW_STEPS else _walk(steps, world, hosts, margin)[0]


def narrowing_conclusion(steps: Sequence[NarrowStep], world: tuple[int, ...], hosts: Sequence[str],
                         margin: float = DEFAULT_NARROW_MARGIN) -> Conclusion:
    group, conclusion = _walk(steps, world, hosts, margin)
    return conclusion or Conclusion("inconclusive", group or (), (), _hosts_of(group or (), hosts))


def lost_conclusion(ranks: Sequence[int]) -> Conclusion:
    """A sweep a rank of which was lost: the bisection would blame whatever link it tried last, not the rank."""
    return Conclusion("lost", ranks=tuple(ranks))


CONCLUSION_KINDS = ("none", "rank", "link", "between", "group", "inconclusive", "not_applicable", "lost")
LOCATED_KINDS = ("rank", "link", "between", "group")
