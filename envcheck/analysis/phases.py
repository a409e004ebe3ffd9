"""Where a run's time went: the phases of one bench, each with its share of the bench's wall time.

The report keeps the seconds as the runner and the worker clocked them (``Bench.phases``: the worker's
start-up, the measured ceilings, drawing the groups' inputs, the worker's exit; ``Case.phases``: each
case's first call, checked calls, warm-up, CUDA graph, settling and sampling). Here they are added up
once, in reading order, a case's first call named by what it is (``torch_compile`` for torch.compile,
``triton_compile`` for envcheck's Triton kernels, where it holds the JIT and the matmul race,
``first_call`` otherwise), and what no phase covers is ``other`` (events, monitor windows, freeing
memory): the bench's ``duration_s`` less the rest. Reports written before phases were recorded have
none (``bench_phases`` is None).

A run over several GPUs (``run --gpus``) runs the node tests after the suites: ``node_phases`` splits
their wall time (``Node.duration_s``) into the peer copies, the collective sweeps (each launch's wall
time) and the rest (topology, counters, the Xid scan).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from envcheck.model import Bench, Case, CaseKey
from envcheck.model.node import Node

# The phases in the order a run goes through them (a case's: its first call, named by its
# implementation, then the rest of model.CASE_PHASES).
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


def case_phase(case: Case, phase: str) -> str:
    """The table's name for one of ``case``'s phases."""
    return FIRST_CALL.get(case.impl, phase) if phase == "first_call" else phase


def case_seconds(case: Case) -> float:
    return sum(case.phases.values())


def _add(into: dict[str, float], items: Iterable[tuple[str, float]]) -> None:
    for name, s in items:
        into[name] = into.get(name, 0.0) + s


def bench_phases(bench: Bench, probe_s: float | None = None) -> BenchPhases | None:
    """The phase table of ``bench`` (``probe_s``: the environment's probe before it); None when it
    recorded no phases (an older report, or no run)."""
    timed = [c for c in bench.cases if c.phases]
    if not bench.phases and not timed:
        return None
    seconds: dict[str, float] = {}
    _add(seconds, bench.phases.items())
    for c in timed:
        _add(seconds, ((case_phase(c, name), s) for name, s in c.phases.items()))
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
                       tuple(CaseTime(c.key, case_seconds(c), c.span_s) for c in slowest), probe_s)


def node_phases(node: Node | None) -> BenchPhases | None:
    """The node tests' time by test (module docstring); None without a node or its wall time."""
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
