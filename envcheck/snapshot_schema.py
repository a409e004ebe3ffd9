"""What a snapshot may hold: the types of every field the replay seams read, checked by msgspec once when the
file is read; an unknown field is ignored. A new probe adds what it reads to ``Host``, ``Meta`` or ``NVML_VALUES``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec import Meta as Bounds
from msgspec import Struct, field

from envcheck.outside_json import Form, Json, check_numbers, convert

# A snapshot nests a few levels (section, GPU, query, answer, a structure in it); replaying copies answers
# recursively, so a deeper value could exhaust Python's stack there: refused here instead.
MAX_DEPTH = 32
# The probes read every GPU NVML counts: a count of a billion would be a billion GPUs to make.
MAX_GPUS = 1024
GpuCount = Annotated[int, Bounds(ge=0, le=MAX_GPUS)]


class Meta(Struct):
    id: str | None = None
    title: str | None = None
    captured: datetime | None = None  # becomes a replayed report's ``created``
    envcheck_version: str | None = None
    host: str | None = None
    sources: list[str] = []
    derived: list[str] = []
    hand_written: list[str] = []
    notes: str | list[str] | None = None


class Run(Struct):
    argv: list[str] = []
    returncode: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    timed_out: bool | None = None
    error: str | None = None
    wall_s: float | None = None


class Command(Run, kw_only=True):
    argv: list[str]  # required here


class Python(Struct):
    executable: str | None = None
    version: str | None = None
    prefix: str | None = None
    base_prefix: str | None = None
    include_dir: str | None = None


class Errno(Struct):
    errno: int | None = None
    strerror: str | None = None


class Package(Struct):
    version: str | None = None
    location: str | None = None
    requires: list[str] = []


class Host(Struct):
    machine: str | None = None
    cpu_count: Annotated[int, Bounds(ge=0, le=1 << 20)] | None = None
    cwd: str | None = None
    python: Python = field(default_factory=Python)
    environ: dict[str, str] = {}
    files: dict[str, str | None] = {}
    errors: dict[str, Errno] = {}
    links: dict[str, str] = {}
    dirs: list[str] = []
    which: dict[str, str | None] = {}
    disk_free: int | dict[str, int] = 0
    commands: list[Command] = []
    runs: dict[str, Run] = {}
    packages: dict[str, Package | None] = {}


class NvmlError(Struct):
    error: str | None = None
    text: str | None = None
    during: str | None = None


class Nvml(Struct):
    library: str | None = None
    library_error: str | None = None
    init_error: NvmlError = field(default_factory=NvmlError)
    count: GpuCount | None = None
    failure: NvmlError = field(default_factory=NvmlError)
    gpus: list[dict[str, Json]] = []  # each GPU's answers by query (``answers``)


class Sections(Struct):
    meta: Meta
    host: Host
    nvml: Nvml


def _all_of(name: str, tp: Form, default: object, *fields: str) -> type[Struct]:
    return msgspec.defstruct(name, [(f, tp, default) for f in fields])


class Process(Struct):
    pid: int
    usedGpuMemory: int | None = None  # NVML's name


def _ints(n: int) -> Form:
    return Annotated[list[int], Bounds(min_length=n, max_length=n)]


# The answer type of each NVML query a probe interprets (``probes/gpus.py``), by the query's name without its
# arguments (``nvmlDeviceGetClockInfo[SM]`` is ``nvmlDeviceGetClockInfo``). A query not listed may answer anything.
NVML_VALUES: dict[str, Form] = {
    "nvmlDeviceGetCount": GpuCount,
    **dict.fromkeys((
        "nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetArchitecture", "nvmlDeviceGetNumGpuCores", "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetMemoryBusWidth", "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth",
        "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetTemperature",
        "nvmlDeviceGetPerformanceState", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons"), int),
    **dict.fromkeys((
        "nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion", "nvmlDeviceGetName", "nvmlDeviceGetUUID",
        "nvmlDeviceGetVbiosVersion", "nvmlSystemGetProcessName"), str),
    "nvmlDeviceGetPciInfo": _all_of("PciInfo", str, "", "busId", "busIdLegacy"),  # NVML's names
    "nvmlDeviceGetMemoryInfo": _all_of("MemoryInfo", int, 0, "total", "used", "free"),
    "nvmlDeviceGetUtilizationRates": _all_of("Utilization", int, 0, "gpu", "memory"),
    "nvmlDeviceGetCudaComputeCapability": _ints(2),
    "nvmlDeviceGetEccMode": _ints(2),
    "nvmlDeviceGetMigMode": _ints(2),
    "nvmlDeviceGetRemappedRows": _ints(4),
    "nvmlDeviceGetComputeRunningProcesses": list[Process],
    "nvmlDeviceGetGraphicsRunningProcesses": list[Process],
}


@functools.cache
def _answer(value: Form) -> type[Struct]:
    """One table entry of a query answering ``value``: ``{"value"}``, ``{"values": [...]}`` or ``{"error", "text"}``."""
    return msgspec.defstruct("Answer", [
        ("value", value | None, None), ("values", Annotated[list[value | None], Bounds(min_length=1)], []),
        ("error", str, ""), ("text", str | None, None)])


def answers(table: Mapping[str, Json], where: str) -> None:
    """ValueError naming the first answer (a key ``nvml*``) of ``table`` of the wrong type."""
    for key, entry in table.items():
        if key.startswith("nvml"):
            convert(entry, _answer(NVML_VALUES.get(key.split("[", 1)[0], Any)), f"{where}.{key}")


def check_sections(sections: Mapping[str, Json]) -> None:
    """ValueError naming the first field of the wrong type, integer past 64 bits or value nested too deep."""
    for name, value in sections.items():
        check_numbers(value, name, MAX_DEPTH)
    convert(sections, Sections)
    nvml = sections["nvml"]
    answers(nvml, "nvml")
    for i, gpu in enumerate(nvml.get("gpus") or ()):
        answers(gpu, f"nvml.gpus[{i}]")
