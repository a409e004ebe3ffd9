"""A fake of the NVML seam (``envcheck.probes.nvml.Nvml``), fed with captured tables.

It is ``envcheck.probes.nvml_table.TableNvml`` (what ``--replay`` answers NVML queries with)
plus scenarios: a GPU that gets lost, an entry replaced.

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
from pathlib import Path
from typing import Any

from envcheck.probes.nvml import NvmlCallError
from envcheck.probes.nvml_table import TableHandle, TableNvml

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"

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

FakeHandle = TableHandle


def load_table(name: str) -> dict[str, Any]:
    """A table from tests/fixtures/nvml/<name>.json, with its ``_base`` (if any) merged under it."""
    return load_table_file(FIXTURES / f"{name}.json")


def load_table_file(path: Path) -> dict[str, Any]:
    """A table from a JSON file, with the table its ``_base`` names (a file beside it) merged under it:
    a variant lists only what differs, GPU by GPU."""
    data = json.loads(path.read_text(encoding="utf-8"))
    base_name = data.pop("_base", None)
    if base_name is None:
        return data
    return merge_tables(load_table_file(path.with_name(f"{base_name}.json")), data)


def merge_tables(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base``: top-level keys replaced, ``gpus`` merged index by index (a
    variant with more GPUs than its base repeats the base's last GPU)."""
    over = dict(over)
    gpus_over = over.pop("gpus", None)
    table = {**copy.deepcopy(base), **over}
    if gpus_over is not None:
        base_gpus = base.get("gpus") or [{}]
        table["gpus"] = [
            {**copy.deepcopy(base_gpus[min(i, len(base_gpus) - 1)]), **g} for i, g in enumerate(gpus_over)
        ]
        table["count"] = len(table["gpus"])
    return table


class FakeNvml(TableNvml):
    """Same interface as ``Nvml``; answers from ``table`` and records every call in ``calls``."""

    def __init__(self, table: dict[str, Any], init_error: str | None = None) -> None:
        """``init_error``: an NVML error class name (``NVMLError_DriverNotLoaded``) that init() fails with."""
        table = dict(table)
        if init_error:
            table["init_error"] = {"error": init_error, "text": ERROR_TEXTS.get(init_error, init_error)}
        super().__init__(table)
        self.init_error = init_error
        self._lost: dict[int, tuple[bool, frozenset[str]]] = {}

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

    def call(self, name: str, *args: Any) -> Any:
        if self._ready:
            if name == "nvmlDeviceGetHandleByIndex" and self._lost.get(args[0], (False,))[0]:
                self.calls.append((name, *args))
                raise NvmlCallError(name, "NVMLError_GpuIsLost", "GPU is lost")
            if args and isinstance(args[0], TableHandle):
                lost = self._lost.get(args[0].index)
                if lost is not None and name not in lost[1]:
                    self.calls.append((name, *args))
                    raise NvmlCallError(name, "NVMLError_GpuIsLost", "GPU is lost")
        return super().call(name, *args)


__all__ = ["ERROR_TEXTS", "FIXTURES", "FakeHandle", "FakeNvml", "load_table"]
