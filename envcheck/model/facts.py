"""Facts about a machine and health verdicts: what probes and checks produce."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Union

from envcheck.errors import Said
from envcheck.outside_json import Form, Int, Json

Status = Literal["pass", "warn", "fail", "skip"]
STATUSES: tuple[str, ...] = ("fail", "warn", "pass", "skip")  # worst first


class ReportError(Said):
    """A file that cannot be read as an envcheck report (one-line message)."""


def check_in(what: str, value: object, allowed: tuple[object, ...], known: bool = False) -> None:
    """ValueError ``unknown <what> <value>`` (``known``: naming the allowed values) unless ``value`` is one."""
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}" + (f" (known: {', '.join(map(str, allowed))})" if known else ""))


@dataclass(frozen=True)
class Fact:
    """One probed value, or the reason it is missing; units live in the key (``memory_total_bytes``)."""

    value: Json = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.value is not None and self.reason is not None:
            raise ValueError("a fact has a value or a reason, not both")

    @property
    def ok(self) -> bool:
        return self.value is not None


def known(value: Json) -> Fact:
    return Fact(value=value)


def missing(reason: str) -> Fact:
    return Fact(reason=reason)


Facts = dict[str, Fact]

Number = Union[Int, float]  # noqa: UP007 (a runtime alias)
Objects = list[dict[str, Json]]
# The type of each fact value the analysis, renderers or comparisons read: loading a report refuses another type
# with the field named. Keys not listed are free-form.
GPU_FACT_TYPES: dict[str, Form] = {
    **dict.fromkeys(("name", "uuid", "serial", "architecture", "compute_capability", "pci_bus_id", "vbios_version",
                     "compute_mode", "fabric_state", "fabric_status"), str),
    **dict.fromkeys(("memory_total_bytes", "sm_count", "memory_bus_width_bits", "pcie_gen", "pcie_gen_max",
                     "pcie_width", "pcie_width_max", "ecc_uncorrected_volatile"), Int),
    **dict.fromkeys(("sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_max_mhz", "power_limit_w", "temperature_c",
                     "temperature_margin_c", "temperature_slowdown_c", "temperature_shutdown_c",
                     "temperature_memory_c", "temperature_memory_max_c"), Number),
    **dict.fromkeys(("ecc_mode_current", "retired_pages_pending", "remapped_rows_pending", "mig_mode", "throttled"),
                    bool),
    "throttle_reasons": list, "clock_event_ns": dict,
}
SECTION_FACT_TYPES: dict[str, dict[str, Form]] = {
    "system": {"os_name": str, "kernel": str, "arch": str, "cpu_model": str, "cpu_cores_logical": Int,
               "ram_total_bytes": Int, "container": str, "python_version": str, "python_env": str,
               "python_env_path": str, "python_executable": str},
    "wsl": {"is_wsl": bool, "wsl_version": Int, "distro_name": str},
    "torch": {"version": str, "build": str, "cuda_version": str},
    "torch_runtime": {"cuda_available": bool, "tf32_matmul": bool, "float32_matmul_precision": str},
    "driver": {"driver_version": str, "cuda_driver_version": str, "nvml_error": str},
    "cuda": {"nvcc_version": str, "toolkit_path": str},
    "triton": {"version": str, "ptxas_version": str},
    "triton_runtime": {"smoke_ok": bool, "compile_s": Number},
    "env": {"variables": dict},
    "platform": {"kernel_cmdline_iommu": list, "iommu_groups": Int, "gpu_iommu_domains": dict,
                 "acs_redirect": Objects, "infiniband_ports": Objects, "gpudirect_rdma_module": str,
                 "fabricmanager": str, "python_packages": Objects},
}
# What the peaks and the theoretical bandwidth multiply: 0 (unknown, as under WSL2) or a physical magnitude.
GPU_FACT_RANGES: dict[str, tuple[float, float]] = dict.fromkeys(
    ("sm_count", "memory_bus_width_bits", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_max_mhz"), (1, 1e6))
# The ``links`` section's keys are per GPU, ``gpu<i>.<counter>``: typed by the counter.
LINKS_FACT_TYPES: dict[str, Form] = {"nvlink_errors": Objects, "pcie_replay": Int}
_LINKS_KEY = re.compile(r"gpu\d+\.(.+)")


def fact_type(section: str | None, key: str) -> Form:
    """The type of fact ``key`` of a section (None: of a GPU), or None when it is free-form."""
    if section is None:
        return GPU_FACT_TYPES.get(key)
    if section == "links":
        m = _LINKS_KEY.fullmatch(key)
        return LINKS_FACT_TYPES.get(m.group(1)) if m else None
    return SECTION_FACT_TYPES.get(section, {}).get(key)


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML sees it; ``lost`` is set when the GPU could not be queried at all."""

    index: Int
    facts: Facts = field(default_factory=dict)
    lost: str | None = None

    def get(self, key: str) -> Json:
        f = self.facts.get(key)
        return f.value if f else None


@dataclass(frozen=True)
class Environment:
    """Sections of facts (``system``, ``driver``, ``torch``...) and one entry per GPU."""

    sections: dict[str, Facts] = field(default_factory=dict)
    gpus: tuple[Gpu, ...] = ()
    probe_s: float | None = None  # wall time of the probe

    def get(self, section: str, key: str) -> Json:
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
    # What the rule said as catalogue keys (finding, fix; the title's follows from the id) and text parameters;
    # title/finding/fix above keep the English, for readers of the JSON and for older reports.
    key: str | None = None
    fix_key: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_in("check status", self.status, STATUSES)
        if any(not isinstance(k, str) or not isinstance(v, str) for k, v in self.params.items()):
            raise ValueError("a check's parameters are text")
        if "\n" in self.finding:
            raise ValueError("a finding is one line")
        if self.id.endswith(".internal") and self.status != "fail":  # a rule that could not run (checks/__init__.py)
            object.__setattr__(self, "status", "fail")  # fails, also where an envcheck before issue 36 said warn

    def __hash__(self) -> int:
        return hash((self.id, self.status, self.title, self.finding, self.fix, self.details, self.key,
                     self.fix_key, tuple(sorted(self.params.items()))))
