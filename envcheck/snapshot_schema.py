"""What a snapshot may hold, field by field: the one schema the replay seams rely on.

A snapshot is input from anywhere (a support thread, a hand-edited file), so every field the
replay seams read (``probes/replay.py`` for the ``host`` section, ``probes/nvml_table.py`` for
``nvml``, ``snapshot.Snapshot`` for ``meta``) is checked here, once, when the file is read: a
wrong type is refused with the field named (``host.commands[0].argv: expected a list``) instead
of crashing a probe halfway through a replay. Fields the schema does not know are kept and
ignored, as a newer envcheck's snapshot of the same version may carry more.

To extend it (a new probe reads a new file, command or NVML query): add the field to ``HOST``
or ``META``, or the NVML query's answer type to ``NVML_VALUES``, below.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Integers in a snapshot are counts, sizes, clocks and return codes: 64 bits hold them all; a
# larger one would overflow the probes' float arithmetic.
MAX_INT = 2**63
# A snapshot nests a few levels (section, GPU, query, answer, a structure in it); replaying copies
# answers recursively, so a deeper value could exhaust Python's stack there: refused here instead.
MAX_DEPTH = 32
# The probes read every GPU NVML counts, one after the other: a count of a billion would be
# a billion GPUs to make. No machine has more than this many.
MAX_GPUS = 1024


class SchemaError(Exception):
    """A field of the wrong type; ``str()`` is ``<field>: <problem>``."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where or 'snapshot'}: {problem}")
        self.where = where
        self.problem = problem


Check = Callable[[Any, str], None]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def _fail(where: str, expected: str, value: Any) -> None:
    raise SchemaError(where, f"expected {expected}, found {_kind(value)}")


def string(value: Any, where: str) -> None:
    if not isinstance(value, str):
        _fail(where, "a string", value)


def integer(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(where, "an integer", value)
    if not -MAX_INT < value < MAX_INT:
        raise SchemaError(where, "integer out of range (more than 64 bits)")


def integer_in(low: int, high: int) -> Check:
    def check_range(value: Any, where: str) -> None:
        integer(value, where)
        if not low <= value <= high:
            raise SchemaError(where, f"expected an integer from {low} to {high}, found {value}")

    return check_range


def number(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(where, "a number", value)
    if isinstance(value, int):
        integer(value, where)
    elif not math.isfinite(value):
        raise SchemaError(where, "expected a finite number")


def timestamp(value: Any, where: str) -> None:
    """An ISO 8601 time (``2026-11-25T21:30:00Z``): it becomes a replayed report's ``created``."""
    string(value, where)
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise SchemaError(where, "expected an ISO 8601 time such as 2026-11-25T21:30:00Z") from None


def boolean(value: Any, where: str) -> None:
    if not isinstance(value, bool):
        _fail(where, "true or false", value)


def any_json(value: Any, where: str) -> None:
    """Any JSON value, its integers bounded (answers of queries no probe interprets)."""
    if isinstance(value, dict):
        for k, v in value.items():
            any_json(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            any_json(v, f"{where}[{i}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number(value, where)


def optional(check: Check) -> Check:
    def check_optional(value: Any, where: str) -> None:
        if value is not None:
            check(value, where)

    return check_optional


def list_of(check: Check, min_len: int = 0) -> Check:
    def check_list(value: Any, where: str) -> None:
        if not isinstance(value, list):
            _fail(where, "a list", value)
        if len(value) < min_len:
            raise SchemaError(where, f"expected at least {min_len} item(s)")
        for i, item in enumerate(value):
            check(item, f"{where}[{i}]")

    return check_list


def map_of(check: Check) -> Check:
    def check_map(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            _fail(where, "an object", value)
        for k, v in value.items():
            check(v, f"{where}.{k}")

    return check_map


def either(*checks: Check, expected: str) -> Check:
    def check_either(value: Any, where: str) -> None:
        for c in checks:
            try:
                c(value, where)
                return
            except SchemaError:
                continue
        _fail(where, expected, value)

    return check_either


@dataclass(frozen=True)
class Obj:
    """An object whose known ``fields`` are checked (absent is fine) and other keys kept as they are;
    ``rest(key)`` checks every key ``fields`` does not name, when given."""

    fields: Mapping[str, Check]
    required: tuple[str, ...] = ()
    rest: Callable[[str], Check] | None = None

    def __call__(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            _fail(where, "an object", value)
        for name in self.required:
            if name not in value:
                raise SchemaError(_join(where, name), "missing")
        for k, v in value.items():
            check = self.fields.get(k) or (self.rest(k) if self.rest is not None else None)
            if check is not None:
                check(v, _join(where, k))


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


# --------------------------------------------------------------------------- meta

META = Obj({
    "id": optional(string), "title": optional(string), "captured": optional(timestamp),
    "envcheck_version": optional(string), "host": optional(string),
    "sources": list_of(string), "derived": list_of(string), "hand_written": list_of(string),
    "notes": optional(either(string, list_of(string), expected="a string or a list of strings")),
})

# --------------------------------------------------------------------------- host (probes/replay.py)

_RUN_FIELDS: dict[str, Check] = {
    "argv": list_of(string), "returncode": optional(integer), "stdout": optional(string),
    "stderr": optional(string), "timed_out": optional(boolean), "error": optional(string),
    "wall_s": optional(number),
}

HOST = Obj({
    "machine": optional(string),
    "cpu_count": optional(integer_in(0, 1 << 20)),
    "cwd": optional(string),
    "python": Obj({k: optional(string) for k in ("executable", "version", "prefix", "base_prefix", "include_dir")}),
    "environ": map_of(string),
    "files": map_of(optional(string)),
    "errors": map_of(Obj({"errno": optional(integer), "strerror": optional(string)})),
    "links": map_of(string),
    "dirs": list_of(string),
    "which": map_of(optional(string)),
    "disk_free": either(integer, map_of(integer), expected="an integer or an object of integers"),
    "commands": list_of(Obj(_RUN_FIELDS, required=("argv",))),
    "runs": map_of(Obj(_RUN_FIELDS)),
    "packages": map_of(optional(Obj({"version": optional(string), "location": optional(string),
                                     "requires": list_of(string)}))),
})

# --------------------------------------------------------------------------- nvml (probes/nvml_table.py)


def _int_list(length: int) -> Check:
    def check_ints(value: Any, where: str) -> None:
        list_of(integer)(value, where)
        if len(value) != length:
            raise SchemaError(where, f"expected {length} integers")

    return check_ints


_PROCESSES = list_of(Obj({"pid": integer, "usedGpuMemory": optional(integer)}))

# The answer type of each NVML query a probe interprets (``probes/gpus.py``), by the query's name
# without its arguments (``nvmlDeviceGetClockInfo[SM]`` is ``nvmlDeviceGetClockInfo``). A query not
# listed may answer any JSON value.
NVML_VALUES: dict[str, Check] = {
    "nvmlDeviceGetCount": integer_in(0, MAX_GPUS),
    **{name: integer for name in (
        "nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetArchitecture", "nvmlDeviceGetNumGpuCores", "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetMemoryBusWidth", "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth",
        "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetTemperature",
        "nvmlDeviceGetPerformanceState", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons")},
    **{name: string for name in (
        "nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion", "nvmlDeviceGetName", "nvmlDeviceGetUUID",
        "nvmlDeviceGetVbiosVersion", "nvmlSystemGetProcessName")},
    "nvmlDeviceGetPciInfo": Obj({"busId": string, "busIdLegacy": string}),
    "nvmlDeviceGetMemoryInfo": Obj({"total": integer, "used": integer, "free": integer}),
    "nvmlDeviceGetUtilizationRates": Obj({"gpu": integer, "memory": integer}),
    "nvmlDeviceGetCudaComputeCapability": _int_list(2),
    "nvmlDeviceGetEccMode": _int_list(2),
    "nvmlDeviceGetMigMode": _int_list(2),
    "nvmlDeviceGetRemappedRows": _int_list(4),
    "nvmlDeviceGetComputeRunningProcesses": _PROCESSES,
    "nvmlDeviceGetGraphicsRunningProcesses": _PROCESSES,
}


def _answer(query: str) -> Check:
    """One table entry of ``query``: ``{"value"}``, ``{"values": [...]}`` or ``{"error", "text"}``."""
    check = NVML_VALUES.get(query.split("[", 1)[0], any_json)
    entry = Obj({"value": optional(check), "values": list_of(optional(check), min_len=1), "error": string,
                 "text": optional(string)})

    def check_answer(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            _fail(where, "an object (value, values or error)", value)
        entry(value, where)

    return check_answer


def _answers(value: Any, where: str) -> None:
    """The answers of one GPU, by query."""
    if not isinstance(value, dict):
        _fail(where, "an object", value)
    for key, entry in value.items():
        (_answer(key) if key.startswith("nvml") else any_json)(entry, f"{where}.{key}")


NVML = Obj({
    "library": optional(string),
    "library_error": optional(string),
    "init_error": Obj({"error": optional(string), "text": optional(string)}),
    "count": optional(integer_in(0, MAX_GPUS)),
    "failure": Obj({"error": optional(string), "during": optional(string)}),
    "gpus": list_of(_answers),
}, rest=lambda key: _answer(key) if key.startswith("nvml") else any_json)  # queries are named nvml*

SECTIONS: dict[str, Check] = {"meta": META, "host": HOST, "nvml": NVML}


def check_depth(value: Any, where: str, limit: int = MAX_DEPTH) -> None:
    """SchemaError when ``value`` nests deeper than ``limit`` (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise SchemaError(where, f"nested more than {limit} levels deep, which no snapshot is")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def check_sections(sections: Mapping[str, Any]) -> None:
    """Every section against its schema; SchemaError naming the first field of the wrong type."""
    for name, value in sections.items():
        check_depth(value, name)
    for name, check in SECTIONS.items():
        check(sections.get(name, {}), name)
