"""A fleet run's raw results: each node's own, how every rank ended, the collectives across all, and the rules and
baseline its verdicts are judged by."""

from __future__ import annotations

from dataclasses import dataclass, field

from envcheck.model.bench import Bench
from envcheck.model.crosscheck import Crosscheck
from envcheck.model.facts import Check, Environment, check_in
from envcheck.model.node import Collectives, Node
from envcheck.outside_json import Int, Json

RANK_STATUSES = ("ok", "error", "timeout", "missing")
# The phase whose hand-over rank 0 did not get: the rank's suite, its node's tests, its node's share of the world.
RANK_PHASES = ("suite", "node", "world")
DIRECTIONS = ("higher", "lower")  # which way is better


@dataclass(frozen=True)
class RankStatus:
    """How one rank's part ended (``RANK_STATUSES``); ``phase``: the hand-over that failed (None in older reports:
    its suite); ``world_rank``: its rank in the collectives across nodes (None: it took no part)."""

    rank: Int
    status: str
    host: str | None = None
    local_rank: Int | None = None
    gpu: Int | None = None
    error: str | None = None
    given_s: float | None = None
    elapsed_s: float | None = None
    phase: str | None = None
    world_rank: Int | None = None

    def __post_init__(self) -> None:
        check_in("rank status", self.status, RANK_STATUSES)
        check_in("rank phase", self.phase, (None, *RANK_PHASES))


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
    """A rule in SuperBench's style: ``metric`` no worse than its reference by ``margin`` (a fraction)."""

    metric: str
    direction: str
    margin: float

    def __post_init__(self) -> None:
        check_in("direction", self.direction, DIRECTIONS)
        if not 0 <= self.margin < 1:
            raise ValueError(f"margin must be a fraction in [0, 1), got {self.margin!r}")


@dataclass(frozen=True)
class Reference:
    """A metric's value in the baseline; ``algo``: the NCCL algorithm behind a bus bandwidth (``RING/SIMPLE``)."""

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
    """Every node of a ``torchrun`` / ``srun`` launch, gathered by rank 0; ``collectives``: the sweeps across the
    world; without a ``baseline`` each node is held against the fleet's median."""

    world_size: Int
    nnodes: Int
    launcher: str  # torchrun | slurm
    nodes: tuple[FleetNode, ...] = ()
    ranks: tuple[RankStatus, ...] = ()
    collectives: tuple[Collectives, ...] = ()
    rules: tuple[Rule, ...] = ()
    baseline: Baseline | None = None
    settings: dict[str, Json] = field(default_factory=dict)
    started: str | None = None
    duration_s: float | None = None
