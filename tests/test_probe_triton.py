"""Triton probes: metadata and ptxas without importing Triton; the smoke kernel replayed from H200 captures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from envcheck.probes.host import Host, RunResult
from envcheck.probes.packages import PackageInfo
from envcheck.probes.triton_probe import (
    KERNEL_SOURCE,
    NO_GPU,
    RUNTIME_KEYS,
    TRITON_KEYS,
    parse_ptxas_version,
    probe_triton,
    probe_triton_runtime,
    ptxas_max_sm,
)
from tests.fakes import FakeHost

FIX = Path(__file__).parent / "fixtures" / "triton"
SITE = "/opt/torch/.venv/lib/python3.12/site-packages"
BIN = f"{SITE}/triton/backends/nvidia/bin"
PY = "/home/user/project/.venv/bin/python"
PTXAS_12_8 = (FIX / "ptxas_version_12.8.txt").read_text()
PTXAS_12_9 = (FIX / "ptxas_blackwell_version_12.9.txt").read_text()
TRITON = PackageInfo("triton", "3.6.0", SITE, ())


def _replay(name: str) -> FakeHost:
    c = json.loads((FIX / name).read_text())
    res = RunResult((PY,), c["returncode"], c["stdout"], c["stderr"], timed_out=c["timed_out"], wall_s=c["wall_s"])
    return FakeHost(commands={PY: res})


def test_parse_real_ptxas_versions() -> None:
    assert parse_ptxas_version(PTXAS_12_8) == "12.8.93"
    assert parse_ptxas_version(PTXAS_12_9) == "12.9.86"
    assert parse_ptxas_version("ptxas: command not found") is None


@pytest.mark.parametrize(("release", "sm"), [
    ("10.2", 75), ("11.4", 86), ("11.8", 90), ("12.0", 90), ("12.4.131", 90), ("12.8", 120), ("12.8.93", 120),
    ("12.9", 121), ("13.0", 121), ("9.2", None), ("garbage", None),
])
def test_ptxas_max_sm_table(release: str, sm: int | None) -> None:
    assert ptxas_max_sm(release) == sm


def test_bundled_ptxas_pair_of_triton_3_6() -> None:
    host = FakeHost(files={f"{BIN}/ptxas": "", f"{BIN}/ptxas-blackwell": ""},
                    commands={(f"{BIN}/ptxas", "--version"): (0, PTXAS_12_8, ""),
                              (f"{BIN}/ptxas-blackwell", "--version"): (0, PTXAS_12_9, "")})
    facts = probe_triton(host, lookup=lambda name: TRITON)
    assert set(facts) == set(TRITON_KEYS)
    assert facts["version"].value == "3.6.0"
    assert facts["bundled_ptxas"].value == f"{BIN}/ptxas"
    assert facts["ptxas_version"].value == "12.8.93" and facts["ptxas_max_sm"].value == 120
    assert facts["ptxas_blackwell_version"].value == "12.9.86" and facts["ptxas_blackwell_max_sm"].value == 121


def test_triton_ptxas_path_override_is_the_one_used() -> None:
    old = "/usr/local/cuda-11.8/bin/ptxas"
    host = FakeHost(files={f"{BIN}/ptxas": "", old: ""}, environ={"TRITON_PTXAS_PATH": old},
                    commands={(old, "--version"): (0, PTXAS_12_8.replace("12.8", "11.8"), ""),
                              (f"{BIN}/ptxas", "--version"): (0, PTXAS_12_8, "")})
    facts = probe_triton(host, lookup=lambda name: TRITON)
    assert facts["ptxas_path"].value == old
    assert facts["ptxas_max_sm"].value == 90
    assert facts["ptxas_blackwell_path"].reason == "this Triton uses one ptxas for every architecture"


def test_ptxas_that_fails_is_a_reason() -> None:
    host = FakeHost(files={f"{BIN}/ptxas": ""},
                    commands={(f"{BIN}/ptxas", "--version"): (126, "", "cannot execute binary file: Exec format error")})
    facts = probe_triton(host, lookup=lambda name: TRITON)
    assert facts["ptxas_version"].value is None
    assert "exited with status 126" in facts["ptxas_version"].reason
    assert facts["ptxas_max_sm"].reason == facts["ptxas_version"].reason


def test_old_triton_falls_back_to_path() -> None:
    host = FakeHost(files={"/usr/local/cuda/bin/ptxas": ""}, environ={"PATH": "/usr/local/cuda/bin"},
                    commands={("/usr/local/cuda/bin/ptxas", "--version"): (0, PTXAS_12_8, "")})
    facts = probe_triton(host, lookup=lambda name: PackageInfo("triton", "2.1.0", SITE, ()))
    assert facts["bundled_ptxas"].reason.startswith("not found at")
    assert facts["ptxas_path"].value == "/usr/local/cuda/bin/ptxas"


def test_not_installed() -> None:
    facts = probe_triton(FakeHost(), lookup=lambda name: None)
    assert facts["installed"].value is False and set(facts) == set(TRITON_KEYS)
    assert "not installed" in facts["ptxas_version"].reason


def test_runtime_h200_capture() -> None:
    facts = probe_triton_runtime(_replay("h200_ok.json"), timeout=60)
    assert set(facts) == set(RUNTIME_KEYS)
    assert facts["smoke_ok"].value is True and facts["run_ok"].value is True
    assert facts["compile_s"].value > facts["run_s"].value  # the first call paid for the JIT compile
    assert facts["error"].reason == "no error"


def test_runtime_no_c_compiler_capture() -> None:
    facts = probe_triton_runtime(_replay("h200_no_c_compiler.json"), timeout=60)
    assert facts["smoke_ok"].value is False
    assert facts["error"].value.startswith("RuntimeError: Failed to find C compiler")
    assert facts["run_ok"].reason == "the first call failed"
    assert facts["compile_s"].value is None


def test_runtime_without_gpu_capture() -> None:
    facts = probe_triton_runtime(_replay("h200_cuda_visible_devices_empty.json"), timeout=60)
    assert facts["smoke_ok"].reason == NO_GPU
    assert facts["error"].reason == "no error"


def test_runtime_crash_during_compile() -> None:
    out = '@@envcheck-json@@ {"cuda": true}\n'
    host = FakeHost(commands={PY: RunResult((PY,), -11, out, "Fatal Python error: Segmentation fault\n")})
    facts = probe_triton_runtime(host, timeout=60)
    assert facts["smoke_ok"].value is False
    assert facts["error"].value == "crashed with SIGSEGV"
    assert "Segmentation fault" in facts["output_tail"].value


def test_runtime_wrong_result_is_an_error() -> None:
    out = ('@@envcheck-json@@ {"cuda": true}\n'
           '@@envcheck-json@@ {"compile_s": 1.2, "smoke_ok": false, "mismatches": 17}\n'
           '@@envcheck-json@@ {"run_s": 0.0001, "run_ok": false}\n')
    facts = probe_triton_runtime(FakeHost(commands={PY: (0, out, "")}), timeout=60)
    assert facts["smoke_ok"].value is False
    assert "17 of 98317 elements differ" in facts["error"].value


def test_kernel_source_is_a_masked_add() -> None:
    compile(KERNEL_SOURCE, "kernel", "exec")
    assert "mask=mask" in KERNEL_SOURCE and "tl.store" in KERNEL_SOURCE


def test_runtime_on_this_machine() -> None:
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    host = Host()
    host.python_executable = sys.executable
    facts = probe_triton_runtime(host, timeout=300)
    if facts["smoke_ok"].value is None:
        assert facts["smoke_ok"].reason == NO_GPU
    else:
        assert facts["smoke_ok"].value is True and facts["run_ok"].value is True


@pytest.mark.gpu
def test_runtime_compiles_on_a_gpu() -> None:
    host = Host()
    host.python_executable = sys.executable
    facts = probe_triton_runtime(host, timeout=300)
    assert facts["smoke_ok"].value is True, facts["error"].value
    assert facts["compile_s"].value > 0
