"""The NVML seam, the driver section and the per-GPU probe, against captured NVML tables."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from fake_nvml import FakeNvml, load_table

from envcheck.analysis.ceilings import theoretical_bandwidth_gbps
from envcheck.model import Environment, Gpu, dumps, to_dict
from envcheck.probes import gpus as g
from envcheck.probes import nvml as n
from envcheck.probes.collect import read_nvml

CAPTURE = Path(__file__).parent / "fixtures" / "h200_capture.json"
NOT_SUPPORTED = "not supported on this GPU (NVML: Not Supported)"
LOST = "GPU is lost (NVML: GPU is lost)"


def facts_of(fake: FakeNvml) -> tuple[dict, tuple[Gpu, ...]]:
    return read_nvml(fake)


# ------------------------------------------------------------------ several machines, several drivers

# Expectations from outside the tables: published specs (SMs, bandwidth) and the real
# torch capture for the H200 (multi_processor_count=132).
MACHINES = [
    # fixture, driver, CUDA, name, arch, cc, SMs, GB/s, event-reason query that answered
    ("h200", "580.159.04", "13.0", "NVIDIA H200", "Hopper", "9.0", 132, 4814.3,
     "nvmlDeviceGetCurrentClocksEventReasons"),
    ("h100_sxm", "580.159.04", "13.0", "NVIDIA H100 80GB HBM3", "Hopper", "9.0", 132, 3352.3,
     "nvmlDeviceGetCurrentClocksEventReasons"),
    ("a100_r525", "525.147.05", "12.0", "NVIDIA A100-SXM4-80GB", "Ampere", "8.0", 108, 2039.0,
     "nvmlDeviceGetCurrentClocksThrottleReasons"),
    ("rtx4090_wsl", "566.36", "12.7", "NVIDIA GeForce RTX 4090", "Ada Lovelace", "8.9", 128, 1008.1,
     "nvmlDeviceGetCurrentClocksEventReasons"),
]


@pytest.mark.parametrize(("fixture", "driver", "cuda", "name", "arch", "cc", "sms", "gbps", "reasons_call"), MACHINES)
def test_machines(fixture, driver, cuda, name, arch, cc, sms, gbps, reasons_call):
    fake = FakeNvml.fixture(fixture)
    drv, found = facts_of(fake)
    assert set(drv) == set(g.DRIVER_KEYS)
    assert drv["driver_version"].value == driver
    assert drv["cuda_driver_version"].value == cuda
    assert drv["nvml_version"].value.endswith(driver)
    assert drv["nvml_error"].value is None and drv["nvml_error"].reason == "NVML initialised"
    assert drv["gpu_count"].value == 1
    (gpu,) = found
    assert gpu.lost is None
    assert set(gpu.facts) == set(g.GPU_KEYS)
    assert gpu.get("name") == name
    assert gpu.get("architecture") == arch
    assert gpu.get("compute_capability") == cc
    assert gpu.get("sm_count") == sms
    assert str(gpu.get("cuda_cores")) in gpu.get("sm_count_source")
    # The probe reports what NVML says; the bandwidth it implies is the analysis's (one formula).
    assert theoretical_bandwidth_gbps(gpu.get("mem_clock_max_mhz"), gpu.get("memory_bus_width_bits")) == \
        pytest.approx(gbps, abs=0.05)
    assert gpu.get("throttle_reasons") == ["gpu_idle"]  # idle when captured: not a slowdown
    assert gpu.get("throttled") is False
    called = [c[0] for c in fake.calls]
    assert reasons_call in called
    if reasons_call.endswith("EventReasons"):  # the deprecated name is only a fallback
        assert "nvmlDeviceGetCurrentClocksThrottleReasons" not in called
    assert fake.shutdown_count == 1


@pytest.mark.parametrize("fixture", [m[0] for m in MACHINES] + ["h200_throttled", "h200_ecc_remap", "h200_busy"])
def test_every_key_is_a_value_or_a_reason_and_json_ready(fixture):
    drv, found = facts_of(FakeNvml.fixture(fixture))
    for facts in [drv, *(x.facts for x in found)]:
        for key, fact in facts.items():
            assert (fact.value is None) != (fact.reason is None), key
            if fact.reason is not None:
                assert fact.reason.strip() and "\n" not in fact.reason, key
    env = Environment(sections={"driver": drv}, gpus=found)
    assert json.loads(json.dumps(to_dict(env)))["gpus"][0]["facts"]["name"]["value"]


def test_h200_matches_what_nvidia_smi_printed():
    """The probe agrees with the real nvidia-smi -q captured on the same machine."""
    with open(CAPTURE, encoding="utf-8") as f:
        smi = json.load(f)["nvidia_smi_q"]["stdout"]
    _, (gpu,) = facts_of(FakeNvml.fixture("h200"))
    lines = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip() for ln in smi.splitlines() if ":" in ln}
    assert lines["Product Name"] == gpu.get("name")
    assert lines["Product Architecture"] == gpu.get("architecture")
    assert lines["GPU UUID"] == gpu.get("uuid")
    assert lines["VBIOS Version"] == gpu.get("vbios_version")
    assert lines["Performance State"] == gpu.get("pstate")
    assert lines["Driver Version"] == "580.159.04"
    assert lines["CUDA Version"] == facts_of(FakeNvml.fixture("h200"))[0]["cuda_driver_version"].value


def test_h200_sm_count_matches_torch_capture():
    with open(CAPTURE, encoding="utf-8") as f:
        torch_info = json.loads(json.load(f)["torch_info"]["stdout"])
    _, (gpu,) = facts_of(FakeNvml.fixture("h200"))
    assert f"multi_processor_count={gpu.get('sm_count')}" in torch_info["props"]


# ------------------------------------------------------------------ fields that are not there


def test_wsl_not_supported_fields_do_not_hide_the_others():
    _, (gpu,) = facts_of(FakeNvml.fixture("rtx4090_wsl"))
    unsupported = ["ecc_mode_current", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate",
                   "remapped_rows_pending", "remapped_rows_failure", "pcie_gen_max", "mig_mode",
                   "persistence_mode", "processes"]
    for key in unsupported:
        assert gpu.facts[key].reason == NOT_SUPPORTED, key
    assert gpu.get("pcie_gen") == 4
    assert gpu.get("memory_total_bytes") == 25757220864
    assert gpu.get("pstate") == "P8"
    assert gpu.get("power_limit_w") == 450.0


def test_older_driver_falls_back_to_throttle_reasons():
    fake = FakeNvml.fixture("a100_r525")
    _, (gpu,) = facts_of(fake)
    names = [c[0] for c in fake.calls]
    assert names.index("nvmlDeviceGetCurrentClocksEventReasons") < names.index(
        "nvmlDeviceGetCurrentClocksThrottleReasons")
    assert gpu.get("throttle_reasons") == ["gpu_idle"]


def test_no_clock_event_query_at_all_gives_a_reason():
    fake = FakeNvml.fixture("a100_r525")
    not_supported = {"error": "NVMLError_NotSupported", "text": "Not Supported"}
    fake.set(0, "nvmlDeviceGetCurrentClocksThrottleReasons", not_supported)
    _, (gpu,) = facts_of(fake)
    assert gpu.facts["throttle_reasons"].reason == NOT_SUPPORTED
    assert gpu.facts["throttled"].reason == NOT_SUPPORTED


def test_missing_inputs_explain_derived_facts():
    fake = FakeNvml.fixture("h200")
    fake.set(0, "nvmlDeviceGetMemoryBusWidth", {"error": "NVMLError_NoPermission", "text": "Insufficient Permissions"})
    fake.set(0, "nvmlDeviceGetNumGpuCores", {"error": "NVMLError_NotSupported", "text": "Not Supported"})
    fake.set(0, "nvmlDeviceGetPerformanceState", {"value": n.PSTATE_UNKNOWN})
    _, (gpu,) = facts_of(fake)
    assert gpu.facts["memory_bus_width_bits"].reason == "no permission (NVML: Insufficient Permissions)"
    assert gpu.facts["sm_count"].reason == f"CUDA core count unknown: {NOT_SUPPORTED}"
    assert gpu.facts["sm_count_source"].reason == gpu.facts["sm_count"].reason
    assert gpu.facts["pstate"].reason.startswith("unknown")
    assert gpu.get("mem_clock_max_mhz") == 3201  # its neighbours still read


def test_architecture_falls_back_to_compute_capability():
    fake = FakeNvml.fixture("a100_r525")
    fake.set(0, "nvmlDeviceGetArchitecture", {"error": "NVMLError_FunctionNotFound", "text": "Function Not Found"})
    _, (gpu,) = facts_of(fake)
    assert gpu.get("architecture") == "Ampere"


# ------------------------------------------------------------------ health signals


def test_throttled_gpu():
    _, (gpu,) = facts_of(FakeNvml.fixture("h200_throttled"))
    assert gpu.get("throttle_reasons") == ["sw_power_cap", "sw_thermal_slowdown"]
    assert gpu.get("throttled") is True
    assert gpu.get("sm_clock_mhz") < gpu.get("sm_clock_max_mhz")


def test_ecc_errors_and_pending_remap():
    _, (gpu,) = facts_of(FakeNvml.fixture("h200_ecc_remap"))
    assert gpu.get("ecc_uncorrected_volatile") == 2
    assert gpu.get("ecc_uncorrected_aggregate") == 5
    assert gpu.get("remapped_rows_pending") is True
    assert gpu.get("remapped_rows_failure") is False


def test_other_processes_listed_once_each():
    _, (gpu,) = facts_of(FakeNvml.fixture("h200_busy"))
    assert gpu.get("processes") == [
        {"pid": 48213, "name": "python3", "used_bytes": 18253611008},
        {"pid": 51007, "name": None, "used_bytes": 524288000},
    ]


# ------------------------------------------------------------------ lost GPUs and NVML failures


def test_lost_gpu_keeps_what_could_be_read_and_others_still_appear():
    fake = FakeNvml.fixture("h200_x2")
    fake.lose_gpu(1, keep=["nvmlDeviceGetPciInfo"])
    drv, found = facts_of(fake)
    assert drv["gpu_count"].value == 2
    assert [x.index for x in found] == [0, 1]
    assert found[0].lost is None and found[0].get("name") == "NVIDIA H200"
    lost = found[1]
    assert lost.lost == LOST
    assert set(lost.facts) == set(g.GPU_KEYS)
    assert lost.get("pci_bus_id") == "00000000:00:07.0"
    assert lost.facts["name"].reason == LOST
    assert lost.facts["memory_bus_width_bits"].reason.endswith(LOST)


def test_gpu_lost_before_a_handle():
    fake = FakeNvml.fixture("h200_x2")
    fake.lose_gpu(0, at_handle=True)
    _, found = facts_of(fake)
    assert found[0].lost == LOST
    assert all(f.reason == LOST for f in found[0].facts.values())
    assert found[1].lost is None and found[1].get("uuid") == "GPU-c0e1d2f3-a4b5-4c6d-8e7f-90a1b2c3d4e5"


INIT_FAILURES = [
    ("NVMLError_LibraryNotFound", "NVML Shared Library Not Found"),
    ("NVMLError_DriverNotLoaded", "Driver Not Loaded"),
    ("NVMLError_LibRmVersionMismatch", "RM has detected an NVML/RM version mismatch."),
    ("NVMLError_NoPermission", "Insufficient Permissions"),
]


@pytest.mark.parametrize(("error", "text"), INIT_FAILURES)
def test_init_failure_lands_in_nvml_error(error, text):
    fake = FakeNvml.fixture("h200", init_error=error)
    drv, found = facts_of(fake)
    assert found == ()
    assert set(drv) == set(g.DRIVER_KEYS)
    assert drv["nvml_error"].value == text
    for key in set(g.DRIVER_KEYS) - {"nvml_error", "nvml_process_error"}:
        assert drv[key].reason == f"NVML unavailable: {text}", key
    assert not [c for c in fake.calls if c[0].startswith("nvmlDevice")]


# ------------------------------------------------------------------ pure helpers


def test_theoretical_bandwidth():
    assert theoretical_bandwidth_gbps(3201, 6016) == pytest.approx(4814.304)
    assert theoretical_bandwidth_gbps(1593, 5120) == pytest.approx(2039.04)  # A100 40GB
    assert "theoretical_bandwidth_gbps" not in g.GPU_KEYS  # derived, so not a probed fact


@pytest.mark.parametrize(("cores", "cc", "sms"), [
    (16896, "9.0", 132), (6912, "8.0", 108), (16384, "8.9", 128), (10752, "8.6", 84), (5120, "7.0", 80),
    (4608, "7.5", 72), (18944, "10.0", 148), (100, "9.0", None), (1024, "5.2", None), (0, "9.0", None),
])
def test_sm_count_from_cores(cores, cc, sms):
    assert g.sm_count_from_cores(cores, cc) == sms


def test_cores_per_sm_table_covers_the_brief():
    assert {cc: g.cores_per_sm(cc) for cc in ("9.0", "8.9", "8.6", "8.7", "8.0", "7.0", "7.5", "10.0", "12.0")} == {
        "9.0": 128, "8.9": 128, "8.6": 128, "8.7": 128, "8.0": 64, "7.0": 64, "7.5": 64, "10.0": 128, "12.0": 128}


@pytest.mark.parametrize(("raw", "text"), [(13000, "13.0"), (12020, "12.2"), (12080, "12.8"), (11040, "11.4")])
def test_cuda_version_text(raw, text):
    assert g.cuda_version_text(raw) == text


@pytest.mark.parametrize(("mask", "names"), [
    (0, []), (0x1, ["gpu_idle"]), (0x24, ["sw_power_cap", "sw_thermal_slowdown"]),
    (0x1FF, list(n.CLOCKS_EVENT_REASONS.values())), (0x204, ["sw_power_cap", "unknown_0x200"]),
])
def test_reason_names(mask, names):
    assert n.reason_names(mask) == names


def test_slowing_excludes_benign_reasons():
    assert n.slowing(n.reason_names(0x1FF)) == [
        "sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"]


def test_library_from_proc_maps():
    maps = (
        "7f00a000-7f00b000 r--p 00000000 08:01 1234  /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f1c2000-7f1c3000 r-xp 00000000 00:2f 98    /usr/lib/wsl/lib/libnvidia-ml.so.1\n"
        "7ffd0000-7ffd1000 rw-p 00000000 00:00 0     [stack]\n"
    )
    assert n._library_from_maps(maps) == "/usr/lib/wsl/lib/libnvidia-ml.so.1"
    assert n._library_from_maps("7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]\n") is None


# ------------------------------------------------------------------ the real seam, without a GPU


def test_real_seam_reports_why_nvml_is_unavailable(monkeypatch):
    pynvml = pytest.importorskip("pynvml")

    def fail() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    nv = n.Nvml()
    assert nv.init() == "RM has detected an NVML/RM version mismatch."
    assert nv.init_error_name == "NVMLError_LibRmVersionMismatch"
    assert nv.query("nvmlSystemGetDriverVersion") == (None, "NVML is not initialised (NVML: Uninitialized)")
    assert nv.library_path()[0] is None
    nv.shutdown()  # after a failed init: no error


def test_real_seam_without_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    err = n.Nvml().init()
    assert err is not None and "pip install nvidia-ml-py" in err


def test_real_seam_converts_values_and_errors():
    pynvml = pytest.importorskip("pynvml")
    mem = pynvml.c_nvmlMemory_t()
    mem.total, mem.free, mem.used = 150754820096, 150109880320, 644939776
    proc = pynvml.nvmlFriendlyObject({"pid": 7, "usedGpuMemory": None, "gpuInstanceId": 1, "computeInstanceId": 2})

    def not_supported(handle):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def lost(handle):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    lib = types.SimpleNamespace(
        nvmlSystemGetDriverVersion=lambda: b"580.159.04",
        nvmlDeviceGetMemoryInfo=lambda h: mem,
        nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [proc],
        nvmlDeviceGetFanSpeed=not_supported,
        nvmlDeviceGetName=lost,
        nvmlShutdown=lambda: None,
    )
    nv = n.Nvml()
    nv._lib, nv._tried = lib, True
    assert nv.call("nvmlSystemGetDriverVersion") == "580.159.04"
    assert nv.call("nvmlDeviceGetMemoryInfo", 0) == {"total": 150754820096, "free": 150109880320, "used": 644939776}
    assert nv.call("nvmlDeviceGetCudaComputeCapability", 0) == [9, 0]
    assert nv.call("nvmlDeviceGetComputeRunningProcesses", 0) == [
        {"pid": 7, "usedGpuMemory": None, "gpuInstanceId": 1, "computeInstanceId": 2}]
    assert nv.query("nvmlDeviceGetFanSpeed", 0) == (None, NOT_SUPPORTED)
    with pytest.raises(n.NvmlCallError) as e:
        nv.call("nvmlDeviceGetName", 0)
    assert e.value.error_name == "NVMLError_GpuIsLost" and e.value.reason == LOST
    value, why = nv.query("nvmlDeviceGetNotInThisBinding", 0)
    assert value is None and "pip install -U nvidia-ml-py" in why
    nv.shutdown()
    assert not nv.ready


def test_fixture_tables_share_the_capture_format():
    real = load_table("h200")
    with open(CAPTURE, encoding="utf-8") as f:
        capture = json.load(f)["nvml"]
    assert real["gpus"] == capture["gpus"]
    for name in ("h100_sxm", "a100_r525", "rtx4090_wsl"):
        derived = load_table(name)
        assert set(derived["gpus"][0]) == set(capture["gpus"][0]), name  # same queries, other answers


def test_report_with_probed_gpus_round_trips():
    from envcheck.model import Report, loads

    drv, found = facts_of(FakeNvml.fixture("rtx4090_wsl"))
    report = Report("0", "2026-11-21T21:46:43Z", "host", "probe", Environment({"driver": drv}, found))
    again = loads(dumps(report))
    assert again.environment.gpus == found
    assert again.environment.sections["driver"] == drv


# ------------------------------------------------------------------ on a real GPU


@pytest.mark.gpu
def test_real_nvml_agrees_with_torch():
    import torch

    drv, found = read_nvml(n.Nvml())
    assert drv["nvml_error"].value is None, drv["nvml_error"].value
    assert drv["gpu_count"].value == len(found) >= 1
    # CUDA_VISIBLE_DEVICES may hide GPUs from torch; compare by UUID, not index.
    by_uuid = {x.get("uuid"): x for x in found}
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gpu = by_uuid.get(f"GPU-{props.uuid}")
        assert gpu is not None, props.name
        assert gpu.get("sm_count") == props.multi_processor_count
        assert gpu.get("compute_capability") == f"{props.major}.{props.minor}"
        assert theoretical_bandwidth_gbps(gpu.get("mem_clock_max_mhz"), gpu.get("memory_bus_width_bits")) > 100


def test_a_surprising_value_stays_with_its_gpu():
    fake = FakeNvml.fixture("h200_x2")
    fake.set(0, "nvmlDeviceGetPowerUsage", {"value": "n/a"})  # not a number: must not crash the probe
    _, found = facts_of(fake)
    assert found[0].lost is None
    assert found[0].facts["name"].reason.startswith("envcheck could not read this GPU (ValueError")
    assert found[1].get("power_w") == 125.896
