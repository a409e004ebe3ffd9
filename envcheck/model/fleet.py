"""A fleet run's raw results: every node's own results, how every rank ended, the collectives across
all of them, and the rules and baseline the verdicts are judged by.

Each node's section has the fields of a single-node report (``environment``, ``checks``, ``benches``,
``node``), so the comparisons read a fleet node as they read one machine's report. The verdicts
themselves (which node to take out of service, and why) are derived in ``envcheck.analysis.fleet``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envcheck.model.bench import Bench
from envcheck.model.crosscheck import Crosscheck
from envcheck.model.facts import Check, Environment
from envcheck.model.node import Collectives, Node
from envcheck.outside_json import Int

RANK_STATUSES = ("ok", "error", "timeout", "missing")
# The phase of a fleet run whose hand-over rank 0 did not get: the rank's own suite, its node's tests
# (the node's leader), its node's share of the collectives across nodes (the leader), or the run was
# stopped (SIGTERM, SIGHUP, Ctrl-C) before it came.
RANK_PHASES = ("suite", "node", "world")
DIRECTIONS = ("higher", "lower")  # which way is better


@dataclass(frozen=True)
class RankStatus:
    """How one rank's part of the fleet run ended.

    ``ok``: it reported in time. ``error``: it caught an exception and sent it (``error`` holds its
    last line). ``timeout``: rank 0 gave it ``given_s`` seconds and heard nothing. ``missing``: it
    never joined. ``elapsed_s``: how long its own part took, as it measured. ``phase``: for a rank
    not ``ok``, the phase whose hand-over failed or never came (``RANK_PHASES``; None in reports
    written before phases were recorded: its suite). ``world_rank``: its rank in the collectives
    across nodes (None: it took no part), how those collectives' per-rank outcomes map back to it.
    """

    rank: Int
    status: str
    host: str | None = None
    local_rank: Int | None = None
    gpu: Int | None = None  # the CUDA device index it benchmarked on its host
    error: str | None = None
    given_s: float | None = None
    elapsed_s: float | None = None
    phase: str | None = None
    world_rank: Int | None = None

    def __post_init__(self) -> None:
        if self.status not in RANK_STATUSES:
            raise ValueError(f"unknown rank status {self.status!r}")
        if self.phase is not None and self.phase not in RANK_PHASES:
            raise ValueError(f"unknown rank phase {self.phase!r}")


@dataclass(frozen=True)
class FleetNode:
    """One host's results, shaped like a single-node report's (``crosscheck``: ``fleet --crosscheck``)."""

    host: str
    ranks: tuple[Int, ...] = ()
    environment: Environment | None = None
    checks: tuple[Check, ...] = ()
    benches: tuple[Bench, ...] = ()
    node: Node | None = None
    crosscheck: Crosscheck | None = None


@dataclass(frozen=True)
class Rule:
    """A fleet rule in SuperBench's style: ``metric`` must not be worse than its reference by ``margin``.

    ``margin`` is a fraction (0.05: 5 % below the reference fails a ``higher`` metric).
    """

    metric: str
    direction: str
    margin: float

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"unknown direction {self.direction!r}")
        if not 0 <= self.margin < 1:
            raise ValueError(f"margin must be a fraction in [0, 1), got {self.margin!r}")


@dataclass(frozen=True)
class Reference:
    """A metric's value in the baseline a fleet was judged against; ``algo``: the NCCL algorithm and
    protocol behind a bus bandwidth (``RING/SIMPLE``), so busbw is never compared across algorithms
    without saying so."""

    metric: str
    value: float
    algo: str | None = None


@dataclass(frozen=True)
class Baseline:
    """The report the nodes were compared with (``--baseline FILE``) and the values read from it."""

    source: str
    values: tuple[Reference, ...] = ()
    host: str | None = None
    created: str | None = None


@dataclass(frozen=True)
class Fleet:
    """Every node of a ``torchrun`` / ``srun`` launch, gathered by rank 0.

    ``collectives``: the sweeps across the whole world (each node's own sweeps live in its
    ``node``). ``rules`` and ``baseline`` are what the verdicts are judged by; without a baseline
    each node is compared with the fleet's median.
    """

    world_size: Int
    nnodes: Int
    launcher: str  # torchrun | slurm
    nodes: tuple[FleetNode, ...] = ()
    ranks: tuple[RankStatus, ...] = ()
    collectives: tuple[Collectives, ...] = ()
    rules: tuple[Rule, ...] = ()
    baseline: Baseline | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    started: str | None = None
    duration_s: float | None = None
