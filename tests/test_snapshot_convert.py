"""The converters that turn posted outputs into snapshot parts, checked against real captures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

FIX = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIX / "snapshots"))

from convert import ls_la, parse_collect_env, smi_q_to_nvml, smi_table_to_nvml  # noqa: E402


def test_nvidia_smi_q_converts_to_the_answers_nvml_gave_on_the_same_h200() -> None:
    cap = json.loads((FIX / "h200_capture.json").read_text(encoding="utf-8"))
    table = smi_q_to_nvml(cap["nvidia_smi_q"]["stdout"])
    real = cap["nvml"]
    assert table["nvmlSystemGetDriverVersion"] == real["nvmlSystemGetDriverVersion"]
    assert table["nvmlSystemGetCudaDriverVersion_v2"] == real["nvmlSystemGetCudaDriverVersion_v2"]
    got, want = table["gpus"][0], real["gpus"][0]
    # Memory is printed in MiB and power was sampled at another instant; every other field must agree.
    differ = {"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetPciInfo"}
    same = [k for k in got if k not in differ]
    assert len(same) >= 20
    for key in same:
        assert got[key] == want[key], key
    assert got["nvmlDeviceGetPciInfo"]["value"]["busId"] == want["nvmlDeviceGetPciInfo"]["value"]["busId"]
    assert abs(got["nvmlDeviceGetMemoryInfo"]["value"]["total"] - want["nvmlDeviceGetMemoryInfo"]["value"]["total"]) \
        < 1 << 20


def test_the_nvidia_smi_table_na_fields_are_not_supported_and_err_is_an_error() -> None:
    text = (FIX / "snapshots" / "sources" / "wsl-rtx3060-laptop-cuda-err.txt").read_text(encoding="utf-8")
    table = smi_table_to_nvml(text)
    assert table["nvmlSystemGetCudaDriverVersion_v2"]["error"] == "NVMLError_Unknown"
    g = table["gpus"][0]
    assert "nvmlDeviceGetName" not in g  # truncated: "NVIDIA GeForce RTX 3060 ..."
    assert g["nvmlDeviceGetEccMode"]["error"] == "NVMLError_NotSupported"
    assert g["nvmlDeviceGetMemoryInfo"]["value"]["total"] == 6144 << 20
    assert g["nvmlDeviceGetEnforcedPowerLimit"]["value"] == 80000 and g["nvmlDeviceGetPerformanceState"]["value"] == 8


def test_collect_env_and_ls_la() -> None:
    env = parse_collect_env("PyTorch version: 2.5.1+cu124\nGPU models and configuration:\nGPU 0: NVIDIA GeForce "
                            "RTX 4090\nGPU 1: NVIDIA GeForce RTX 4090\n\nNvidia driver version: 560.94\n")
    assert env["PyTorch version"] == "2.5.1+cu124" and env["Nvidia driver version"] == "560.94"
    assert env["GPU models and configuration"].splitlines() == ["GPU 0: NVIDIA GeForce RTX 4090",
                                                                "GPU 1: NVIDIA GeForce RTX 4090"]
    files, links = ls_la("-r-xr-xr-x 1 root root 141464 Jun 24 05:05 /usr/lib/wsl/lib/libcuda.so\n"
                         "lrwxrwxrwx 1 root root 14 Jun 24 05:05 libcuda.so.1 -> libcuda.so.1.1\n", "/usr/lib/wsl/lib")
    assert files == {"/usr/lib/wsl/lib/libcuda.so": None}
    assert links == {"/usr/lib/wsl/lib/libcuda.so.1": "libcuda.so.1.1"}
