"""A fake of the NVML seam (``envcheck.probes.nvml.Nvml``), fed with captured tables.

Tables have the shape of ``tests/fixtures/h200_capture.json["nvml"]``: system
queries at the top level, ``count``, and one dict per GPU under ``gpus``. A
query with enum arguments is keyed by their names, as the capture script
writes them: ``nvmlDeviceGetClockInfo[SM]``,
``nvmlDeviceGetTotalEccErrors[UNCORRECTED,VOLATILE]``, ``nvmlSystemGetProcessName[4242]``.
Each entry is ``{"value": ...}``, ``{"error": "NVMLError_NotSupported", "text": "Not Supported"}``,
or, for values that change between calls (a monitor's samples), ``{"values": [...]}``:
one per call, the last repeating.

A query the table lacks answers NVMLError_FunctionNotFound, as a driver too old
for the function does. Tables under tests/fixtures/nvml/ may name a ``_base``
table and list only what differs from it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envcheck.probes import nvml as n
from envcheck.probes.nvml import NvmlCallError

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"

# Enum arguments -> the names the capture tables use for them.
_CLOCKS = {n.CLOCK_GRAPHICS: "GRAPHICS", n.CLOCK_SM: "SM", n.CLOCK_MEM: "MEM", n.CLOCK_VIDEO: "VIDEO"}
_LABELS: dict[str, tuple[dict[int, str], ...]] = {
    "nvmlDeviceGetClockInfo": (_CLOCKS,),
    "nvmlDeviceGetMaxClockInfo": (_CLOCKS,),
    "nvmlDeviceGetTemperature": ({n.TEMPERATURE_GPU: "GPU"},),
    "nvmlDeviceGetTotalEccErrors": (
        {n.MEMORY_ERROR_CORRECTED: "CORRECTED", n.MEMORY_ERROR_UNCORRECTED: "UNCORRECTED"},
        {n.ECC_COUNTER_VOLATILE: "VOLATILE", n.ECC_COUNTER_AGGREGATE: "AGGREGATE"},
    ),
    "nvmlDeviceGetRetiredPages": ({n.PAGE_RETIREMENT_MULTIPLE_SINGLE_BIT: "SBE", n.PAGE_RETIREMENT_DOUBLE_BIT: "DBE"},),
}

# NVML's own texts for the errors the scenarios raise (pynvml NVMLError._errcode_to_string).
ERROR_TEXTS = {
    "NVMLError_LibraryNotFound": "NVML Shared Library Not Found",
    "NVMLError_DriverNotLoaded": "Driver Not Loaded",
    "NVMLError_LibRmVersionMismatch": "RM has detected an NVML/RM version mismatch.",
    "NVMLError_NoPermission": "Insufficient Permissions",
    "NVMLError_Unknown": "Unknown Error",
    "NVMLError_GpuIsLost": "GPU is lost",
    "NVMLError_NotSupported": "Not Supported",
}


def load_table(name: str) -> dict[str, Any]:
    """A table from tests/fixtures/nvml/<name>.json, with its ``_base`` (if any) merged under it."""
    data = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    base_name = data.pop("_base", None)
    if base_name is None:
        return data
    base = load_table(base_name)
    gpus_over = data.pop("gpus", None)
    table = {**base, **data}
    if gpus_over is not None:
        base_gpus = base["gpus"]
        table["gpus"] = [
            {**copy.deepcopy(base_gpus[min(i, len(base_gpus) - 1)]), **over} for i, over in enumerate(gpus_over)
        ]
        table["count"] = len(table["gpus"])
    return table


@dataclass(frozen=True)
class FakeHandle:
    index: int


class FakeNvml:
    """Same interface as ``Nvml``; answers from ``table`` and records every call in ``calls``."""

    def __init__(self, table: dict[str, Any], init_error: str | None = None) -> None:
        """``init_error``: an NVML error class name (``NVMLError_DriverNotLoaded``) that init() fails with."""
        self.table = copy.deepcopy(table)
        self.init_error = init_error
        self.calls: list[tuple[Any, ...]] = []
        self.init_count = 0
        self.shutdown_count = 0
        self._ready = False
        self._lost: dict[int, tuple[bool, frozenset[str]]] = {}
        self._positions: dict[tuple[int | None, str], int] = {}

    @classmethod
    def fixture(cls, name: str, init_error: str | None = None) -> FakeNvml:
        return cls(load_table(name), init_error=init_error)

    # -- scenarios

    def lose_gpu(self, index: int, *, at_handle: bool = False, keep: Iterable[str] = ()) -> None:
        """Every call on GPU ``index`` raises NVMLError_GpuIsLost (the handle too, if ``at_handle``),
        except the queries named in ``keep``."""
        self._lost[index] = (at_handle, frozenset(keep))

    def set(self, gpu: int | None, key: str, entry: dict[str, Any]) -> None:
        """Replace one table entry (``gpu=None`` for a system query)."""
        target = self.table if gpu is None else self.table["gpus"][gpu]
        target[key] = entry

    # -- the seam's interface

    def init(self) -> str | None:
        self.init_count += 1
        if self.init_error:
            return ERROR_TEXTS.get(self.init_error, self.init_error)
        self._ready = True
        return None

    def call(self, name: str, *args: Any) -> Any:
        self.calls.append((name, *args))
        if not self._ready:
            raise NvmlCallError(name, "NVMLError_Uninitialized", "Uninitialized")
        if name == "nvmlDeviceGetCount":
            return self.table["count"]
        if name == "nvmlDeviceGetHandleByIndex":
            index = args[0]
            if not 0 <= index < self.table["count"]:
                raise NvmlCallError(name, "NVMLError_InvalidArgument", "Invalid Argument")
            if self._lost.get(index, (False,))[0]:
                raise NvmlCallError(name, "NVMLError_GpuIsLost", "GPU is lost")
            return FakeHandle(index)
        if name in ("nvmlDeviceGetHandleByUUID", "nvmlDeviceGetHandleByPciBusId"):
            return self._find(name, str(args[0]))
        if args and isinstance(args[0], FakeHandle):
            gpu: int | None = args[0].index
            rest = args[1:]
            lost = self._lost.get(args[0].index)
            if lost is not None and name not in lost[1]:
                raise NvmlCallError(name, "NVMLError_GpuIsLost", "GPU is lost")
            source = self.table["gpus"][args[0].index]
        else:
            gpu, rest, source = None, args, self.table
        key = _key(name, rest)
        entry = source.get(key)
        if entry is None:
            raise NvmlCallError(name, "NVMLError_FunctionNotFound", "Function Not Found")
        if "error" in entry:
            raise NvmlCallError(name, entry["error"], entry.get("text") or ERROR_TEXTS.get(entry["error"], ""))
        if "values" in entry:
            pos = self._positions.get((gpu, key), 0)
            self._positions[(gpu, key)] = pos + 1
            return copy.deepcopy(entry["values"][min(pos, len(entry["values"]) - 1)])
        return copy.deepcopy(entry["value"])

    def _find(self, name: str, ident: str) -> FakeHandle:
        """A handle by UUID or PCI bus id, as NVML matches them (bus ids case-insensitively)."""
        for index, gpu in enumerate(self.table["gpus"]):
            uuid = gpu.get("nvmlDeviceGetUUID", {}).get("value")
            pci = (gpu.get("nvmlDeviceGetPciInfo", {}).get("value") or {})
            bus_ids = {str(pci.get("busId", "")).lower(), str(pci.get("busIdLegacy", "")).lower()}
            if ident == uuid or ident.lower() in bus_ids:
                return self.call("nvmlDeviceGetHandleByIndex", index)
        raise NvmlCallError(name, "NVMLError_NotFound", "Not Found")

    def query(self, name: str, *args: Any) -> tuple[Any, str | None]:
        try:
            return self.call(name, *args), None
        except NvmlCallError as e:
            return None, e.reason

    def library_path(self) -> tuple[str | None, str | None]:
        if not self._ready:
            return None, "NVML is not loaded"
        path = self.table.get("library")
        return (path, None) if path else (None, "libnvidia-ml not found in this process's memory map")

    def shutdown(self) -> None:
        self.shutdown_count += 1
        self._ready = False


def _key(name: str, args: tuple[Any, ...]) -> str:
    if not args:
        return name
    labels = _LABELS.get(name, ())
    names = [labels[i].get(a, str(a)) if i < len(labels) else str(a) for i, a in enumerate(args)]
    return f"{name}[{','.join(names)}]"
