"""Where a run's time went: the phases the runner and worker clocked, each with its share of the bench's wall
time (``other``: the rest), a case's first call named by what dominates it; ``node_phases`` for the node tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from envcheck.model import Bench, Case, CaseKey
from envcheck.model.node import Node

# The phases in the order a run goes through them (a case's first call named by its implementation).
ORDER = ("startup", "ceilings", "inputs", "torch_compile", "triton_compile", "first_call", "check", "warmup",
         "graph", "settle", "sampling", "shutdown")
OTHER = "other"
# A case's first call, by implementation: what dominates it.
FIRST_CALL = {"compile": "torch_compile", "triton": "triton_compile"}
SLOWEST = 5  # cases named as the slowest


@dataclass(frozen=True)
class PhaseRow:
    phase: str  # one of ORDER, OTHER, or a phase a newer envcheck recorded
    seconds: float
    share: float | None  # of the bench's wall time, 0..1 (None: no wall time recorded)


@dataclass(frozen=True)
class CaseTime:
    """One case's own seconds (its phases added up) and when it ran (seconds since its worker started)."""

    key: CaseKey
    seconds: float
    span_s: tuple[float, float] | None


@dataclass(frozen=True)
class BenchPhases:
    rows: tuple[PhaseRow, ...]
    total_s: float | None  # the bench's wall time
    by_op: tuple[tuple[str, float], ...]  # seconds of every op's cases, most first
    slowest: tuple[CaseTime, ...]  # the SLOWEST cases that took longest, longest first
    probe_s: float | None = None  # the probe of the machine before the suite (not part of its wall time)
    cache: tuple[tuple[str, int], ...] = ()  # cases per model.CACHE_STATES, those recorded
    stops: tuple[tuple[str, int], ...] = ()  # cases per model.SAMPLING_STOPS, those recorded


def case_seconds(case: Case) -> float:
    return sum(case.phases.values())


def _add(into: dict[str, float], items: Iterable[tuple[str, float]]) -> None:
    for name, s in items:
        into[name] = into.get(name, 0.0) + s


def bench_phases(bench: Bench, probe_s: float | None = None) -> BenchPhases | None:
    """The phase table of ``bench`` (``probe_s``: the probe before it); None when it recorded none."""
    timed = [c for c in bench.cases if c.phases]
    if not bench.phases and not timed:
        return None
    seconds: dict[str, float] = {}
    _add(seconds, bench.phases.items())
    for c in timed:
        _add(seconds, ((FIRST_CALL.get(c.impl, n) if n == "first_call" else n, s) for n, s in c.phases.items()))
    names = [n for n in ORDER if n in seconds] + sorted(n for n in seconds if n not in ORDER)
    total = bench.duration_s if bench.duration_s else None
    if total is not None:
        seconds[OTHER] = max(total - sum(seconds.values()), 0.0)
        names.append(OTHER)
    rows = tuple(PhaseRow(n, seconds[n], seconds[n] / total if total else None) for n in names)
    by_op: dict[str, float] = {}
    _add(by_op, ((c.op, case_seconds(c)) for c in timed))
    slowest = sorted(timed, key=case_seconds, reverse=True)[:SLOWEST]
    return BenchPhases(rows, total, tuple(sorted(by_op.items(), key=lambda kv: -kv[1])),
                       tuple(CaseTime(c.key, case_seconds(c), c.span_s) for c in slowest), probe_s,
                       _count(c.cache for c in bench.cases), _count(c.sampled_until for c in bench.cases))


def _count(values: Iterable[str | None]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(Counter(v for v in values if v is not None).items()))


def node_phases(node: Node | None) -> BenchPhases | None:
    """The node tests' time: peer copies, collective sweeps and the rest; None without a node or its wall time."""
    if node is None or not node.duration_s:
        return None
    seconds: dict[str, float] = {}
    if node.peer is not None and node.peer.duration_s:
        seconds["peer_copies"] = node.peer.duration_s
    walls = [c.launch.wall_s for c in node.collectives if c.launch is not None]
    if walls:
        seconds["collectives"] = sum(walls)
    total = node.duration_s
    if sum(seconds.values()) > total * 1.01:  # parts longer than the whole: a record no run writes
        return None
    seconds[OTHER] = max(total - sum(seconds.values()), 0.0)
    return BenchPhases(tuple(PhaseRow(n, s, s / total) for n, s in seconds.items()), total, (), ())
