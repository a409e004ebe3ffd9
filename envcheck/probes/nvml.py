"""The one seam between envcheck and NVML: every call through :class:`Nvml` (or a table with its interface), values
as plain JSON-ready data. ``pynvml`` is imported only in :meth:`Nvml.init`, so ``--help`` works on a machine whose
NVIDIA stack is broken; the enum values envcheck passes are here, so fakes need no pynvml.
"""

from __future__ import annotations

import contextlib
import ctypes
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from envcheck.outside_json import Json  # what pynvml answers, as plain data: checked where it is read

# --------------------------------------------------------------------------- NVML enums (nvml.h)

# nvmlClockType_t
CLOCK_GRAPHICS = 0
CLOCK_SM = 1
CLOCK_MEM = 2
CLOCK_VIDEO = 3

# nvmlTemperatureSensors_t
TEMPERATURE_GPU = 0

# nvmlTemperatureThresholds_t (nvidia-smi -q: Temperature: GPU Shutdown / Slowdown / Max Operating / Memory Max)
TEMPERATURE_THRESHOLD_SHUTDOWN = 0
TEMPERATURE_THRESHOLD_SLOWDOWN = 1
TEMPERATURE_THRESHOLD_MEM_MAX = 2
TEMPERATURE_THRESHOLD_GPU_MAX = 3

# nvmlComputeMode_t (nvidia-smi -q: Compute Mode)
COMPUTE_MODES: dict[int, str] = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}

# nvmlGpuFabricState_t (nvidia-smi -q: Fabric: State): NVSwitch systems register each GPU with the fabric manager.
FABRIC_STATES: dict[int, str] = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}

# nvmlMemoryErrorType_t
MEMORY_ERROR_CORRECTED = 0
MEMORY_ERROR_UNCORRECTED = 1

# nvmlEccCounterType_t
ECC_COUNTER_VOLATILE = 0  # since the last driver load
ECC_COUNTER_AGGREGATE = 1  # lifetime of the board (kept in the infoROM)

# nvmlPageRetirementCause_t
PAGE_RETIREMENT_MULTIPLE_SINGLE_BIT = 0
PAGE_RETIREMENT_DOUBLE_BIT = 1

# nvmlPstates_t: NVML_PSTATE_UNKNOWN
PSTATE_UNKNOWN = 32

# nvmlDeviceArchitecture_t -> the name nvidia-smi -q prints as "Product Architecture"
ARCHITECTURES: dict[int, str] = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}

# nvmlClocksEventReasons (formerly "clocks throttle reasons"): bit -> name used in reports.
CLOCKS_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

# Reasons that mean the GPU runs slower than it could (idle, pinned clocks and sync_boost do not).
SLOWING_REASONS: frozenset[str] = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)
# The slowing reasons whose cause is heat (the fix is cooling, not the power limit).
THERMAL_REASONS: frozenset[str] = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})


def reason_names(mask: int) -> list[str]:
    """Names of the clock-event reasons set in ``mask``, lowest first; an unknown bit as ``unknown_0x...``."""
    bits = [1 << i for i in range(int(mask).bit_length()) if int(mask) >> i & 1]
    return [CLOCKS_EVENT_REASONS.get(bit, f"unknown_{bit:#x}") for bit in bits]


def slowing(names: list[str] | tuple[str, ...]) -> list[str]:
    return [n for n in names if n in SLOWING_REASONS]


# --------------------------------------------------------------------------- errors

# NVML error class name -> what it means for the field being read.
_MEANINGS: dict[str, str] = {
    "NVMLError_NotSupported": "not supported on this GPU",
    "NVMLError_NoPermission": "no permission",
    "NVMLError_GpuIsLost": "GPU is lost",
    "NVMLError_FunctionNotFound": "not available in this driver",
    "NVMLError_NotFound": "not found",
    "NVMLError_Uninitialized": "NVML is not initialised",
    "NVMLError_InvalidArgument": "invalid argument",
    "NVMLError_Timeout": "timed out",
    "NVMLError_ResetRequired": "GPU requires a reset",
    "NVMLError_CorruptedInforom": "corrupted infoROM",
    "NVMLError_DriverNotLoaded": "NVIDIA driver not loaded",
    "NVMLError_LibRmVersionMismatch": "driver/library version mismatch",
    "NVMLError_OperatingSystem": "blocked by the operating system",
    "NVMLError_Unknown": "NVML error",
    "NVMLLibraryMismatchError": "nvidia-ml-py does not match this driver",
    "MissingBinding": "not available in this nvidia-ml-py",
}

GPU_IS_LOST = "NVMLError_GpuIsLost"
# Not NVML's own errors: the NVML child crashed or hung before this answer; a snapshot holds no answer.
PROBE_FAILED = "EnvcheckNvmlProbeFailed"
NOT_CAPTURED = "EnvcheckNotCaptured"

# Errors that will not change on the next call: a sampler stops asking.
PERMANENT_ERRORS: frozenset[str] = frozenset(
    {"NVMLError_NotSupported", "NVMLError_FunctionNotFound", "NVMLError_NoPermission", "MissingBinding", GPU_IS_LOST,
     PROBE_FAILED, NOT_CAPTURED}
)


class NvmlCallError(Exception):
    """One failed NVML call: the function, the NVML error class name and its text."""

    def __init__(self, name: str, error_name: str, text: str) -> None:
        super().__init__(f"{name}: {text} ({error_name})")
        self.name = name
        self.error_name = error_name
        self.text = text

    @property
    def reason(self) -> str:
        """Short text for a missing fact, e.g. ``not supported on this GPU (NVML: Not Supported)``."""
        if self.error_name == PROBE_FAILED:
            return f"not read: the NVML probe process {self.text}"
        if self.error_name == NOT_CAPTURED:
            return "not captured in this snapshot"
        return f"{_MEANINGS.get(self.error_name, 'NVML error')} (NVML: {self.text})"


def plain(value: object) -> Json:
    """JSON-ready data from what pynvml returns (the shape the capture tables store)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    # Unions too: nvmlDeviceGetFieldValues answers an array of structures holding a value union.
    if isinstance(value, (ctypes.Structure, ctypes.Union)):
        return {f[0]: plain(getattr(value, f[0])) for f in value._fields_}
    if isinstance(value, (list, tuple, ctypes.Array)):
        return [plain(x) for x in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "__dict__"):  # pynvml.nvmlFriendlyObject (process lists)
        return {k: plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return value


def _library_from_maps(maps_text: str) -> str | None:
    """Path of the libnvidia-ml mapped into this process, from /proc/self/maps text."""
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and "libnvidia-ml" in Path(parts[5]).name:
            return parts[5].strip()
    return None


class NvmlLike(Protocol):

    def init(self) -> str | None: ...
    def call(self, name: str, *args: object) -> Json: ...
    def query(self, name: str, *args: object) -> tuple[Json, str | None]: ...
    def library_path(self) -> tuple[str | None, str | None]: ...
    def shutdown(self) -> None: ...


class NvmlSeam:
    """What every NVML seam (live, table, recording) shares: ``query`` on top of its ``call``."""

    def call(self, name: str, *args: object) -> Json:
        raise NotImplementedError

    def query(self, name: str, *args: object) -> tuple[Json, str | None]:
        """``(value, None)``, or ``(None, reason)`` when the call failed. Never raises."""
        try:
            return self.call(name, *args), None
        except NvmlCallError as e:
            return None, e.reason


# Queries that fill a structure the caller passes: the seam makes it and answers its fields, as plain data.
STRUCT_QUERIES: dict[str, str] = {"nvmlDeviceGetGpuFabricInfo": "c_nvmlGpuFabricInfo_t"}


class Nvml(NvmlSeam):
    """NVML through pynvml, every failure turned into data; ``init``'s first answer stands until ``shutdown``."""

    def __init__(self) -> None:
        self._lib: ModuleType | None = None
        self._init_result: str | None = None
        self._tried = False
        self.init_error_name: str | None = None

    @property
    def ready(self) -> bool:
        return self._lib is not None

    def init(self) -> str | None:
        """Load and initialise NVML: None when it worked, else NVML's own error text (``nvmlErrorString``: "Driver
        Not Loaded", "RM has detected an NVML/RM version mismatch." after a driver upgrade without a reboot)."""
        if self._tried:
            return self._init_result
        self._tried = True
        self._init_result = self._load()
        return self._init_result

    def _load(self) -> str | None:
        try:
            import pynvml
        except ImportError as e:
            self.init_error_name = "ImportError"
            return f"the nvidia-ml-py package is not installed ({e}): pip install nvidia-ml-py"
        try:
            pynvml.nvmlInit()
        except Exception as e:  # noqa: BLE001 - any failure here is a finding, never a crash
            self.init_error_name = type(e).__name__
            return str(e) or type(e).__name__
        self._lib = pynvml
        return None

    def call(self, name: str, *args: object) -> Json:
        """``pynvml.<name>(*args)`` as plain data; raises :class:`NvmlCallError` on any failure."""
        if self._lib is None:
            raise NvmlCallError(name, "NVMLError_Uninitialized", "Uninitialized")
        fn = getattr(self._lib, name, None)
        if fn is None:
            # An older nvidia-ml-py lacks bindings for newer NVML functions.
            raise NvmlCallError(name, "MissingBinding", f"pynvml has no {name}; pip install -U nvidia-ml-py")
        struct_type = getattr(self._lib, STRUCT_QUERIES[name], None) if name in STRUCT_QUERIES else None
        if name in STRUCT_QUERIES and struct_type is None:
            raise NvmlCallError(name, "MissingBinding", f"pynvml has no {STRUCT_QUERIES[name]}; pip install -U nvidia-ml-py")
        try:
            if struct_type is not None:
                out = struct_type()
                fn(*args, ctypes.byref(out))
                return plain(out)
            value = fn(*args)
        except Exception as e:  # noqa: BLE001 - NVMLError subclasses and binding mismatches alike
            raise NvmlCallError(name, type(e).__name__, str(e) or type(e).__name__) from None
        return value if name.startswith("nvmlDeviceGetHandleBy") else plain(value)  # a handle: an opaque pointer

    def library_path(self) -> tuple[str | None, str | None]:
        """``(path, None)`` of the libnvidia-ml this process loaded, or ``(None, reason)``."""
        if self._lib is None:
            return None, "NVML is not loaded"
        try:
            text = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            return None, f"cannot read /proc/self/maps ({e.strerror})"
        path = _library_from_maps(text)
        return (path, None) if path else (None, "libnvidia-ml not found in this process's memory map")

    def shutdown(self) -> None:
        """Release NVML; safe to call twice or after a failed init."""
        lib, self._lib = self._lib, None
        self._tried = False
        if lib is None:
            return
        with contextlib.suppress(Exception):  # nothing useful to do about a failed shutdown
            lib.nvmlShutdown()


# NVML field values (nvmlDeviceGetFieldValues): counters and properties without a query of their own.
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


def field_value(nvml: NvmlLike, handle: object, field_id: int, scope: int = 0) -> tuple[Json, str | None]:
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
