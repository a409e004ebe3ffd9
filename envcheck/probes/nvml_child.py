"""Inside the NVML child (``nvml_isolated.py``): every question the driver and GPU probes ask, each answer sent as
NVML gives it, so a crash or hang in libnvidia-ml keeps the earlier answers and the last ``calling`` event names
the call that never returned. The questions are listed, not found by running the probes, which need
``envcheck.model`` (``tests/test_nvml_isolated.py`` checks the list covers every question)."""

from __future__ import annotations

import faulthandler
from collections.abc import Callable
from typing import TYPE_CHECKING

from envcheck.probes import nvml as n

if TYPE_CHECKING:
    from envcheck.probes.nvml_table import RecordingNvml

# System-wide questions; both CUDA-version calls (older drivers have only the first version).
SYSTEM_QUERIES: tuple[str, ...] = (
    "nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetNVMLVersion",
)

# Per-GPU questions with their arguments after the handle, in the order gpus.py reads them.
DEVICE_QUERIES: tuple[tuple[str, tuple[object, ...]], ...] = (
    ("nvmlDeviceGetName", ()),
    ("nvmlDeviceGetUUID", ()),
    ("nvmlDeviceGetPciInfo", ()),
    ("nvmlDeviceGetCudaComputeCapability", ()),
    ("nvmlDeviceGetArchitecture", ()),
    ("nvmlDeviceGetMemoryInfo", ()),
    ("nvmlDeviceGetNumGpuCores", ()),
    ("nvmlDeviceGetClockInfo", (n.CLOCK_SM,)),
    ("nvmlDeviceGetMaxClockInfo", (n.CLOCK_SM,)),
    ("nvmlDeviceGetClockInfo", (n.CLOCK_MEM,)),
    ("nvmlDeviceGetMaxClockInfo", (n.CLOCK_MEM,)),
    ("nvmlDeviceGetMemoryBusWidth", ()),
    ("nvmlDeviceGetCurrPcieLinkGeneration", ()),
    ("nvmlDeviceGetMaxPcieLinkGeneration", ()),
    ("nvmlDeviceGetCurrPcieLinkWidth", ()),
    ("nvmlDeviceGetMaxPcieLinkWidth", ()),
    ("nvmlDeviceGetPowerUsage", ()),
    ("nvmlDeviceGetEnforcedPowerLimit", ()),
    ("nvmlDeviceGetTemperature", (n.TEMPERATURE_GPU,)),
    ("nvmlDeviceGetPerformanceState", ()),
    ("nvmlDeviceGetEccMode", ()),
    ("nvmlDeviceGetTotalEccErrors", (n.MEMORY_ERROR_UNCORRECTED, n.ECC_COUNTER_VOLATILE)),
    ("nvmlDeviceGetTotalEccErrors", (n.MEMORY_ERROR_UNCORRECTED, n.ECC_COUNTER_AGGREGATE)),
    ("nvmlDeviceGetRetiredPagesPendingStatus", ()),
    ("nvmlDeviceGetRemappedRows", ()),
    ("nvmlDeviceGetMigMode", ()),
    ("nvmlDeviceGetPersistenceMode", ()),
    ("nvmlDeviceGetCurrentClocksEventReasons", ()),
    ("nvmlDeviceGetCurrentClocksThrottleReasons", ()),  # the same, before driver r535
    ("nvmlDeviceGetComputeRunningProcesses", ()),
    ("nvmlDeviceGetGraphicsRunningProcesses", ()),
    ("nvmlDeviceGetUtilizationRates", ()),
    ("nvmlDeviceGetVbiosVersion", ()),
    ("nvmlDeviceGetComputeMode", ()),
    ("nvmlDeviceGetMarginTemperature", ()),
    ("nvmlDeviceGetTemperatureThreshold", (n.TEMPERATURE_THRESHOLD_SLOWDOWN,)),
    ("nvmlDeviceGetTemperatureThreshold", (n.TEMPERATURE_THRESHOLD_SHUTDOWN,)),
    ("nvmlDeviceGetTemperatureThreshold", (n.TEMPERATURE_THRESHOLD_GPU_MAX,)),
    ("nvmlDeviceGetTemperatureThreshold", (n.TEMPERATURE_THRESHOLD_MEM_MAX,)),
    ("nvmlDeviceGetFieldValues", ([(n.FI_MEMORY_TEMP, 0)],)),
    ("nvmlDeviceGetGpuFabricInfo", ()),
    *(("nvmlDeviceGetFieldValues", ([(field_id, 0)],)) for field_id in n.CLOCK_EVENT_COUNTERS.values()),
)
PROCESS_LISTS = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses")


def read_all(nvml: RecordingNvml) -> None:
    """Ask ``nvml`` (a RecordingNvml) every question of the plan; never raises for an NVML error."""
    if nvml.init() is not None:
        return
    nvml.library_path()
    for name in SYSTEM_QUERIES:
        nvml.query(name)
    count, _ = nvml.query("nvmlDeviceGetCount")
    if not isinstance(count, int):
        return
    pids: set[int] = set()
    for index in range(count):
        handle, why = nvml.query("nvmlDeviceGetHandleByIndex", index)
        if why is not None:
            continue
        for name, args in DEVICE_QUERIES:
            value, _ = nvml.query(name, handle, *args)
            if name in PROCESS_LISTS and isinstance(value, list):
                pids.update(p["pid"] for p in value if isinstance(p, dict) and isinstance(p.get("pid"), int))
    for pid in sorted(pids):
        nvml.query("nvmlSystemGetProcessName", pid)


def read(args: object, out: Callable[[dict[str, object]], None]) -> None:
    # A crash inside libnvidia-ml then prints the Python frame it happened under to stderr.
    faulthandler.enable()
    from envcheck.probes.nvml_table import RecordingNvml

    nvml = RecordingNvml(n.Nvml(), lambda event, gpu, entry: out({"event": event, "gpu": gpu, **(entry or {})}))
    try:
        read_all(nvml)
    finally:
        nvml.shutdown()
