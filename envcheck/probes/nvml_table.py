"""NVML as a table of answers, recorded from the live library and replayed to the probes (``check --replay``, the
tests, the NVML child's hand-back)::

    {"library": "/usr/lib/wsl/lib/libnvidia-ml.so.1",       # or "library_error": "<reason>"
     "init_error": {"error": "NVMLError_DriverNotLoaded", "text": "Driver Not Loaded"},  # when init failed
     "nvmlSystemGetDriverVersion": {"value": "576.02"}, "count": 1,
     "gpus": [{"nvmlDeviceGetClockInfo[SM]": {"value": 210},
               "nvmlDeviceGetEccMode": {"error": "NVMLError_NotSupported", "text": "Not Supported"}}],
     "failure": {"error": "crashed with SIGSEGV", "during": "nvmlDeviceGetPowerUsage on GPU 0"}}

Enum arguments are keyed by name, others by value (``nvmlSystemGetProcessName[4242]``); ``{"values": [...]}``
answers one per call, the last repeating. ``failure``: every answer the crashed or hung reader never gave fails
with that story."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING

from envcheck.probes import nvml as n
from envcheck.probes.nvml import PROBE_FAILED, NvmlCallError, NvmlLike, NvmlSeam

if TYPE_CHECKING:
    from envcheck.outside_json import Json

# Enum arguments -> the names tables use for them.
_CLOCKS = {n.CLOCK_GRAPHICS: "GRAPHICS", n.CLOCK_SM: "SM", n.CLOCK_MEM: "MEM", n.CLOCK_VIDEO: "VIDEO"}
LABELS: dict[str, tuple[dict[int, str], ...]] = {
    "nvmlDeviceGetClockInfo": (_CLOCKS,),
    "nvmlDeviceGetMaxClockInfo": (_CLOCKS,),
    "nvmlDeviceGetTemperature": ({n.TEMPERATURE_GPU: "GPU"},),
    "nvmlDeviceGetTotalEccErrors": (
        {n.MEMORY_ERROR_CORRECTED: "CORRECTED", n.MEMORY_ERROR_UNCORRECTED: "UNCORRECTED"},
        {n.ECC_COUNTER_VOLATILE: "VOLATILE", n.ECC_COUNTER_AGGREGATE: "AGGREGATE"},
    ),
    "nvmlDeviceGetRetiredPages": ({n.PAGE_RETIREMENT_MULTIPLE_SINGLE_BIT: "SBE", n.PAGE_RETIREMENT_DOUBLE_BIT: "DBE"},),
    "nvmlDeviceGetTemperatureThreshold": ({
        n.TEMPERATURE_THRESHOLD_SHUTDOWN: "SHUTDOWN", n.TEMPERATURE_THRESHOLD_SLOWDOWN: "SLOWDOWN",
        n.TEMPERATURE_THRESHOLD_MEM_MAX: "MEM_MAX", n.TEMPERATURE_THRESHOLD_GPU_MAX: "GPU_MAX"},),
}

HANDLE_BY_INDEX = "nvmlDeviceGetHandleByIndex"
# What a table without an answer says: hand-written fixtures leave out what an old driver lacks.
FUNCTION_NOT_FOUND = ("NVMLError_FunctionNotFound", "Function Not Found")


def table_key(name: str, args: tuple[Json, ...]) -> str:
    """``nvmlDeviceGetClockInfo[SM]`` for ``("nvmlDeviceGetClockInfo", (CLOCK_SM,))`` (handle removed)."""
    if not args:
        return name
    labels = LABELS.get(name, ())
    names = [labels[i].get(a, str(a)) if i < len(labels) else str(a) for i, a in enumerate(args)]
    return f"{name}[{','.join(names)}]"


def failure_text(failure: dict[str, Json]) -> str:
    """``crashed with SIGSEGV in nvmlDeviceGetPowerUsage on GPU 1`` from a table's ``failure``."""
    during = failure.get("during")
    return f"{failure.get('error') or 'failed'}" + (f" in {during}" if during else "")


def _error(name: str, entry: dict[str, Json]) -> NvmlCallError:
    return NvmlCallError(name, str(entry["error"]), str(entry.get("text") or entry["error"]))


def _failed(name: str, failure: dict[str, Json]) -> NvmlCallError:
    return NvmlCallError(name, PROBE_FAILED, failure_text(failure))


class TableHandle:
    """A device handle of a replayed NVML: the GPU's index (no dataclass: it costs the NVML child's start-up)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"TableHandle({self.index})"


class TableNvml(NvmlSeam):
    """The NVML seam answered from a table. ``absent``: the NVML error (class name, text) for a query the table
    lacks; snapshots use ``NOT_CAPTURED`` so a probe newer than the snapshot says so."""

    def __init__(self, table: dict[str, Json], absent: tuple[str, str] = FUNCTION_NOT_FOUND) -> None:
        self.table = copy.deepcopy(table)
        self.absent = absent
        self.calls: list[tuple[object, ...]] = []
        self.init_count = 0
        self.shutdown_count = 0
        self._ready = False
        self._positions: dict[tuple[int | None, str], int] = {}

    @property
    def failure(self) -> dict[str, Json] | None:
        f = self.table.get("failure")
        return f if isinstance(f, dict) else None

    def init(self) -> str | None:
        self.init_count += 1
        err = self.table.get("init_error")
        if isinstance(err, dict):
            return str(err.get("text") or err.get("error") or "NVML error")
        if self.failure and "count" not in self.table and not any(k.startswith("nvml") for k in self.table):
            return f"the NVML probe process {failure_text(self.failure)}"  # it died before nvmlInit answered
        self._ready = True
        return None

    def call(self, name: str, *args: object) -> Json:
        self.calls.append((name, *args))
        if not self._ready:
            raise NvmlCallError(name, "NVMLError_Uninitialized", "Uninitialized")
        if name == "nvmlDeviceGetCount" and "count" in self.table:
            return self.table["count"]
        if name == HANDLE_BY_INDEX:
            return self._handle(name, int(args[0]))
        if name in ("nvmlDeviceGetHandleByUUID", "nvmlDeviceGetHandleByPciBusId"):
            return self._find(name, str(args[0]))
        if args and isinstance(args[0], TableHandle):
            gpu: int | None = args[0].index
            rest = args[1:]
            gpus = self.table.get("gpus") or []
            source = gpus[gpu] if gpu < len(gpus) else {}
        else:
            gpu, rest, source = None, args, self.table
        key = table_key(name, rest)
        entry = source.get(key)
        if not isinstance(entry, dict):
            raise _failed(name, self.failure) if self.failure else NvmlCallError(name, *self.absent)
        if "error" in entry:
            raise _error(name, entry)
        if "values" in entry:
            pos = self._positions.get((gpu, key), 0)
            self._positions[(gpu, key)] = pos + 1
            return copy.deepcopy(entry["values"][min(pos, len(entry["values"]) - 1)])
        return copy.deepcopy(entry.get("value"))

    def _handle(self, name: str, index: int) -> TableHandle:
        count = self.table.get("count")
        if not isinstance(count, int) or not 0 <= index < count:
            raise NvmlCallError(name, "NVMLError_InvalidArgument", "Invalid Argument")
        gpus = self.table.get("gpus") or []
        if index >= len(gpus) and self.failure:
            raise _failed(name, self.failure)
        entry = gpus[index].get(HANDLE_BY_INDEX) if index < len(gpus) else None
        if isinstance(entry, dict) and "error" in entry:
            raise _error(name, entry)
        return TableHandle(index)

    def _find(self, name: str, ident: str) -> TableHandle:
        """A handle by UUID or PCI bus id, as NVML matches them (bus ids case-insensitively)."""
        for index, gpu in enumerate(self.table.get("gpus") or []):
            uuid = (gpu.get("nvmlDeviceGetUUID") or {}).get("value")
            pci = (gpu.get("nvmlDeviceGetPciInfo") or {}).get("value") or {}
            bus_ids = {str(pci.get("busId", "")).lower(), str(pci.get("busIdLegacy", "")).lower()}
            if ident == uuid or ident.lower() in bus_ids:
                return self.call(HANDLE_BY_INDEX, index)
        raise NvmlCallError(name, "NVMLError_NotFound", "Not Found")

    def library_path(self) -> tuple[str | None, str | None]:
        if not self._ready:
            return None, "NVML is not loaded"
        path = self.table.get("library")
        why = str(self.table.get("library_error") or "libnvidia-ml not found in this process's memory map")
        return (str(path), None) if path else (None, why)

    def shutdown(self) -> None:
        self.shutdown_count += 1
        self._ready = False


Listener = Callable[[str, "int | None", "dict[str, Json] | None"], None]


class RecordingNvml(NvmlSeam):
    """A live NVML seam that tells each answer as the probes ask: ``listener(event, gpu, entry)`` hears
    ``("calling", gpu, {"key": ...})`` before each call and ``("answer", gpu, {"key": ..., **entry})`` after it, so a
    child reports each answer as it comes (if the next call crashes it, what came before survives)."""

    def __init__(self, live: NvmlLike, listener: Listener | None = None) -> None:
        self.live = live
        self.listener = listener
        self.events: list[dict[str, Json]] = []
        self._handles: dict[int, int] = {}  # id(handle) -> GPU index
        self._keep: list[object] = []  # the handles themselves, so no id is reused while recording
        self._inited = False

    @property
    def table(self) -> dict[str, Json]:
        return table_from_events(self.events)[0]

    def _tell(self, event: str, gpu: int | None, entry: dict[str, Json]) -> None:
        self.events.append({"event": event, "gpu": gpu, **entry})
        if self.listener is not None:
            self.listener(event, gpu, entry)

    def init(self) -> str | None:
        if self._inited:
            return self.live.init()
        self._inited = True
        self._tell("calling", None, {"key": "nvmlInit"})
        err = self.live.init()
        if err is None:
            self._tell("answer", None, {"key": "nvmlInit", "value": None})
        else:
            name = getattr(self.live, "init_error_name", None) or "NVMLError"
            self._tell("answer", None, {"key": "init_error", "error": name, "text": err})
        return err

    def call(self, name: str, *args: object) -> Json:
        gpu: int | None = None
        rest = args
        if name == HANDLE_BY_INDEX:
            gpu, rest = int(args[0]), ()
        elif args and id(args[0]) in self._handles:
            gpu, rest = self._handles[id(args[0])], args[1:]
        key = table_key(name, rest)
        self._tell("calling", gpu, {"key": key})
        try:
            value = self.live.call(name, *args)
        except NvmlCallError as e:
            self._tell("answer", gpu, {"key": key, "error": e.error_name, "text": e.text})
            raise
        if name == HANDLE_BY_INDEX:
            self._handles[id(value)] = int(args[0])
            self._keep.append(value)
            self._tell("answer", gpu, {"key": key, "value": None})
        elif name == "nvmlDeviceGetCount":
            self._tell("answer", None, {"key": "count", "value": value})
        else:
            self._tell("answer", gpu, {"key": key, "value": value})
        return value

    def library_path(self) -> tuple[str | None, str | None]:
        path, why = self.live.library_path()
        self._tell("answer", None, {"key": "library" if path else "library_error", "value": path or why})
        return path, why

    def shutdown(self) -> None:
        self.live.shutdown()


def table_from_events(events: list[dict[str, Json]]) -> tuple[dict[str, Json], str | None]:
    """(the table, the call under way when the events stop) from a RecordingNvml's events in order."""
    table: dict[str, Json] = {}
    pending: str | None = None
    for ev in events:
        kind, gpu, key = ev.get("event"), ev.get("gpu"), ev.get("key")
        if not isinstance(key, str):
            continue
        where = f"{key} on GPU {gpu}" if isinstance(gpu, int) else key
        if kind == "calling":
            pending = where
            continue
        if kind != "answer":
            continue
        pending = None
        entry = {k: v for k, v in ev.items() if k in ("value", "error", "text")}
        if key in ("count", "library", "library_error"):
            table[key] = entry.get("value")
        elif key == "init_error":
            table["init_error"] = {"error": entry.get("error"), "text": entry.get("text")}
        elif isinstance(gpu, int):
            gpus = table.setdefault("gpus", [])
            gpus.extend({} for _ in range(gpu + 1 - len(gpus)))
            gpus[gpu][key] = entry
        elif key != "nvmlInit":
            table[key] = entry
    return table, pending
