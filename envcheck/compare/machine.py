"""Which machine a report comes from: its GPUs' UUIDs (else serials), never its host name (one host name can
hand out another GPU on every boot); without either, host and GPU models, never the same machine for certain.
"""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.model import Report


@dataclass(frozen=True)
class GpuId:
    index: int | None
    model: str | None
    uuid: str | None
    serial: str | None


@dataclass(frozen=True)
class MachineId:
    """The identity of a report's machine: its GPUs (as probed, else as benchmarked) and host."""

    host: str
    gpus: tuple[GpuId, ...]

    @property
    def uuids(self) -> frozenset[str] | None:
        """Every GPU's UUID, or None when one of them has none."""
        ids = [g.uuid for g in self.gpus]
        return frozenset(ids) if ids and all(ids) else None  # type: ignore[arg-type]

    @property
    def serials(self) -> frozenset[str] | None:
        ids = [g.serial for g in self.gpus]
        return frozenset(ids) if ids and all(ids) else None  # type: ignore[arg-type]

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted(g.model or "unknown" for g in self.gpus))

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        """What groups reports of one machine: the UUIDs, else the serials, else host and models."""
        if self.uuids is not None:
            return ("uuid", tuple(sorted(self.uuids)))
        if self.serials is not None:
            return ("serial", tuple(sorted(self.serials)))
        return ("host", (self.host, *self.models))


def _uuid(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    return value if value.startswith(("GPU-", "MIG-")) else f"GPU-{value}"


def machine_of(report: Report) -> MachineId:
    gpus = tuple(GpuId(g.index, g.get("name"), _uuid(g.get("uuid")), g.get("serial") or None)
                 for g in report.environment.gpus if not g.lost)
    if not gpus:  # no NVML answer: the benchmarked devices, as the worker saw them
        gpus = tuple(GpuId(b.device.index, b.device.name, _uuid(b.device.uuid), None)
                     for b in report.benches if b.device.backend == "cuda")
    return MachineId(report.host, gpus)


def same_machine(a: MachineId, b: MachineId) -> bool | None:
    """True or False when the hardware says; None when it cannot (only a different host or model is certain)."""
    if a.uuids is not None and b.uuids is not None:
        return a.uuids == b.uuids
    if a.serials is not None and b.serials is not None:
        return a.serials == b.serials
    if a.models != b.models or a.host != b.host:
        return False
    return None
