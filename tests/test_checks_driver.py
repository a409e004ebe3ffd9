"""Driver, WSL2 and environment-variable checks; NVML failures use the real NVML error texts."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from envcheck import model
from envcheck.checks import driver, wsl
from envcheck.checks import env as env_checks
from envcheck.model import Environment, Fact, known, missing
from envcheck.probes.gpus import probe_driver
from tests.fake_nvml import FakeNvml

H200 = model.load(Path(__file__).parent / "fixtures" / "torch" / "h200_check_report.json").environment
WSL_LIB = "/usr/lib/wsl/lib"


def env_with(gpus: tuple | None = None, **changes: Any) -> Environment:
    sections = {k: dict(v) for k, v in H200.sections.items()}
    for dotted, value in changes.items():
        section, key = dotted.split(".", 1)
        sections[section][key] = value if isinstance(value, Fact) else known(value)
    return dataclasses.replace(H200, sections=sections, gpus=H200.gpus if gpus is None else gpus)


def with_driver(nvml: FakeNvml, gpus: tuple = ()) -> Environment:
    sections = dict(H200.sections)
    sections["driver"] = probe_driver(nvml)
    return dataclasses.replace(H200, sections=sections, gpus=gpus)


# --------------------------------------------------------------------------- driver


def test_real_h200_driver_and_gpus_pass() -> None:
    assert [c.status for c in driver.checks(H200)] == ["pass", "pass"]
    assert driver.check_nvml(H200).finding == "driver 580.159.04, runs CUDA up to 13.0"
    assert driver.check_gpus(H200).finding == "1 GPU: NVIDIA H200"


@pytest.mark.parametrize(("error", "finding", "fix"), [
    ("NVMLError_LibRmVersionMismatch", "RM has detected an NVML/RM version mismatch.", "reboot (the kernel module"),
    ("NVMLError_LibraryNotFound", "no NVIDIA driver: libnvidia-ml.so.1 not found", "sudo ubuntu-drivers install"),
    ("NVMLError_DriverNotLoaded", "the NVIDIA kernel module is not loaded", "sudo modprobe nvidia"),
    ("NVMLError_NoPermission", "Insufficient Permissions", "ls -l /dev/nvidia*"),
    ("NVMLError_Unknown", "NVML cannot start: Unknown Error", "nvidia-smi"),
])
def test_nvml_failures(error: str, finding: str, fix: str) -> None:
    env = with_driver(FakeNvml.fixture("h200", init_error=error))
    c = driver.check_nvml(env)
    assert c.status == "fail" and finding in c.finding and fix in c.fix
    # One cause, one red line: the GPU count check does not fail too.
    assert driver.check_gpus(env).status == "skip"


def test_no_driver_in_wsl_points_at_windows() -> None:
    env = with_driver(FakeNvml.fixture("h200", init_error="NVMLError_LibraryNotFound"))
    env = dataclasses.replace(env, sections={**env.sections, "wsl": {**env.sections["wsl"], "is_wsl": known(True)}})
    c = driver.check_nvml(env)
    assert "WSL2" in c.finding and "never install a Linux driver inside WSL2" in c.fix


def test_driver_without_gpus_fails() -> None:
    c = driver.check_gpus(env_with(gpus=(), **{"driver.gpu_count": 0}))
    assert c.status == "fail" and "sees no GPU" in c.finding and "--gpus all" in c.fix


def test_lost_gpu_fails_and_names_it() -> None:
    lost = model.Gpu(1, {}, lost="GPU is lost (NVML: GPU is lost)")
    c = driver.check_gpus(env_with(gpus=(H200.gpus[0], lost), **{"driver.gpu_count": 2}))
    assert c.status == "fail" and "GPU 1: GPU is lost" in c.finding and "nvidia-smi -q -i 1" in c.fix


# --------------------------------------------------------------------------- WSL2

WSL_OK = {
    "wsl.is_wsl": True, "wsl.wsl_version": 2, "wsl.distro_name": "Ubuntu-22.04", "wsl.dxg_present": True,
    "wsl.lib_dir_present": True, "wsl.lib_dir_files": ["libcuda.so", "libcuda.so.1", "libcuda.so.1.1",
                                                         "libnvidia-ml.so.1"],
    "wsl.libcuda_symlinks": [{"path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "target": f"{WSL_LIB}/libcuda.so.1",
                              "ok": True}],
    "wsl.loader_path_has_wsl_lib": True, "wsl.loader_shadows": [], "wsl.linux_driver_in_wsl": [],
    "wsl.linux_driver_packages": [], "wsl.nvidia_smi_path": f"{WSL_LIB}/nvidia-smi", "wsl.nvidia_smi_on_path": True,
}


def test_not_wsl_is_one_skip() -> None:
    [c] = wsl.checks(H200)
    assert c.status == "skip" and c.finding.startswith("not WSL")


def test_healthy_wsl2_passes() -> None:
    checks = wsl.checks(env_with(**WSL_OK))
    assert [c.id for c in checks] == ["wsl.version", "wsl.dxg", "wsl.loader_path", "wsl.libcuda_symlinks",
                                      "wsl.linux_driver", "wsl.nvidia_smi"]
    assert all(c.status == "pass" for c in checks), checks


@pytest.mark.parametrize(("change", "cid", "status", "finding", "fix"), [
    ({"wsl.wsl_version": 1}, "wsl.version", "fail", "WSL 1 has no GPU support", "wsl --set-version Ubuntu-22.04 2"),
    ({"wsl.dxg_present": False}, "wsl.dxg", "fail", "/dev/dxg is missing", "wsl --update"),
    ({"wsl.loader_path_has_wsl_lib": False}, "wsl.loader_path", "fail", "neither LD_LIBRARY_PATH nor the ldconfig",
     "export LD_LIBRARY_PATH=/usr/lib/wsl/lib:$LD_LIBRARY_PATH"),
    ({"wsl.libcuda_symlinks": [{"path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                "target": "/usr/lib/wsl/lib/libcuda.so.1.1", "ok": False}]},
     "wsl.libcuda_symlinks", "fail", "-> /usr/lib/wsl/lib/libcuda.so.1.1 (target missing)",
     "sudo ln -sf /usr/lib/wsl/lib/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1"),
    ({"wsl.libcuda_symlinks": [{"path": f"{WSL_LIB}/libcuda.so.1", "target": None, "ok": False}]},
     "wsl.libcuda_symlinks", "warn", "is not a symbolic link", "sudo ln -sf libcuda.so.1.1 libcuda.so.1"),
    ({"wsl.linux_driver_in_wsl": ["/usr/lib/x86_64-linux-gnu/libcuda.so.1 is a Linux driver library (not a link to "
                                  "/usr/lib/wsl/lib)", "/proc/driver/nvidia exists"]},
     "wsl.linux_driver", "fail", "a Linux NVIDIA driver is installed inside WSL2", "sudo apt purge 'nvidia-driver-*'"),
])
def test_wsl_problems(change: dict[str, Any], cid: str, status: str, finding: str, fix: str) -> None:
    checks = {c.id: c for c in wsl.checks(env_with(**{**WSL_OK, **change}))}
    c = checks[cid]
    assert c.status == status, c
    assert finding in c.finding and fix in c.fix


# --------------------------------------------------------------------------- environment variables


@pytest.mark.parametrize(("value", "status", "words"), [
    (None, "pass", "not set: CUDA programs see all 1 GPU(s)"),
    ("0", "pass", "CUDA_VISIBLE_DEVICES='0'"),
    ("GPU-8d0ff531-a2cd-2527-7669-e66277d6bc28", "pass", "GPU-8d0ff531"),
    ("", "warn", "is empty"),
    ("-1", "warn", "starts with -1"),
    ("3", "warn", "names GPU 3, but only 1 exist"),
    ("nvidia0", "warn", "neither an index nor a UUID"),
])
def test_cuda_visible_devices(value: str | None, status: str, words: str) -> None:
    variables = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    c = env_checks.check_visible_devices(env_with(**{"env.variables": variables}))
    assert c.status == status and words in c.finding
    assert (c.fix == "unset CUDA_VISIBLE_DEVICES (or set it to indexes or UUIDs from `nvidia-smi -L`)") == \
        (status == "warn")


@pytest.mark.parametrize(("value", "status"), [(None, "pass"), ("0", "pass"), ("1", "warn")])
def test_cuda_launch_blocking(value: str | None, status: str) -> None:
    variables = {} if value is None else {"CUDA_LAUNCH_BLOCKING": value}
    c = env_checks.check_launch_blocking(env_with(**{"env.variables": variables}))
    assert c.status == status
    if status == "warn":
        assert c.fix == "unset CUDA_LAUNCH_BLOCKING"


def test_env_checks_skip_without_variables() -> None:
    assert env_checks.checks(env_with(**{"env.variables": missing("probe crashed: KeyError")})) == []


# --------------------------------------------------------------------------- NVML failures under WSL2: the cause, not a guess

@pytest.mark.parametrize(("change", "finding", "fix"), [
    ({"wsl.loader_path_has_wsl_lib": False}, "libnvidia-ml.so.1 is in /usr/lib/wsl/lib but the loader does not search",
     "echo /usr/lib/wsl/lib | sudo tee /etc/ld.so.conf.d/ld.wsl.conf && sudo ldconfig"),
    ({"wsl.lib_dir_files": ["libcuda.so.1"]}, "no libnvidia-ml.so.1 in /usr/lib/wsl/lib",
     "install the current NVIDIA driver on Windows"),
    ({"wsl.linux_driver_in_wsl": ["package nvidia-utils-510 is installed"],
      "wsl.linux_driver_packages": ["nvidia-utils-510"]},
     "a Linux NVIDIA driver inside WSL2 answers instead", "sudo apt purge nvidia-utils-510 && sudo apt autoremove"),
])
def test_wsl_nvml_library_failures_name_their_cause(change: dict[str, Any], finding: str, fix: str) -> None:
    env = env_with(**{**WSL_OK, "driver.nvml_error": "NVML Shared Library Not Found", **change})
    c = driver.check_nvml(env)
    assert c.status == "fail" and finding in c.finding and c.fix.startswith(fix), c


def test_nvml_crash_in_init_is_one_red_line_with_a_reinstall() -> None:
    env = env_with(**{"driver.nvml_error": "the NVML probe process crashed with SIGSEGV in nvmlInit",
                      "driver.nvml_process_error": "crashed with SIGSEGV in nvmlInit"})
    c = driver.check_nvml(env)
    assert c.status == "fail" and c.finding.startswith("NVML crashed with SIGSEGV in nvmlInit: envcheck read it in a")
    assert driver.check_gpus(env).status == "skip"
