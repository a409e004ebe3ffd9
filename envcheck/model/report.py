"""The report: one machine's environment, checks and benchmark results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from envcheck.model.bench import Bench
from envcheck.model.facts import Check, Environment

SCHEMA_VERSION = 1

Kind = Literal["probe", "check", "run"]


@dataclass(frozen=True)
class Report:
    tool_version: str
    created: str  # ISO 8601, UTC, seconds
    host: str
    kind: str
    environment: Environment
    checks: tuple[Check, ...] = ()
    bench: Bench | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.kind not in ("probe", "check", "run"):
            raise ValueError(f"unknown report kind {self.kind!r}")

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
        if self.bench and self.bench.device.backend == "cuda":
            return self.bench.device.name
        for g in self.environment.gpus:
            if g.get("name"):
                return g.get("name")
        return None
