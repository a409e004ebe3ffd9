"""What an operator accepting a node checks: compute mode, temperature headroom, clock-event time, the
NVSwitch fabric, IOMMU, PCIe ACS, InfiniBand ports, GPUDirect RDMA and the GPU stack's Python packages.

GPU facts come from the NVML tables captured on real machines (tests/fixtures/nvml), each variant
changing only the answer under test; the node facts from a replayed host holding the files and
command outputs those tools print.
"""

from __future__ import annotations

from typing import Any

import pytest

from envcheck.checks import evaluate, operator
from envcheck.model import Check, Environment, known
from envcheck.probes import platform
from envcheck.probes.collect import collect
from envcheck.probes.gpus import probe_gpu
from envcheck.probes.nvml_table import TableNvml
from envcheck.probes.packages import PackageInfo
from envcheck.probes.replay import ReplayHost
from tests.fake_nvml import load_table, merge_tables


def _gpu(over: dict[str, Any], base: str = "h200"):
    table = merge_tables(load_table(base), {"gpus": [over]})
    nvml = TableNvml(table)
    assert nvml.init() is None
    return probe_gpu(nvml, 0)


def _field(value: int) -> list[dict[str, Any]]:
    """nvmlDeviceGetFieldValues' answer as the seam stores it (an unsigned long long value)."""
    return [{"fieldId": 0, "scopeId": 0, "timestamp": 0, "latencyUsec": 0, "valueType": 3, "nvmlReturn": 0,
             "value": {"ullVal": value}}]


# --------------------------------------------------------------------------- compute mode


def test_the_captured_h200_runs_in_default_compute_mode() -> None:
    gpu = _gpu({})
    assert gpu.get("compute_mode") == "default"
    assert operator.check_compute_mode(gpu).status == "pass"


@pytest.mark.parametrize(("mode", "status"), [(2, "fail"), (3, "warn"), (1, "warn")])
def test_a_compute_mode_that_refuses_processes_is_named_with_its_fix(mode: int, status: str) -> None:
    c = operator.check_compute_mode(_gpu({"nvmlDeviceGetComputeMode": {"value": mode}}))
    assert c.status == status
    assert c.fix is not None and "-c DEFAULT" in c.fix


def test_an_old_driver_without_compute_mode_skips_with_the_reason() -> None:
    c = operator.check_compute_mode(_gpu({"nvmlDeviceGetComputeMode": {"error": "NVMLError_NotSupported",
                                                                         "text": "Not Supported"}}))
    assert c.status == "skip" and "not supported" in c.finding


# --------------------------------------------------------------------------- temperature


def test_headroom_is_read_from_nvml_margin_as_nvidia_smi_prints_it() -> None:
    # The captured H200's nvidia-smi -q: "GPU Current Temp: 36 C", "GPU T.Limit Temp: 51 C".
    gpu = _gpu({"nvmlDeviceGetMarginTemperature": {"value": 51}})
    assert gpu.get("temperature_margin_c") == 51
    c = operator.check_temperature(gpu)
    assert c.status == "pass" and "51 C below slowdown" in c.finding


@pytest.mark.parametrize(("margin", "status"), [(4, "warn"), (0, "fail"), (-2, "fail"), (5, "pass")])
def test_little_or_no_headroom_warns_or_fails(margin: int, status: str) -> None:
    assert operator.check_temperature(_gpu({"nvmlDeviceGetMarginTemperature": {"value": margin}})).status == status


def test_without_a_margin_the_absolute_slowdown_threshold_is_used() -> None:
    over = {"nvmlDeviceGetMarginTemperature": {"error": "NVMLError_NotSupported", "text": "Not Supported"},
            "nvmlDeviceGetTemperature[GPU]": {"value": 84},
            "nvmlDeviceGetTemperatureThreshold[SLOWDOWN]": {"value": 87},
            "nvmlDeviceGetTemperatureThreshold[SHUTDOWN]": {"value": 92}}
    c = operator.check_temperature(_gpu(over))
    assert c.status == "warn"
    assert "84 C, slowdown at 87 C, shutdown at 92 C" in c.finding


def test_hbm_at_its_maximum_fails_even_with_gpu_headroom() -> None:
    over = {"nvmlDeviceGetMarginTemperature": {"value": 30},
            "nvmlDeviceGetTemperatureThreshold[MEM_MAX]": {"value": 95},
            "nvmlDeviceGetFieldValues[[(82, 0)]]": {"value": _field(96)}}
    gpu = _gpu(over)
    assert gpu.get("temperature_memory_c") == 96
    c = operator.check_temperature(gpu)
    assert c.status == "fail" and "memory 96 C (max 95 C)" in c.finding


# --------------------------------------------------------------------------- clock-event counters


def test_time_in_thermal_slowdown_since_boot_warns_and_the_power_cap_does_not() -> None:
    over = {"nvmlDeviceGetFieldValues[[(74, 0)]]": {"value": _field(3_600 * 10**9)},
            "nvmlDeviceGetFieldValues[[(270, 0)]]": {"value": _field(12_500_000_000)}}
    c = operator.check_clock_events(_gpu(over))
    assert c.status == "warn"
    assert "hw_thermal_slowdown 12.5 s" in c.finding and "3,600 s at the SW power cap" in c.finding
    only_cap = operator.check_clock_events(_gpu({"nvmlDeviceGetFieldValues[[(74, 0)]]": {"value": _field(10**12)}}))
    assert only_cap.status == "pass"


def test_no_counters_from_the_driver_is_a_skip_with_the_reason() -> None:
    c = operator.check_clock_events(_gpu({}, base="rtx4090_wsl"))
    assert c.status == "skip"


# --------------------------------------------------------------------------- NVSwitch fabric


def _fabric(state: int, status: int = 0) -> dict[str, Any]:
    return {"nvmlDeviceGetGpuFabricInfo": {"value": {"clusterUuid": [0] * 16, "status": status, "cliqueId": 7,
                                                     "state": state}}}


def test_fabric_registration_states() -> None:
    assert operator.check_fabric(_gpu(_fabric(0)), "inactive").status == "skip"
    done = operator.check_fabric(_gpu(_fabric(3)), "active")
    assert done.status == "pass" and "clique 7" in done.finding
    waiting = operator.check_fabric(_gpu(_fabric(2)), "inactive")
    assert waiting.status == "fail" and "in_progress" in waiting.finding and "nvidia-fabricmanager is inactive" \
        in waiting.finding
    failed = operator.check_fabric(_gpu(_fabric(3, status=999)), "active")
    assert failed.status == "fail" and "nvml_error_999" in failed.finding


# --------------------------------------------------------------------------- the node's platform

LSPCI = (
    "15:00.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)\n"
    "\tCapabilities: [1f0 v1] Access Control Services\n"
    "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+\n"
    "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
    "\n"
    "16:02.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)\n"
    "\tCapabilities: [1f0 v1] Access Control Services\n"
    "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+\n"
    "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
    "\n"
    "18:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)\n"
    "\tCapabilities: [100 v1] Virtual Channel\n"
)


def test_lspci_acs_redirection_is_found_on_the_bridge_that_has_it() -> None:
    found = platform.parse_lspci_acs(LSPCI)
    assert [f["bus_id"] for f in found] == ["0000:15:00.0"]
    assert found[0]["enabled"] == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]


def test_nvml_bus_ids_map_to_sysfs_names() -> None:
    assert platform.sysfs_bus_id("00000000:18:00.0") == "0000:18:00.0"
    assert platform.sysfs_bus_id("00000001:AB:00.0") == "0001:ab:00.0"
    assert platform.sysfs_bus_id("18:00.0") == "0000:18:00.0"


def _host(**over: Any) -> ReplayHost:
    files: dict[str, Any] = {
        "/proc/cmdline": "BOOT_IMAGE=/vmlinuz-6.8.0 root=UUID=1 ro intel_iommu=on quiet",
        "/proc/modules": "nvidia_uvm 1892352 0 - Live 0x0\nnvidia 9867264 1 nvidia_uvm, Live 0x0\n",
        "/sys/kernel/iommu_groups/31/type": "DMA-FQ\n",
        "/sys/kernel/iommu_groups/32/type": "DMA-FQ\n",
        "/sys/class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n",
        "/sys/class/infiniband/mlx5_0/ports/1/phys_state": "5: LinkUp\n",
        "/sys/class/infiniband/mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)\n",
        "/sys/class/infiniband/mlx5_0/ports/1/link_layer": "InfiniBand\n",
        "/sys/class/infiniband/mlx5_1/ports/1/state": "2: INIT\n",
        "/sys/class/infiniband/mlx5_1/ports/1/phys_state": "5: LinkUp\n",
        "/sys/class/infiniband/mlx5_1/ports/1/rate": "400 Gb/sec (4X NDR)\n",
        "/sys/class/infiniband/mlx5_1/ports/1/link_layer": "InfiniBand\n",
        "/usr/bin/lspci": "", "/usr/bin/systemctl": "",
    }
    files.update(over.pop("files", {}))
    links = {"/sys/bus/pci/devices/0000:18:00.0/iommu_group": "/sys/kernel/iommu_groups/31",
             "/sys/bus/pci/devices/0000:2a:00.0/iommu_group": "/sys/kernel/iommu_groups/32",
             # the captured H200 pair's bus ids (tests/fixtures/nvml/h200*.json)
             "/sys/bus/pci/devices/0000:00:06.0/iommu_group": "/sys/kernel/iommu_groups/31",
             "/sys/bus/pci/devices/0000:00:07.0/iommu_group": "/sys/kernel/iommu_groups/32"}
    torch = PackageInfo("torch", "2.11.0+cu130", "/site", requires=(
        "filelock", "nvidia-nccl-cu13==2.28.3; platform_system == \"Linux\"",
        "nvidia-cublas==13.0.0.19; platform_system == \"Linux\"", "optree>=0.13.0; extra == \"optree\""))
    packages = {"torch": torch, "triton": PackageInfo("triton", "3.6.0", "/site"),
                "nvidia-nccl-cu13": PackageInfo("nvidia-nccl-cu13", "2.28.3", "/site"),
                "nvidia-cublas": PackageInfo("nvidia-cublas", "13.0.0.19", "/site")}
    packages.update(over.pop("packages", {}))
    return ReplayHost(files=files, links=links, environ={"PATH": "/usr/bin"}, packages=packages,
                      runs={"lspci_vvv": (0, over.pop("lspci", LSPCI), ""),
                            "fabricmanager_active": (3, "inactive\n", "")}, **over)


def test_platform_probe_reads_every_fact_from_the_host() -> None:
    facts = platform.probe_platform(_host(), ["00000000:18:00.0", "00000000:2A:00.0"])
    assert facts["kernel_cmdline_iommu"].value == ["intel_iommu=on"]
    assert facts["gpu_iommu_domains"].value == {"00000000:18:00.0": "DMA-FQ", "00000000:2A:00.0": "DMA-FQ"}
    assert facts["acs_redirect"].value[0]["bus_id"] == "0000:15:00.0"
    ports = facts["infiniband_ports"].value
    assert [(p["device"], p["state"], p["rate"]) for p in ports] == [
        ("mlx5_0", "ACTIVE", "400 Gb/sec (4X NDR)"), ("mlx5_1", "INIT", "400 Gb/sec (4X NDR)")]
    assert facts["gpudirect_rdma_module"].value == ""
    assert facts["fabricmanager"].value == "inactive"
    pkgs = {p["name"]: p for p in facts["python_packages"].value}
    assert pkgs["torch"]["version"] == "2.11.0+cu130"
    assert pkgs["nvidia-nccl-cu13"] == {"name": "nvidia-nccl-cu13", "version": "2.28.3", "required_by": "torch",
                                        "required": "==2.28.3"}
    assert "optree" not in pkgs and "filelock" not in pkgs


def test_a_one_gpu_machine_is_spared_the_lspci_run() -> None:
    host = _host()
    facts = platform.probe_platform(host, ["00000000:18:00.0"])
    assert facts["acs_redirect"].value is None and "two or more GPUs" in (facts["acs_redirect"].reason or "")
    assert not any(call[0] == "lspci" for call in host.calls)


def test_a_snapshot_from_before_the_platform_probe_says_so_on_every_key() -> None:
    facts = platform.probe_platform(ReplayHost(files={"/etc/os-release": "ID=ubuntu"}), [])
    assert set(facts) == set(platform.KEYS)
    assert all(not f.ok and "not captured" in (f.reason or "") for f in facts.values())


def test_lspci_without_root_is_a_reason_not_a_clean_bill() -> None:
    text = "18:00.0 3D controller: NVIDIA Corporation GH100\n\tCapabilities: <access denied>\n"
    facts = platform.probe_platform(_host(lspci=text), ["00000000:18:00.0", "00000000:2A:00.0"])
    assert facts["acs_redirect"].value is None and "root" in (facts["acs_redirect"].reason or "")


def _env(gpus: int = 2, wsl: bool = False, **platform_facts: Any) -> Environment:
    from envcheck.model import Gpu
    return Environment(sections={"platform": {k: known(v) for k, v in platform_facts.items()},
                                 "driver": {"gpu_count": known(gpus)}, "wsl": {"is_wsl": known(wsl)}},
                       gpus=tuple(Gpu(i, {"name": known("NVIDIA H100 80GB HBM3")}) for i in range(gpus)))


def _by_id(checks: list[Check]) -> dict[str, Check]:
    return {c.id: c for c in checks}


def test_node_checks_on_a_host_with_every_problem() -> None:
    env = Environment(sections={"platform": platform.probe_platform(_host(), ["00000000:18:00.0", "00000000:2A:00.0"]),
                                "driver": {"gpu_count": known(2)}, "wsl": {"is_wsl": known(False)}},
                      gpus=_env().gpus)
    got = _by_id(operator.checks(env))
    assert got["platform.iommu"].status == "warn" and "iommu=pt" in (got["platform.iommu"].fix or "")
    assert got["platform.acs"].status == "warn" and "setpci -s 0000:15:00.0 ECAP_ACS+0x6.w=0000" in \
        (got["platform.acs"].fix or "")
    assert got["platform.infiniband"].status == "warn" and "mlx5_1/1 INIT (LinkUp)" in got["platform.infiniband"].finding
    assert got["platform.gpudirect_rdma"].status == "warn" and "modprobe nvidia_peermem" in \
        (got["platform.gpudirect_rdma"].fix or "")
    assert got["platform.python_packages"].status == "pass"
    assert "platform.fabricmanager" not in got  # no GPU says it is on an NVSwitch fabric


def test_node_checks_pass_on_a_clean_host() -> None:
    env = _env(gpu_iommu_domains={"a": "identity"}, acs_redirect=[], gpudirect_rdma_module="nvidia_peermem",
               infiniband_ports=[{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "rate": "400 Gb/sec (4X NDR)"}],
               python_packages=[{"name": "torch", "version": "2.11.0"}])
    got = _by_id(operator.checks(env))
    assert {k: c.status for k, c in got.items() if k.startswith("platform.")} == {
        "platform.iommu": "pass", "platform.acs": "pass", "platform.infiniband": "pass",
        "platform.gpudirect_rdma": "pass", "platform.python_packages": "pass"}


def test_a_single_gpu_or_wsl_machine_gets_no_peer_to_peer_checks() -> None:
    for env in (_env(gpus=1, gpu_iommu_domains={"a": "DMA"}, acs_redirect=[{"bus_id": "x"}]),
                _env(gpus=2, wsl=True, gpu_iommu_domains={"a": "DMA"}, acs_redirect=[{"bus_id": "x"}])):
        got = _by_id(operator.checks(env))
        assert "platform.iommu" not in got and "platform.acs" not in got


def test_a_cuda_wheel_that_differs_from_torchs_pin_warns_with_the_pip_command() -> None:
    host = _host(packages={"nvidia-nccl-cu13": PackageInfo("nvidia-nccl-cu13", "2.27.7", "/site")})
    env = Environment(sections={"platform": platform.probe_platform(host, [])})
    c = _by_id(operator.checks(env))["platform.python_packages"]
    assert c.status == "warn" and "nvidia-nccl-cu13 2.27.7 (torch: 2.28.3)" in c.finding
    assert c.fix is not None and "pip install 'nvidia-nccl-cu13==2.28.3'" in c.fix


def test_fabric_manager_down_on_an_nvswitch_node_fails() -> None:
    from envcheck.model import Gpu
    env = Environment(sections={"platform": {"fabricmanager": known("failed")}},
                      gpus=(Gpu(0, {"fabric_state": known("in_progress")}),))
    got = _by_id(operator.checks(env))
    assert got["platform.fabricmanager"].status == "fail"
    assert got["gpu.fabric.0"].status == "fail"


def test_collect_and_evaluate_carry_the_new_checks_end_to_end() -> None:
    table = merge_tables(load_table("h200_x2"), {"gpus": [{"nvmlDeviceGetMarginTemperature": {"value": 40}},
                                                          {"nvmlDeviceGetComputeMode": {"value": 2}}]})
    env = collect(host=_host(), nvml=TableNvml(table), runtime=False)
    assert "platform" in env.sections
    got = {c.id: c.status for c in evaluate(env)}
    assert got["gpu.temperature.0"] == "pass" and got["gpu.compute_mode.1"] == "fail"
    assert got["platform.iommu"] == "warn"
