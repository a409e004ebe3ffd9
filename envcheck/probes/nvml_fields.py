"""NVML field values (``nvmlDeviceGetFieldValues``): counters and properties that have no query of their own, for
the GPU probes (clock-event counters, memory temperature) and the node topology (NVLink counts and speeds)."""

from __future__ import annotations

from typing import Any

from envcheck.probes.nvml import NvmlCallError, NvmlLike

# NVML field ids (nvml.h) the GPU probes read
FI_MEMORY_TEMP = 82  # NVML_FI_DEV_MEMORY_TEMP: HBM temperature, C (nvidia-smi: Memory Current Temp)
# NVML_FI_DEV_CLOCKS_EVENT_REASON_*: ns in each reason since the driver loaded (nvidia-smi -q -d PERFORMANCE).
CLOCK_EVENT_COUNTERS: dict[str, int] = {
    "sw_power_cap": 74, "sync_boost": 76, "sw_thermal_slowdown": 269, "hw_thermal_slowdown": 270,
    "hw_power_brake_slowdown": 271,
}

# nvmlReturn_t names for field values that failed individually
_RETURN_NAMES = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions",
                 6: "Not Found", 13: "Function Not Found", 15: "GPU is lost", 999: "Unknown Error"}
# nvmlValueType_t -> the union member holding the value; the capture script's short names too
_VALUE_KEYS = {0: ("dVal", "d"), 1: ("uiVal", "ui"), 2: ("ulVal", "ul"), 3: ("ullVal", "ull"),
               4: ("sllVal", "sll"), 5: ("siVal", "si"), 6: ("usVal", "us")}


def field_value(nvml: NvmlLike, handle: Any, field_id: int, scope: int = 0) -> tuple[Any, str | None]:
    """One NVML field value: ``(value, None)``, or ``(None, reason)`` when the call or the field failed."""
    try:
        answer = nvml.call("nvmlDeviceGetFieldValues", handle, [(field_id, scope)])
    except NvmlCallError as e:
        return None, e.reason
    entry = answer[0] if isinstance(answer, list) and answer else answer
    if not isinstance(entry, dict):
        return None, f"unexpected field value {entry!r:.80}"
    ret = entry.get("nvmlReturn", 0)
    if ret:
        return None, f"field {field_id}: {_RETURN_NAMES.get(ret, f'NVML error {ret}')}"
    union = entry.get("value")
    key = next((k for k in _VALUE_KEYS.get(entry.get("valueType"), ()) if isinstance(union, dict) and k in union), None)
    if key is not None:
        return union[key], None
    return None, f"field {field_id}: value of unknown type {entry.get('valueType')!r}"
