"""The report: one machine's environment, checks and benchmark results (raw)."""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.model.bench import Bench
from envcheck.model.burn import Burn
from envcheck.model.crosscheck import Crosscheck
from envcheck.model.facts import Check, Environment, check_in
from envcheck.model.fleet import Fleet
from envcheck.model.node import Node
from envcheck.outside_json import Int

SCHEMA_VERSION = 5
KINDS = ("probe", "check", "run", "fleet", "burn")


@dataclass(frozen=True)
class ReplaySource:
    """The snapshot a replayed report was made from: its file name, host, and when."""

    file: str
    host: str
    replayed: str
    captured: str | None = None


@dataclass(frozen=True)
class Report:
    """What one envcheck command found: ``benches`` one per device, ``node`` its GPUs' links, ``fleet`` every node;
    ``anonymized``: identifying values are stable pseudonyms; ``replayed_from``: the facts are a snapshot's."""

    tool_version: str
    created: str  # ISO 8601, UTC, seconds
    host: str
    kind: str
    environment: Environment
    checks: tuple[Check, ...] = ()
    benches: tuple[Bench, ...] = ()
    node: Node | None = None
    fleet: Fleet | None = None
    burn: Burn | None = None
    crosscheck: Crosscheck | None = None
    anonymized: bool = False
    replayed_from: ReplaySource | None = None
    schema_version: Int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        check_in("report kind", self.kind, KINDS)
        if (self.kind == "fleet") != (self.fleet is not None):
            raise ValueError("a fleet report, and only a fleet report, has a fleet section")

    @property
    def bench(self) -> Bench | None:
        """The first device's bench: what single-GPU views show."""
        return self.benches[0] if self.benches else None

    @property
    def verdict(self) -> str:
        """Worst check status: fail > warn > pass (skip never decides)."""
        statuses = {c.status for c in self.checks}
        return next((s for s in ("fail", "warn") if s in statuses), "pass")

    @property
    def gpu_name(self) -> str | None:
        bench = self.bench
        if bench and bench.device.backend == "cuda":
            return bench.device.name
        return next((str(g.get("name")) for g in self.environment.gpus if g.get("name")), None)
