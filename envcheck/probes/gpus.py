"""The driver section and one entry per GPU through the NVML seam, a lost GPU never hiding the others. Comments
name the ``nvidia-smi -q`` field of each key."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from envcheck.model import Fact, Facts, Gpu, known, missing
from envcheck.probes import nvml as n
from envcheck.probes.nvml import NvmlCallError, NvmlLike

if TYPE_CHECKING:
    from envcheck.outside_json import Json

    Convert = Callable[[Json], Json]  # what of an answer is the fact

DRIVER_KEYS = ("driver_version", "cuda_driver_version", "nvml_version", "nvml_library", "nvml_error", "gpu_count",
               "nvml_process_error")
NVML_PROCESS_OK = "the NVML probe process finished"

GPU_KEYS = (
    "name", "uuid", "pci_bus_id", "architecture", "memory_total_bytes", "memory_used_bytes",
    "compute_capability", "cuda_cores", "sm_count", "sm_count_source", "sm_clock_mhz", "sm_clock_max_mhz",
    "mem_clock_mhz", "mem_clock_max_mhz", "memory_bus_width_bits",
    "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max", "power_w", "power_limit_w", "temperature_c",
    "pstate", "ecc_mode_current", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate",
    "retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure", "mig_mode", "persistence_mode",
    "throttle_reasons", "throttled", "processes", "utilization_gpu_pct", "vbios_version",
    # what an operator accepting a node checks (envcheck check: checks/operator.py)
    "compute_mode", "temperature_margin_c", "temperature_slowdown_c", "temperature_shutdown_c", "temperature_gpu_max_c",
    "temperature_memory_c", "temperature_memory_max_c", "fabric_state", "fabric_status", "fabric_clique_id",
    "clock_event_ns",
)

# FP32 cores per SM by compute capability, else by its major (CUDA C Programming Guide): NVML reports cores, not SMs.
CORES_PER_SM: dict[str, int] = {"7": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128, "9.0": 128, "10": 128,
                                "11": 128, "12": 128}
# Architecture by compute capability, used only when NVML cannot say.
_ARCH_BY_CC = {"7.0": "Volta", "7.2": "Volta", "7.5": "Turing", "8.9": "Ada Lovelace", "9.0": "Hopper"}
_ARCH_BY_MAJOR = {8: "Ampere", 10: "Blackwell", 11: "Blackwell", 12: "Blackwell"}


def cores_per_sm(compute_capability: str) -> int | None:
    return CORES_PER_SM.get(compute_capability) or CORES_PER_SM.get(compute_capability.split(".")[0])


def sm_count_from_cores(cores: int, cc: str) -> int | None:
    """SM count from NVML's CUDA core count, or None when the capability is unknown or it does not divide."""
    per_sm = cores_per_sm(cc)
    return None if not per_sm or cores <= 0 or cores % per_sm else cores // per_sm


def cuda_version_text(version: int) -> str:
    """``13000`` -> ``"13.0"``, ``12020`` -> ``"12.2"`` (NVML encodes 1000*major + 10*minor)."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def probe_driver(nvml: NvmlLike) -> Facts:
    """The ``driver`` section (nvidia-smi: Driver Version, CUDA Version, Attached GPUs); never raises."""
    from envcheck.probes.nvml_table import failure_text

    init_error = nvml.init()
    # What happened to the child process that read NVML, when it crashed or hung (``nvml_isolated``).
    failure = getattr(nvml, "failure", None)
    process = known(failure_text(failure)) if isinstance(failure, dict) else missing(NVML_PROCESS_OK)
    if init_error is not None:
        failed = {k: missing(f"NVML unavailable: {init_error}") for k in DRIVER_KEYS}
        return failed | {"nvml_error": known(init_error), "nvml_process_error": process}

    facts: Facts = {"driver_version": _derived(*nvml.query("nvmlSystemGetDriverVersion"))}
    v, why = nvml.query("nvmlSystemGetCudaDriverVersion_v2")
    if v is None:
        # Older drivers only have the first version of this call.
        v, why = nvml.query("nvmlSystemGetCudaDriverVersion")
    cuda = cuda_version_text(v) if isinstance(v, int) and v > 0 else None
    facts["cuda_driver_version"] = known(cuda) if cuda else missing(why or f"NVML reported CUDA version {v!r}")
    facts["nvml_version"] = _derived(*nvml.query("nvmlSystemGetNVMLVersion"))
    path, why = nvml.library_path()
    facts["nvml_library"] = known(path) if path else missing(why or "unknown")
    facts["nvml_error"] = missing("NVML initialised")
    facts["gpu_count"] = _derived(*nvml.query("nvmlDeviceGetCount"))
    facts["nvml_process_error"] = process
    return facts


def probe_gpus(nvml: NvmlLike) -> tuple[Gpu, ...]:
    """One :class:`Gpu` per device NVML lists (empty when NVML is unavailable); never raises."""
    if nvml.init() is not None:
        return ()
    count, _ = nvml.query("nvmlDeviceGetCount")
    return tuple(probe_gpu(nvml, i) for i in range(count)) if isinstance(count, int) else ()


def probe_gpu(nvml: NvmlLike, index: int) -> Gpu:
    """Every GPU key for device ``index``; a lost GPU keeps whatever could still be read, and an unexpected value
    from a driver (a bug of ours) is confined to its GPU."""
    try:
        handle = nvml.call("nvmlDeviceGetHandleByIndex", index)
    except NvmlCallError as e:  # nvidia-smi: "Unable to determine the device handle for GPU ..."
        return Gpu(index, {k: missing(e.reason) for k in GPU_KEYS}, lost=e.reason)
    reader = _Reader(nvml, handle)
    try:
        return Gpu(index, _gpu_facts(reader), lost=reader.lost)
    except Exception as e:  # noqa: BLE001 - one GPU's surprise must not hide the other GPUs
        return Gpu(index, {k: missing(f"envcheck could not read this GPU ({type(e).__name__}: {e})") for k in GPU_KEYS})


class _Reader:

    def __init__(self, nvml: NvmlLike, handle: object) -> None:
        self.nvml = nvml
        self.handle = handle
        self.lost: str | None = None

    def get(self, name: str, *args: object) -> tuple[Json, str | None]:
        try:
            return self.nvml.call(name, self.handle, *args), None
        except NvmlCallError as e:
            # A GPU whose queries crashed the NVML process is as unreadable as one NVML calls lost.
            if e.error_name in (n.GPU_IS_LOST, n.PROBE_FAILED) and self.lost is None:
                self.lost = e.reason
            return None, e.reason

    def fact(self, name: str, *args: object, convert: Convert | None = None) -> Fact:
        return _derived(*self.get(name, *args), convert)


def _derived(value: Json, why: str | None, convert: Convert | None = None) -> Fact:
    """A fact from a query's ``(value, reason)``; ``convert``: what of a value is the fact (None: no value)."""
    value = convert(value) if convert and value is not None else value
    return known(value) if value is not None else missing(why or "no value")


def nvml_fact(nvml: NvmlLike, name: str, *args: object, convert: Convert | None = None) -> Fact:
    """One query's answer as a fact (``convert``: as in ``_derived``)."""
    return _derived(*nvml.query(name, *args), convert)


def _gpu_facts(r: _Reader) -> Facts:
    f: Facts = {}
    f["name"] = r.fact("nvmlDeviceGetName")  # Product Name
    f["uuid"] = r.fact("nvmlDeviceGetUUID")  # GPU UUID
    pci, why = r.get("nvmlDeviceGetPciInfo")  # GPU 00000000:00:06.0 / Bus Id
    f["pci_bus_id"] = _derived(pci.get("busId") if isinstance(pci, dict) else None, why)

    cc_raw, cc_why = r.get("nvmlDeviceGetCudaComputeCapability")
    cc = f"{cc_raw[0]}.{cc_raw[1]}" if isinstance(cc_raw, list) and len(cc_raw) == 2 else None
    f["compute_capability"] = _derived(cc, cc_why)

    arch, why = r.get("nvmlDeviceGetArchitecture")  # Product Architecture
    arch_name = n.ARCHITECTURES.get(arch) if isinstance(arch, int) else None
    if arch_name is None and cc is not None:
        arch_name = _ARCH_BY_CC.get(cc) or _ARCH_BY_MAJOR.get(int(cc.split(".")[0]))
    if arch_name is None and isinstance(arch, int):
        why = f"unknown NVML architecture id {arch}"
    f["architecture"] = _derived(arch_name, why)

    mem, why = r.get("nvmlDeviceGetMemoryInfo")  # FB Memory Usage: Total / Used
    f["memory_total_bytes"] = _derived(mem.get("total") if isinstance(mem, dict) else None, why)
    f["memory_used_bytes"] = _derived(mem.get("used") if isinstance(mem, dict) else None, why)

    cores, why = r.get("nvmlDeviceGetNumGpuCores")
    f["cuda_cores"] = _derived(cores, why)
    f["sm_count"], f["sm_count_source"] = _sm_count(cores, why, cc, cc_why)

    f["sm_clock_mhz"] = r.fact("nvmlDeviceGetClockInfo", n.CLOCK_SM)  # Clocks: SM
    f["sm_clock_max_mhz"] = r.fact("nvmlDeviceGetMaxClockInfo", n.CLOCK_SM)  # Max Clocks: SM
    f["mem_clock_mhz"] = r.fact("nvmlDeviceGetClockInfo", n.CLOCK_MEM)  # Clocks: Memory
    f["mem_clock_max_mhz"] = r.fact("nvmlDeviceGetMaxClockInfo", n.CLOCK_MEM)  # Max Clocks: Memory
    f["memory_bus_width_bits"] = r.fact("nvmlDeviceGetMemoryBusWidth")

    # PCI: GPU Link Info: PCIe Generation Current / Device Max, Link Width Current / Max
    f["pcie_gen"] = r.fact("nvmlDeviceGetCurrPcieLinkGeneration")
    f["pcie_gen_max"] = r.fact("nvmlDeviceGetMaxPcieLinkGeneration")
    f["pcie_width"] = r.fact("nvmlDeviceGetCurrPcieLinkWidth")
    f["pcie_width_max"] = r.fact("nvmlDeviceGetMaxPcieLinkWidth")

    # GPU Power Readings: Instantaneous Power Draw / Current Power Limit (NVML gives milliwatts)
    f["power_w"] = r.fact("nvmlDeviceGetPowerUsage", convert=_watts)
    f["power_limit_w"] = r.fact("nvmlDeviceGetEnforcedPowerLimit", convert=_watts)
    f["temperature_c"] = r.fact("nvmlDeviceGetTemperature", n.TEMPERATURE_GPU)  # Temperature: GPU Current Temp
    pstate, why = r.get("nvmlDeviceGetPerformanceState")  # Performance State
    f["pstate"] = (missing(why or "no value") if pstate is None else known(f"P{pstate}") if pstate != n.PSTATE_UNKNOWN
                   else missing("unknown (NVML reports no performance state)"))

    ecc, why = r.get("nvmlDeviceGetEccMode")  # ECC Mode: Current
    f["ecc_mode_current"] = _derived(bool(ecc[0]) if isinstance(ecc, list) and ecc else None, why)
    # ECC Errors: Volatile / Aggregate: DRAM Uncorrectable
    f["ecc_uncorrected_volatile"] = r.fact("nvmlDeviceGetTotalEccErrors", n.MEMORY_ERROR_UNCORRECTED,
                                           n.ECC_COUNTER_VOLATILE)
    f["ecc_uncorrected_aggregate"] = r.fact("nvmlDeviceGetTotalEccErrors", n.MEMORY_ERROR_UNCORRECTED,
                                            n.ECC_COUNTER_AGGREGATE)
    # Retired Pages: Pending Page Blacklist (pre-Ampere; Hopper says Not Supported and remaps rows instead)
    f["retired_pages_pending"] = r.fact("nvmlDeviceGetRetiredPagesPendingStatus", convert=bool)
    rows, why = r.get("nvmlDeviceGetRemappedRows")  # Remapped Rows: Pending / Remapping Failure Occurred
    rows_ok = isinstance(rows, list) and len(rows) == 4
    f["remapped_rows_pending"] = _derived(bool(rows[2]) if rows_ok else None, why)
    f["remapped_rows_failure"] = _derived(bool(rows[3]) if rows_ok else None, why)

    mig, why = r.get("nvmlDeviceGetMigMode")  # MIG Mode: Current
    f["mig_mode"] = _derived(bool(mig[0]) if isinstance(mig, list) and mig else None, why)
    f["persistence_mode"] = r.fact("nvmlDeviceGetPersistenceMode", convert=bool)  # Persistence Mode

    # Clocks Event Reasons ("Clocks Throttle Reasons", the only name drivers before r535 have)
    mask, why = r.get("nvmlDeviceGetCurrentClocksEventReasons")
    if mask is None:
        mask, why = r.get("nvmlDeviceGetCurrentClocksThrottleReasons")
    names = n.reason_names(mask) if isinstance(mask, int) else None
    f["throttle_reasons"], f["throttled"] = ((known(names), known(bool(n.slowing(names)))) if names is not None
                                             else (missing(why or "no value"), missing(why or "no value")))
    f["processes"] = _processes(r)
    util, why = r.get("nvmlDeviceGetUtilizationRates")  # Utilization: GPU
    f["utilization_gpu_pct"] = _derived(util.get("gpu") if isinstance(util, dict) else None, why)
    f["vbios_version"] = r.fact("nvmlDeviceGetVbiosVersion")  # VBIOS Version
    # What an operator accepting a node reads: compute mode, thermal limits, NVSwitch fabric, clock-event time.
    mode, why = r.get("nvmlDeviceGetComputeMode")  # Compute Mode
    f["compute_mode"] = _derived(n.COMPUTE_MODES.get(mode, f"unknown_{mode}") if isinstance(mode, int) else None, why)
    # Temperature: GPU T.Limit Temp: degrees left before slowdown (r535+; Hopper may refuse the absolute ones below)
    f["temperature_margin_c"] = r.fact("nvmlDeviceGetMarginTemperature")
    # Temperature: GPU Slowdown Temp / GPU Shutdown Temp / GPU Max Operating Temp / Memory Max Operating Temp
    f["temperature_slowdown_c"] = r.fact("nvmlDeviceGetTemperatureThreshold", n.TEMPERATURE_THRESHOLD_SLOWDOWN)
    f["temperature_shutdown_c"] = r.fact("nvmlDeviceGetTemperatureThreshold", n.TEMPERATURE_THRESHOLD_SHUTDOWN)
    f["temperature_gpu_max_c"] = r.fact("nvmlDeviceGetTemperatureThreshold", n.TEMPERATURE_THRESHOLD_GPU_MAX)
    f["temperature_memory_max_c"] = r.fact("nvmlDeviceGetTemperatureThreshold", n.TEMPERATURE_THRESHOLD_MEM_MAX)
    f["temperature_memory_c"] = _derived(*n.field_value(r.nvml, r.handle, n.FI_MEMORY_TEMP))  # Memory Current Temp
    # Fabric: State / Status / CliqueId (NVSwitch systems; "N/A" elsewhere)
    fabric, why = r.get("nvmlDeviceGetGpuFabricInfo")
    if isinstance(fabric, dict) and isinstance(fabric.get("state"), int):
        state = n.FABRIC_STATES.get(fabric["state"], f"unknown_{fabric['state']}")
        f["fabric_state"] = known(state)
        status = fabric.get("status")
        # status is an nvmlReturn_t: 0 is NVML_SUCCESS; it only means something once registration ended
        f["fabric_status"] = (known("success" if status == 0 else f"nvml_error_{status}")
                              if state == "completed" and isinstance(status, int) else missing(f"fabric state {state}"))
        f["fabric_clique_id"] = (known(fabric["cliqueId"]) if state == "completed"
                                 and isinstance(fabric.get("cliqueId"), int) else missing(f"fabric state {state}"))
    else:
        why = why or "no value"
        f["fabric_state"], f["fabric_status"], f["fabric_clique_id"] = missing(why), missing(why), missing(why)
    # Clocks Event Reasons Counters (nvidia-smi -q -d PERFORMANCE): ns in each reason since the driver loaded.
    read = {name: n.field_value(r.nvml, r.handle, field_id) for name, field_id in n.CLOCK_EVENT_COUNTERS.items()}
    counted = {name: v for name, (v, _) in read.items() if isinstance(v, int) and not isinstance(v, bool)}
    f["clock_event_ns"] = known(counted) if counted else missing(next((w for _, w in read.values() if w), "no value"))
    return f


def _watts(milliwatts: float) -> float:
    return round(float(milliwatts) / 1000.0, 3)


def _sm_count(cores: Json, cores_why: str | None, cc: str | None, cc_why: str | None) -> tuple[Fact, Fact]:
    """SM count derived from NVML's core count (NVML has no SM-count query that works everywhere)."""
    sms = sm_count_from_cores(cores, cc) if isinstance(cores, int) and cc is not None else None
    if sms is not None:
        return known(sms), known(f"{cores} CUDA cores (NVML) / {cores_per_sm(str(cc))} cores per SM for compute "
                                 f"capability {cc}")
    why = (f"CUDA core count unknown: {cores_why}" if not isinstance(cores, int) else
           f"compute capability unknown: {cc_why}" if cc is None else
           f"no cores-per-SM figure for compute capability {cc} ({cores} cores)")
    return missing(why), missing(why)


def _processes(r: _Reader) -> Fact:
    """Processes (nvidia-smi -q): compute and graphics, one entry per pid. ``used_bytes`` is None where the driver
    cannot attribute memory (WDDM, hence WSL2); ``name`` None for a process of another PID namespace."""
    compute, why = r.get("nvmlDeviceGetComputeRunningProcesses")
    if compute is None:
        return missing(why or "no value")
    graphics, _ = r.get("nvmlDeviceGetGraphicsRunningProcesses")
    seen: dict[int, dict[str, Json]] = {}
    for p in list(compute) + list(graphics or []):
        pid = p.get("pid") if isinstance(p, dict) else None
        if not isinstance(pid, int) or pid in seen:
            continue
        name, _ = r.nvml.query("nvmlSystemGetProcessName", pid)
        used = p.get("usedGpuMemory")
        seen[pid] = {"pid": pid, "name": name, "used_bytes": used if isinstance(used, int) else None}
    return known(list(seen.values()))
