"""Facts about a machine and health verdicts: what probes and checks produce."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
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

# The type of each fact value that the analysis, the renderers or the comparisons read, by key.
# Loading a report refuses a value of another type (a number where a GPU's name belongs, a string
# clock) with the field named, instead of the analysis tripping over it later. Keys not listed
# here are free-form: shown as recorded. ``int`` and ``number`` values fit in 64 bits.
FactType = Literal["str", "int", "number", "bool", "list", "object", "objects"]  # objects: a list of them

GPU_FACT_TYPES: dict[str, FactType] = {
    "name": "str", "uuid": "str", "serial": "str", "architecture": "str", "compute_capability": "str",
    "pci_bus_id": "str", "vbios_version": "str",
    "memory_total_bytes": "int", "sm_count": "int", "memory_bus_width_bits": "int",
    "pcie_gen": "int", "pcie_gen_max": "int", "pcie_width": "int", "pcie_width_max": "int",
    "ecc_uncorrected_volatile": "int",
    "sm_clock_mhz": "number", "sm_clock_max_mhz": "number", "mem_clock_max_mhz": "number",
    "power_limit_w": "number", "temperature_c": "number",
    "ecc_mode_current": "bool", "retired_pages_pending": "bool", "remapped_rows_pending": "bool", "mig_mode": "bool",
    "throttled": "bool", "throttle_reasons": "list",
    "compute_mode": "str", "fabric_state": "str", "fabric_status": "str", "clock_event_ns": "object",
    "temperature_margin_c": "number", "temperature_slowdown_c": "number", "temperature_shutdown_c": "number", "temperature_memory_c": "number",
    "temperature_memory_max_c": "number",
}

SECTION_FACT_TYPES: dict[str, dict[str, FactType]] = {
    "system": {"os_name": "str", "kernel": "str", "arch": "str", "cpu_model": "str", "cpu_cores_logical": "int",
               "ram_total_bytes": "int", "container": "str", "python_version": "str", "python_env": "str",
               "python_env_path": "str", "python_executable": "str"},
    "wsl": {"is_wsl": "bool", "wsl_version": "int", "distro_name": "str"},
    "torch": {"version": "str", "build": "str", "cuda_version": "str"},
    "torch_runtime": {"cuda_available": "bool", "tf32_matmul": "bool", "float32_matmul_precision": "str"},
    "driver": {"driver_version": "str", "cuda_driver_version": "str", "nvml_error": "str"},
    "cuda": {"nvcc_version": "str", "toolkit_path": "str"},
    "triton": {"version": "str", "ptxas_version": "str"},
    "triton_runtime": {"smoke_ok": "bool", "compile_s": "number"},
    "env": {"variables": "object"},
    "platform": {"kernel_cmdline_iommu": "list", "iommu_groups": "int", "gpu_iommu_domains": "object",
                 "acs_redirect": "objects", "infiniband_ports": "objects", "gpudirect_rdma_module": "str",
                 "fabricmanager": "str", "python_packages": "objects"},
}
# What the peaks and the theoretical bandwidth multiply: 0 (not known, as NVML says under WSL2) or
# a physical magnitude; a negative, tiny or enormous one would draw a roof off every chart.
GPU_FACT_RANGES: dict[str, tuple[float, float]] = dict.fromkeys(
    ("sm_count", "memory_bus_width_bits", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_max_mhz"), (1, 1e6))

# The ``links`` section's keys are per GPU, ``gpu<i>.<counter>``: typed by the counter.
LINKS_FACT_TYPES: dict[str, FactType] = {"nvlink_errors": "objects", "pcie_replay": "int"}
_LINKS_KEY = re.compile(r"gpu\d+\.(.+)")
MAX_FACT_INT = 2**63


def section_fact_type(section: str, key: str) -> FactType | None:
    if section == "links":
        m = _LINKS_KEY.fullmatch(key)
        return LINKS_FACT_TYPES.get(m.group(1)) if m else None
    return SECTION_FACT_TYPES.get(section, {}).get(key)


def fact_type_problem(kind: FactType, value: Any, bounds: tuple[float, float] | None = None) -> str | None:
    """What is wrong with ``value`` as a fact of type ``kind`` (None: nothing; a missing value is never
    wrong); a number with ``bounds`` must be 0 or within them."""
    if value is None:
        return None
    got = {dict: "an object", list: "a list", str: "a string", bool: "true/false"}.get(type(value), "a number")
    if kind == "str":
        return None if isinstance(value, str) else f"expected a string, got {got}"
    if kind == "bool":
        return None if isinstance(value, bool) else f"expected true/false, got {got}"
    if kind in ("int", "number"):
        if isinstance(value, bool) or not isinstance(value, int if kind == "int" else (int, float)):
            return f"expected {'an integer' if kind == 'int' else 'a number'}, got {got}"
        if isinstance(value, int) and not -MAX_FACT_INT < value < MAX_FACT_INT:
            return "integer out of range (more than 64 bits)"
        if isinstance(value, float) and not math.isfinite(value):
            return "expected a finite number"
        if bounds and value != 0 and not bounds[0] <= value < bounds[1]:
            return f"out of range (0, or from {bounds[0]:g} to {bounds[1]:g})"
        return None
    if kind == "object":
        return None if isinstance(value, dict) else f"expected an object, got {got}"
    if not isinstance(value, list):
        return f"expected a list, got {got}"
    if kind == "objects" and not all(isinstance(x, dict) for x in value):
        return "expected a list of objects"
    return None


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
    # What the rule said, as catalogue keys and their parameters (text: versions, paths, commands,
    # errors, already formatted by the rule): ``key`` is the finding, ``fix_key`` the fix; the title's
    # key follows from the id (``check.title.<id without a GPU index>``). title/finding/fix above keep
    # the English, for readers of the JSON and for reports written before checks carried keys.
    key: str | None = None
    fix_key: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown check status {self.status!r}")
        if any(not isinstance(k, str) or not isinstance(v, str) for k, v in self.params.items()):
            raise ValueError("a check's parameters are text")
        if "\n" in self.finding:
            raise ValueError("a finding is one line")

    def __hash__(self) -> int:
        return hash((self.id, self.status, self.title, self.finding, self.fix, self.details, self.key,
                     self.fix_key, tuple(sorted(self.params.items()))))
