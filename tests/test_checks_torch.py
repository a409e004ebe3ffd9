"""torch checks: right build for the GPU and driver, and the isolated runtime results (real texts)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from envcheck import model
from envcheck.checks import cuda_versions as cv
from envcheck.checks import torch as torch_checks
from envcheck.checks.torch import arch_support
from envcheck.model import Environment, Fact, known, missing
from envcheck.probes.host import RunResult
from envcheck.probes.torch_probe import probe_torch_runtime
from tests.fakes import FakeHost

FIX = Path(__file__).parent / "fixtures" / "torch"
H200 = model.load(FIX / "h200_check_report.json").environment
PY = "/home/user/project/.venv/bin/python"


def env_with(base: Environment = H200, gpus: tuple | None = None, **changes: Any) -> Environment:
    """``env_with(**{"torch.version": "2.5.1+cpu"})``: the H200 environment with facts replaced."""
    sections = {k: dict(v) for k, v in base.sections.items()}
    for dotted, value in changes.items():
        section, key = dotted.split(".", 1)
        sections.setdefault(section, {})[key] = value if isinstance(value, Fact) else known(value)
    return dataclasses.replace(base, sections=sections, gpus=base.gpus if gpus is None else gpus)


def runtime_from(name: str) -> dict[str, Fact]:
    c = json.loads((FIX / name).read_text())
    host = FakeHost(commands={PY: RunResult((PY,), c["returncode"], c["stdout"], c["stderr"], wall_s=c["wall_s"])})
    return probe_torch_runtime(host, timeout=60)


def with_runtime(name: str, base: Environment = H200, **changes: Any) -> Environment:
    return env_with(base, **{f"torch_runtime.{k}": v for k, v in runtime_from(name).items()}, **changes)


def one(checks: list[model.Check] | model.Check, prefix: str = "") -> model.Check:
    if isinstance(checks, model.Check):
        return checks
    [c] = [c for c in checks if c.id.startswith(prefix)]
    return c


@pytest.mark.parametrize("fn", [torch_checks.check_installed, torch_checks.check_cpu_build,
                                torch_checks.check_driver_compat, torch_checks.check_import,
                                torch_checks.check_cuda_available, torch_checks.check_smoke])
def test_real_h200_passes(fn: Any) -> None:
    c = fn(H200)
    assert c.status == "pass", c
    assert c.fix is None


def test_real_h200_arch() -> None:
    [c] = torch_checks.check_arch(H200)
    assert c.status == "pass" and c.id == "torch.arch.0"
    assert "sm_90; torch ships sm_90 code" in c.finding


# --------------------------------------------------------------------------- build vs hardware


def test_cpu_wheel_on_gpu_machine_fails_with_the_wheel_for_the_driver() -> None:
    c = torch_checks.check_cpu_build(env_with(**{"torch.version": "2.11.0+cpu", "torch.build": "cpu",
                                                 "torch.cuda_version": missing("CPU-only build")}))
    assert c.status == "fail" and c.id == "torch.cpu_build_with_gpu"
    assert "2.11.0+cpu is a CPU-only build on a machine with 1 NVIDIA GPU(s) and driver 580.159.04 (CUDA 13.0)" \
        in c.finding
    assert c.fix == "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu130"


def test_cpu_wheel_picks_an_older_index_for_an_older_driver() -> None:
    c = torch_checks.check_cpu_build(env_with(**{"torch.build": "cpu", "driver.cuda_driver_version": "12.4",
                                                 "driver.driver_version": "550.54.15"}))
    assert c.fix.endswith("/whl/cu124")


def test_cpu_wheel_without_gpu_is_not_a_failure() -> None:
    c = torch_checks.check_cpu_build(env_with(gpus=(), **{"torch.build": "cpu", "driver.gpu_count": 0}))
    assert c.status == "skip"


@pytest.mark.parametrize(("torch_cuda", "driver_cuda", "status", "words"), [
    ("13.0", "13.0", "pass", "runs CUDA up to 13.0"),
    ("12.4", "13.0", "pass", "built for CUDA 12.4"),
    ("12.8", "12.4", "warn", "minor-version compatibility"),
    ("13.0", "12.4", "fail", "driver too old"),
    ("12.1", "11.4", "fail", "driver too old"),
])
def test_driver_compat(torch_cuda: str, driver_cuda: str, status: str, words: str) -> None:
    c = torch_checks.check_driver_compat(env_with(**{"torch.cuda_version": torch_cuda,
                                                     "driver.cuda_driver_version": driver_cuda}))
    assert c.status == status, c
    assert words in c.finding
    if status != "pass":
        need = cv.min_driver(cv.parse(torch_cuda))
        # The H200 report was taken in a docker container: the driver to upgrade is the host's.
        assert need in c.fix and "on the host" in c.fix and "restart the container" in c.fix


@pytest.mark.parametrize(("container", "words"), [
    ("none", "(Ubuntu: `sudo ubuntu-drivers install`), then reboot"),
    ("docker", "on the host to 530.30.02 or newer (a container uses the host's driver), then restart the container"),
    ("kubernetes", "on the node to 530.30.02 or newer (a pod uses its node's driver"),
])
def test_driver_fix_names_where_the_driver_lives(container: str, words: str) -> None:
    c = torch_checks.check_driver_compat(env_with(**{"torch.cuda_version": "12.1", "driver.cuda_driver_version": "11.4",
                                                     "system.container": container}))
    assert c.status == "fail" and words in c.fix
    assert c.fix.endswith("/whl/cu118 (CUDA 11.8 runs on this CUDA 11.4 driver by minor-version compatibility)")


def test_driver_too_old_offers_the_wheel_the_driver_runs() -> None:
    c = torch_checks.check_driver_compat(env_with(**{"torch.cuda_version": "13.0", "driver.cuda_driver_version": "12.8"}))
    assert "580.65.06" in c.fix and c.fix.endswith("/whl/cu128")


def test_driver_too_old_in_wsl_points_at_the_windows_driver() -> None:
    c = torch_checks.check_driver_compat(env_with(**{"torch.cuda_version": "13.0", "driver.cuda_driver_version": "12.2",
                                                     "wsl.is_wsl": True}))
    assert c.status == "fail" and "on Windows (not inside WSL)" in c.fix


@pytest.mark.parametrize(("cc", "arch", "kind", "entry"), [
    ((9, 0), ["sm_80", "sm_90"], "sass", "sm_90"),
    ((9, 0), ["sm_80", "sm_90a"], "sass", "sm_90a"),
    ((8, 6), ["sm_70", "sm_80"], "compatible", "sm_80"),
    ((8, 9), ["sm_80", "sm_86", "compute_86"], "compatible", "sm_86"),
    ((9, 0), ["sm_80", "sm_86", "compute_86"], "ptx", "compute_86"),
    ((12, 0), ["sm_75", "sm_80", "sm_86", "sm_90"], "none", None),
    ((9, 0), ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"], "none", None),
    ((10, 0), ["sm_90a"], "none", None),  # arch-specific code runs on exactly that GPU
])
def test_arch_support(cc: tuple[int, int], arch: list[str], kind: str, entry: str | None) -> None:
    assert arch_support(cc, arch) == (kind, entry)


def test_arch_missing_from_the_real_h100_message_fails() -> None:
    env = with_runtime("sm90_not_in_arch_list.json")
    [c] = torch_checks.check_arch(env)
    assert c.status == "fail"
    assert "is sm_90, not in 2.11.0+cu130's arch list (sm_50 sm_60 sm_70 sm_75 sm_80 sm_86)" in c.finding
    assert c.fix == "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu130"


def test_blackwell_on_an_old_driver_needs_the_driver_first() -> None:
    gpu = dataclasses.replace(H200.gpus[0], facts={**H200.gpus[0].facts, "compute_capability": known("12.0"),
                                                   "name": known("NVIDIA GeForce RTX 5090")})
    env = env_with(gpus=(gpu,), **{"driver.cuda_driver_version": "12.4", "torch_runtime.arch_list": ["sm_80", "sm_90"]})
    [c] = torch_checks.check_arch(env)
    assert c.status == "fail" and "570.26" in c.fix and c.fix.endswith("/whl/cu128")


def test_ptx_only_is_a_warning() -> None:
    env = env_with(**{"torch_runtime.arch_list": ["sm_80", "compute_80"]})
    [c] = torch_checks.check_arch(env)
    assert c.status == "warn" and "compute_80 PTX" in c.finding


# --------------------------------------------------------------------------- runtime results


def test_import_segfault_fails_with_the_output() -> None:
    c = torch_checks.check_import(with_runtime("import_segfault.json"))
    assert c.status == "fail"
    assert c.finding == "`import torch` failed: crashed with SIGSEGV"
    assert "faulthandler" in c.fix
    assert "Segmentation fault" in c.details


def test_import_timeout() -> None:
    env = env_with(**{"torch_runtime.import_ok": False, "torch_runtime.error": "timed out after 120 s"})
    c = torch_checks.check_import(env)
    assert c.status == "fail" and "timed out after 120 s" in c.finding and "importtime" in c.fix


@pytest.mark.parametrize(("fixture", "finding", "fix"), [
    ("driver_too_old.json", "driver is too old", "580.65.06"),
    ("cuda_unknown_error.json", "CUDA unknown error", "modprobe nvidia_uvm"),
    ("h200_cuda_visible_devices_empty.json", "CUDA_VISIBLE_DEVICES='' hides every GPU", "unset CUDA_VISIBLE_DEVICES"),
])
def test_cuda_not_available_names_the_cause(fixture: str, finding: str, fix: str) -> None:
    changes: dict[str, Any] = {}
    if "visible" in fixture:
        changes["env.variables"] = {"CUDA_VISIBLE_DEVICES": ""}
    c = torch_checks.check_cuda_available(with_runtime(fixture, **changes))
    assert c.status == "fail"
    assert "`torch.cuda.is_available()` is `False` on a machine with 1 NVIDIA GPU(s)" in c.finding
    assert finding in c.finding and fix in c.fix


def test_smoke_failure_from_the_arch_mismatch() -> None:
    c = torch_checks.check_smoke(with_runtime("sm90_not_in_arch_list.json"))
    assert c.status == "fail"
    assert "no kernel image is available" in c.finding
    assert "architecture check" in c.fix
    assert "sm_90 is not compatible" in c.details


def test_probe_only_skips_runtime_checks() -> None:
    from envcheck.probes.isolate import not_run
    from envcheck.probes.torch_probe import RUNTIME_KEYS

    env = env_with(**{f"torch_runtime.{k}": v for k, v in not_run(RUNTIME_KEYS).items()})
    for fn in (torch_checks.check_import, torch_checks.check_cuda_available, torch_checks.check_smoke):
        assert fn(env).status == "skip"
    assert torch_checks.check_arch(env)[0].status == "skip"


def test_not_installed_is_a_warning_with_the_wheel() -> None:
    env = env_with(**{"torch.installed": False, "torch.version": missing("PyTorch is not installed for /usr/bin/python3")})
    c = torch_checks.check_installed(env)
    assert c.status == "warn" and c.fix == "pip install torch --index-url https://download.pytorch.org/whl/cu130"
