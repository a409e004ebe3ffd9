"""The report: one machine's environment, checks and benchmark results (raw)."""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.model.bench import Bench
from envcheck.model.burn import Burn
from envcheck.model.crosscheck import Crosscheck
from envcheck.model.facts import Check, Environment
from envcheck.model.fleet import Fleet
from envcheck.model.node import Node
from envcheck.outside_json import Int

SCHEMA_VERSION = 5
KINDS = ("probe", "check", "run", "fleet", "burn")


@dataclass(frozen=True)
class ReplaySource:
    """The snapshot a replayed report (``check`` / ``probe --replay``) was made from: the file's name
    (not its path, which names a folder of the machine replaying it), the recorded machine's host,
    when it was captured (ISO 8601; None when the snapshot does not say) and when it was replayed."""

    file: str
    host: str
    replayed: str
    captured: str | None = None


@dataclass(frozen=True)
class Report:
    """What one envcheck command found. ``benches``: one per benchmarked device (GPU or CPU),
    in device order. ``node``: the links between this machine's GPUs and what was measured
    over them. ``fleet`` (kind ``fleet``): every node of a multi-node launch, each shaped like a
    single-node report. ``burn`` (kind ``burn``, or a run with ``--burn``): the burn-in of the
    selected GPUs. ``crosscheck`` (a run with ``--crosscheck``): what independent tools measured of
    the same work (model/crosscheck.py). ``anonymized``: identifying values were replaced by stable pseudonyms.
    ``replayed_from``: the facts are a snapshot's, not this machine's (``created`` is then the
    capture's time when the snapshot records it)."""

    tool_version: str
    created: str  # ISO 8601, UTC, seconds
    host: str
    kind: str
    environment: Environment
    checks: tuple[Check, ...] = ()
    benches: tuple[Bench, ...] = ()
    node: Node | None = None
    fleet: Fleet | None = None
    burn: Burn | None = None  # envcheck burn, run --burn: the burn-in (model/burn.py)
    crosscheck: Crosscheck | None = None  # run --crosscheck: independent tools' numbers (model/crosscheck.py)
    anonymized: bool = False
    replayed_from: ReplaySource | None = None
    schema_version: Int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown report kind {self.kind!r}")
        if (self.kind == "fleet") != (self.fleet is not None):
            raise ValueError("a fleet report, and only a fleet report, has a fleet section")

    @property
    def bench(self) -> Bench | None:
        """The first (or only) device's bench: what single-GPU views show."""
        return self.benches[0] if self.benches else None

    @property
    def verdict(self) -> str:
        """Worst check status: fail > warn > pass (skip never decides)."""
        statuses = {c.status for c in self.checks}
        for s in ("fail", "warn"):
            if s in statuses:
                return s
        return "pass"

    @property
    def gpu_name(self) -> str | None:
        bench = self.bench
        if bench and bench.device.backend == "cuda":
            return bench.device.name
        for g in self.environment.gpus:
            if g.get("name"):
                return g.get("name")
        return None
