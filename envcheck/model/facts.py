"""Facts about a machine and health verdicts: what probes and checks produce."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "warn", "fail", "skip"]
STATUSES: tuple[str, ...] = ("fail", "warn", "pass", "skip")  # worst first


class ReportError(Exception):
    """A file that cannot be read as an envcheck report (one-line message)."""


@dataclass(frozen=True)
class Fact:
    """One probed value, or the reason it is missing.

    Units live in the key name (``memory_total_bytes``, ``sm_clock_mhz``).
    """

    value: Any = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.value is not None and self.reason is not None:
            raise ValueError("a fact has a value or a reason, not both")

    @property
    def ok(self) -> bool:
        return self.value is not None


def known(value: Any) -> Fact:
    return Fact(value=value)


def missing(reason: str) -> Fact:
    return Fact(reason=reason)


Facts = dict[str, Fact]


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML sees it; ``lost`` is set when the GPU could not be queried at all."""

    index: int
    facts: Facts = field(default_factory=dict)
    lost: str | None = None

    def get(self, key: str) -> Any:
        f = self.facts.get(key)
        return f.value if f else None


@dataclass(frozen=True)
class Environment:
    """Sections of facts (``system``, ``wsl``, ``driver``, ``cuda``, ``env``, ``torch``,
    ``torch_runtime``, ``triton``, ``triton_runtime``) and one entry per GPU."""

    sections: dict[str, Facts] = field(default_factory=dict)
    gpus: tuple[Gpu, ...] = ()
    probe_s: float | None = None  # wall time of the probe

    def get(self, section: str, key: str) -> Any:
        f = self.sections.get(section, {}).get(key)
        return f.value if f else None

    def fact(self, section: str, key: str) -> Fact:
        return self.sections.get(section, {}).get(key) or missing("not probed")


@dataclass(frozen=True)
class Check:
    """One health rule's verdict. ``fix`` is the exact command or setting, when not passing."""

    id: str
    status: Status
    title: str
    finding: str
    fix: str | None = None
    details: str | None = None  # what a crashed subprocess printed, trimmed

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown check status {self.status!r}")
        if "\n" in self.finding:
            raise ValueError("a finding is one line")
