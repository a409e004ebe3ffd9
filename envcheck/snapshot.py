"""A machine in one JSON file: what every probe read at the seams (``envcheck snapshot``), probed again anywhere
without a GPU (``check --replay``). Format: ``{"format": "envcheck-snapshot", "version": 1, "meta": ..., "host":
..., "nvml": ...}``; a problem is one ``SnapshotError`` line naming the field. Every field the replay seams read
is typed below (``Host``, ``Meta``, ``NVML_VALUES``: a new probe adds what it reads) and checked by msgspec once
when the file is read; an unknown field is ignored.
Format history (``version``): 1 - first format (2026-11).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from msgspec import Meta as Bounds
from msgspec import Struct

from envcheck.errors import Said
from envcheck.outside_json import Form, Json, check_numbers, convert, read_json, read_text, versioned
from envcheck.outside_text import encodable

if TYPE_CHECKING:
    from envcheck.probes.nvml_table import TableNvml
    from envcheck.probes.replay import ReplayHost

FORMAT = "envcheck-snapshot"
VERSION = 1
MAX_SNAPSHOT_BYTES = 32 << 20


class SnapshotError(Said):
    """A file that cannot be read as a snapshot (one-line message)."""


@dataclass(frozen=True)
class Snapshot:
    meta: dict[str, Json] = field(default_factory=dict)
    host: dict[str, Json] = field(default_factory=dict)
    nvml: dict[str, Json] = field(default_factory=dict)

    @property
    def hostname(self) -> str:
        return str(self.meta.get("host") or self.meta.get("id") or "snapshot")


# A snapshot nests a few levels (section, GPU, query, answer, a structure in it); replaying copies answers
# recursively, so a deeper value could exhaust Python's stack there: refused here instead.
MAX_DEPTH = 32
# The probes read every GPU NVML counts: a count of a billion would be a billion GPUs to make.
MAX_GPUS = 1024
GpuCount = Annotated[int, Bounds(ge=0, le=MAX_GPUS)]


def _all_of(name: str, tp: Form, default: object, *fields: str) -> type[Struct]:
    return msgspec.defstruct(name, [(f, tp, default) for f in fields])


Python = _all_of("Python", str | None, None, "executable", "version", "prefix", "base_prefix", "include_dir")
NvmlError = _all_of("NvmlError", str | None, None, "error", "text", "during")


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
    python: Python = msgspec.field(default_factory=Python)
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


class Nvml(Struct):
    library: str | None = None
    library_error: str | None = None
    init_error: NvmlError = msgspec.field(default_factory=NvmlError)
    count: GpuCount | None = None
    failure: NvmlError = msgspec.field(default_factory=NvmlError)
    gpus: list[dict[str, Json]] = []  # each GPU's answers by query (``answers``)


class Sections(Struct):
    meta: Meta
    host: Host
    nvml: Nvml


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


def dumps(snap: Snapshot) -> str:
    data = {"format": FORMAT, "version": VERSION, "meta": snap.meta, "host": snap.host, "nvml": snap.nvml}
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def from_dict(data: Json) -> Snapshot:
    """A Snapshot from its JSON form; every field the replay reads is checked (``check_sections``)."""
    versioned(data, FORMAT, "version", VERSION, SnapshotError,
              ("error.not_snapshot", "error.snapshot_newer", "error.snapshot_version"))
    sections: dict[str, Json] = {k: {} if data.get(k) is None else data.get(k) for k in ("meta", "host", "nvml")}
    try:
        check_sections(sections)
    except ValueError as e:
        raise SnapshotError("error.as_is", error=e) from None
    return Snapshot(**sections)


def loads(text: str) -> Snapshot:
    """A Snapshot from its JSON text; every string in it made encodable (``outside_text.encodable``)."""
    return from_dict(read_json(text, SnapshotError, "snapshot"))


def load(path: str | os.PathLike[str]) -> Snapshot:
    """Read a snapshot; every failure is a SnapshotError whose message names the file (and the field)."""
    p = Path(path)
    text = read_text(p, MAX_SNAPSHOT_BYTES, SnapshotError, "snapshot")
    try:
        return loads(text)
    except SnapshotError as e:
        raise SnapshotError("error.flag", flag=p, error=e) from None


def replay(snap: Snapshot) -> tuple[ReplayHost, TableNvml]:
    """(host, nvml): the seams of the recorded machine, for ``collect(host=..., nvml=...)``."""
    from envcheck.probes.nvml import NOT_CAPTURED
    from envcheck.probes.nvml_table import TableNvml
    from envcheck.probes.replay import ReplayHost

    return ReplayHost.from_section(snap.host), TableNvml(snap.nvml, absent=(NOT_CAPTURED, "not captured"))


def capture(timeout: float = 120.0) -> Snapshot:
    """Probe this machine (runtime children included) through recording seams."""
    from envcheck import __version__
    from envcheck.probes.collect import collect, hostname, utc_now
    from envcheck.probes.nvml_isolated import NVML_TIMEOUT_S, IsolatedNvml
    from envcheck.probes.recording import RecordingHost

    host = RecordingHost()
    nvml = IsolatedNvml(host, timeout=min(timeout, NVML_TIMEOUT_S))
    collect(host=host, nvml=nvml, runtime=True, timeout=timeout)
    section = host.section()
    meta = {"id": None, "title": None, "captured": utc_now(), "envcheck_version": __version__, "host": hostname(),
            "sources": ["recorded by envcheck snapshot"], "derived": [], "hand_written": []}
    # What the seams read may hold lone surrogates (bytes that are not UTF-8): made encodable, as loads() does.
    return Snapshot(meta=meta, host=encodable(section), nvml=encodable(nvml.table))
