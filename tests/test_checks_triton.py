"""Triton checks: JIT prerequisites, ptxas vs the GPU, and the smoke kernel (real H200 captures)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from envcheck import model
from envcheck.checks import triton as triton_checks
from envcheck.model import Environment, Fact, known, missing
from envcheck.probes.host import RunResult
from envcheck.probes.triton_probe import probe_triton_runtime
from tests.fakes import FakeHost

FIXTURES = Path(__file__).parent / "fixtures"
H200 = model.load(FIXTURES / "torch" / "h200_check_report.json").environment
PY = "/home/user/project/.venv/bin/python"


def env_with(gpus: tuple | None = None, **changes: Any) -> Environment:
    sections = {k: dict(v) for k, v in H200.sections.items()}
    for dotted, value in changes.items():
        section, key = dotted.split(".", 1)
        sections[section][key] = value if isinstance(value, Fact) else known(value)
    return dataclasses.replace(H200, sections=sections, gpus=H200.gpus if gpus is None else gpus)


def gpu_cc(cc: str, name: str) -> tuple[model.Gpu, ...]:
    g = H200.gpus[0]
    return (dataclasses.replace(g, facts={**g.facts, "compute_capability": known(cc), "name": known(name)}),)


def replayed(name: str) -> dict[str, Fact]:
    c = json.loads((FIXTURES / "triton" / name).read_text())
    host = FakeHost(commands={PY: RunResult((PY,), c["returncode"], c["stdout"], c["stderr"], wall_s=c["wall_s"])})
    return probe_triton_runtime(host, timeout=60)


@pytest.mark.parametrize("fn", [triton_checks.check_installed, triton_checks.check_pin, triton_checks.check_compiler,
                                triton_checks.check_headers, triton_checks.check_libcuda, triton_checks.check_smoke])
def test_real_h200_passes(fn: Any) -> None:
    c = fn(H200)
    assert c.status == "pass", c


def test_real_h200_ptxas_targets_sm_90() -> None:
    [c] = triton_checks.check_gpu_support(H200)
    assert c.status == "pass" and "sm_90; Triton's ptxas 12.8.93 targets up to sm_120" in c.finding


def test_smoke_pass_reports_compile_and_run_times() -> None:
    c = triton_checks.check_smoke(H200)
    assert "first call (JIT compile) 1.09 s, second call 0.12 ms" in c.finding


@pytest.mark.parametrize(("changes", "fn", "finding", "fix"), [
    ({"cuda.cc_path": missing("no C compiler: $CC unset; cc, gcc, clang not on PATH")}, triton_checks.check_compiler,
     "no C compiler", "sudo apt install build-essential"),
    ({"cuda.python_headers": missing("/usr/include/python3.12/Python.h not found")}, triton_checks.check_headers,
     "Python.h missing for Python 3.12.3", "sudo apt install python3.12-dev"),
    ({"cuda.python_headers": missing("not found"), "system.python_env": "conda"}, triton_checks.check_headers,
     "Python.h missing", "conda install python=3.12"),
    ({"cuda.libcuda_path": missing("libcuda.so.1 not found")}, triton_checks.check_libcuda,
     "libcuda.so.1 not found", "sudo ldconfig"),
    ({"cuda.libcuda_path": missing("libcuda.so.1 not found"), "wsl.is_wsl": True}, triton_checks.check_libcuda,
     "libcuda.so.1 not found", "export LD_LIBRARY_PATH=/usr/lib/wsl/lib:$LD_LIBRARY_PATH"),
])
def test_prerequisite_missing_fails(changes: dict[str, Any], fn: Any, finding: str, fix: str) -> None:
    c = fn(env_with(**changes))
    assert c.status == "fail", c
    assert finding in c.finding and fix in c.fix


def test_pin_mismatch_warns() -> None:
    c = triton_checks.check_pin(env_with(**{"triton.version": "3.5.1"}))
    assert c.status == "warn" and "built against Triton 3.6.0, but 3.5.1" in c.finding
    assert c.fix == "pip install triton==3.6.0"


def test_not_installed_warns_with_the_pin() -> None:
    c = triton_checks.check_installed(env_with(**{"triton.installed": False}))
    assert c.status == "warn" and c.fix.startswith("pip install triton==3.6.0")
    assert triton_checks.check_smoke(env_with(**{"triton.installed": False})).status == "skip"


def test_ptxas_too_old_for_blackwell() -> None:
    env = env_with(gpus=gpu_cc("12.0", "NVIDIA GeForce RTX 5090"), **{
        "triton.ptxas_version": "12.4.131", "triton.ptxas_max_sm": 90,
        "triton.ptxas_blackwell_max_sm": missing("this Triton uses one ptxas for every architecture")})
    [c] = triton_checks.check_gpu_support(env)
    assert c.status == "fail"
    assert "is sm_120, but the ptxas Triton uses (12.4.131) targets only up to sm_90" in c.finding
    assert "pip install -U triton" in c.fix and "CUDA 12.8" in c.fix


def test_blackwell_uses_the_blackwell_ptxas() -> None:
    env = env_with(gpus=gpu_cc("12.0", "NVIDIA GeForce RTX 5090"))
    [c] = triton_checks.check_gpu_support(env)
    assert c.status == "pass" and "12.9.86" in c.finding


def test_ptxas_override_is_named_in_the_fix() -> None:
    env = env_with(gpus=gpu_cc("10.0", "NVIDIA B200"), **{
        "triton.ptxas_blackwell_max_sm": 90, "triton.ptxas_blackwell_version": "12.4.131",
        "env.variables": {"TRITON_PTXAS_BLACKWELL_PATH": "/usr/local/cuda-12.4/bin/ptxas"}})
    [c] = triton_checks.check_gpu_support(env)
    assert c.status == "fail" and c.fix.startswith("unset TRITON_PTXAS_BLACKWELL_PATH")


def test_pascal_is_below_tritons_minimum() -> None:
    [c] = triton_checks.check_gpu_support(env_with(gpus=gpu_cc("6.1", "NVIDIA GeForce GTX 1080")))
    assert c.status == "fail" and "compute capability 6.1" in c.finding and "7.0" in c.finding


def test_smoke_without_c_compiler_real_capture() -> None:
    env = env_with(**{f"triton_runtime.{k}": v for k, v in replayed("h200_no_c_compiler.json").items()})
    c = triton_checks.check_smoke(env)
    assert c.status == "fail"
    assert c.finding == ("masked vector add failed: RuntimeError: Failed to find C compiler. Please specify via CC "
                         "environment variable or set triton.knobs.build.impl.")
    assert c.fix.startswith("sudo apt install build-essential")
    assert "Failed to find C compiler" in c.details


def test_smoke_without_gpu_is_skipped_with_the_reason() -> None:
    env = env_with(**{f"triton_runtime.{k}": v for k, v in replayed("h200_cuda_visible_devices_empty.json").items()})
    c = triton_checks.check_smoke(env)
    assert c.status == "skip" and c.finding.startswith("no CUDA GPU: Triton needs one to compile")


def test_smoke_python_h_failure_points_at_headers() -> None:
    env = env_with(**{"triton_runtime.smoke_ok": False,
                      "triton_runtime.error": "CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpx/main.c', "
                                              "'-O3', '-shared', '-fPIC']' returned non-zero exit status 1.",
                      "triton_runtime.output_tail": "/tmp/tmpx/main.c:5:10: fatal error: Python.h: No such file or "
                                                    "directory\ncompilation terminated."})
    c = triton_checks.check_smoke(env)
    assert c.status == "fail" and "python3.12-dev" in c.fix
