"""Per-GPU checks, each passing on the real H200 capture and failing on a changed fact."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from envcheck import model
from envcheck.checks import gpu as gpu_checks
from envcheck.model import Environment, Gpu, known, missing

H200 = model.load(Path(__file__).parent / "fixtures" / "torch" / "h200_check_report.json").environment


def h200_gpu(**facts: Any) -> Gpu:
    g = H200.gpus[0]
    new = dict(g.facts)
    for k, v in facts.items():
        new[k] = v if isinstance(v, model.Fact) else known(v)
    return dataclasses.replace(g, facts=new)


def by_rule(env: Environment, rule: str) -> model.Check:
    [c] = [c for c in gpu_checks.checks(env) if c.id.startswith(f"gpu.{rule}.")]
    return c


def env_with(gpu: Gpu, wsl: bool = False) -> Environment:
    sections = dict(H200.sections)
    sections["wsl"] = {**sections["wsl"], "is_wsl": known(wsl)}
    return dataclasses.replace(H200, sections=sections, gpus=(gpu,))


@pytest.mark.parametrize("rule", ["throttle", "ecc", "memory_repair", "pcie", "processes", "mig", "persistence"])
def test_real_h200_passes(rule: str) -> None:
    c = by_rule(H200, rule)
    assert c.status == "pass", c
    assert "GPU 0 (NVIDIA H200)" in c.finding and c.fix is None


@pytest.mark.parametrize(("rule", "facts", "status", "finding", "fix"), [
    ("throttle", {"throttled": True, "throttle_reasons": ["sw_thermal_slowdown"], "sm_clock_mhz": 1410,
                  "temperature_c": 87}, "warn", "throttled now (sw_thermal_slowdown): SM 1410/1980 MHz, 87 C",
     "check cooling"),
    ("throttle", {"throttled": True, "throttle_reasons": ["sw_power_cap"], "power_w": 699.0}, "warn",
     "sw_power_cap", "-pl"),
    ("ecc", {"ecc_uncorrected_volatile": 3}, "fail", "3 uncorrected ECC error(s) since the driver loaded",
     "nvidia-smi -r -i 0"),
    ("ecc", {"ecc_uncorrected_aggregate": 2}, "warn", "2 uncorrected ECC error(s) over the board's lifetime",
     "ECC,ROW_REMAPPER"),
    ("memory_repair", {"remapped_rows_failure": True}, "fail", "row remapping failed", "RMA"),
    ("memory_repair", {"remapped_rows_pending": True}, "warn", "row remapping is pending", "nvidia-smi -r -i 0"),
    ("memory_repair", {"retired_pages_pending": True}, "warn", "page retirement is pending", "reboot"),
    ("pcie", {"pcie_gen": 1}, "warn", "Gen1 x16 (max Gen5 x16); idle GPUs drop the link speed", "under load"),
    ("pcie", {"pcie_width": 8}, "warn", "Gen5 x8", "pcie.link.width.current"),
    ("processes", {"processes": [{"pid": 4242, "name": "python3", "used_bytes": 1288490188}]}, "warn",
     "runs 1 other process(es): python3 (pid 4242, 1.2 GiB)",
     "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"),
    ("mig", {"mig_mode": True}, "warn", "MIG mode: a benchmark runs on one slice", "-mig 0"),
    ("persistence", {"persistence_mode": False}, "warn", "persistence mode off", "nvidia-persistenced"),
])
def test_rule_fires(rule: str, facts: dict[str, Any], status: str, finding: str, fix: str) -> None:
    c = by_rule(env_with(h200_gpu(**facts)), rule)
    assert c.status == status, c
    assert finding in c.finding
    assert c.fix and fix in c.fix


def test_idle_is_not_throttled() -> None:
    c = by_rule(env_with(h200_gpu(throttle_reasons=["gpu_idle"], sm_clock_mhz=345)), "throttle")
    assert c.status == "pass" and "idle, SM 345/1980 MHz" in c.finding


def test_ecc_disabled_is_skipped() -> None:
    c = by_rule(env_with(h200_gpu(ecc_mode_current=False, ecc_uncorrected_volatile=missing("ECC disabled"))), "ecc")
    assert c.status == "skip"


def test_unsupported_fact_is_a_skip_with_the_nvml_reason() -> None:
    why = "not supported on this GPU (NVML: Not Supported)"
    c = by_rule(env_with(h200_gpu(pcie_gen=missing(why))), "pcie")
    assert c.status == "skip" and why in c.finding


def test_no_persistence_check_in_wsl() -> None:
    ids = [c.id for c in gpu_checks.checks(env_with(h200_gpu(persistence_mode=False), wsl=True))]
    assert not any(i.startswith("gpu.persistence") for i in ids)


def test_lost_gpu_is_left_to_the_driver_check_and_others_still_checked() -> None:
    lost = Gpu(1, {}, lost="GPU is lost (NVML: GPU is lost)")
    env = dataclasses.replace(H200, gpus=(H200.gpus[0], lost))
    ids = [c.id for c in gpu_checks.checks(env)]
    assert "gpu.ecc.0" in ids and not any(i.endswith(".1") for i in ids)
