"""torch probes: metadata without importing torch, and the isolated runtime probe replayed from captures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.probes.host import Host, RunResult
from envcheck.probes.isolate import not_run
from envcheck.probes.packages import PackageInfo
from envcheck.probes.torch_probe import (
    NO_CUDA_DEVICE,
    RUNTIME_KEYS,
    TORCH_KEYS,
    build_from,
    probe_torch,
    probe_torch_runtime,
    triton_pin,
    version_py_value,
)
from tests.fakes import FakeHost

FIX = Path(__file__).parent / "fixtures" / "torch"
SITE = "/opt/torch/.venv/lib/python3.12/site-packages"
PY = "/home/user/project/.venv/bin/python"


def _text(name: str) -> str:
    return (FIX / name).read_text()


def _package(meta: str) -> PackageInfo:
    m = json.loads(_text(meta))
    return PackageInfo("torch", m["version"], SITE, tuple(m["requires"]))


def _replay(name: str) -> FakeHost:
    """A host whose python prints what the runtime child printed on the captured machine."""
    c = json.loads(_text(name))
    res = RunResult((PY,), c["returncode"], c["stdout"], c["stderr"], timed_out=c["timed_out"], wall_s=c["wall_s"])
    return FakeHost(commands={PY: res})


# --------------------------------------------------------------------------- metadata


def test_version_py_parsing_of_real_files() -> None:
    cu = _text("version_cu130.py.txt")
    assert version_py_value(cu, "cuda") == "13.0"
    assert version_py_value(cu, "__version__") == "2.11.0+cu130"
    assert version_py_value(cu, "hip") is None
    cpu = _text("version_cpu.py.txt")
    assert version_py_value(cpu, "cuda") is None
    assert version_py_value(cpu, "__version__").endswith("+cpu")


@pytest.mark.parametrize(
    ("version", "version_py", "build", "cuda"),
    [
        ("2.11.0+cu130", None, "cuda", "13.0"),
        ("2.7.1+cu128", None, "cuda", "12.8"),
        ("2.5.1+cpu", None, "cpu", None),
        ("2.6.0+rocm6.2.4", "hip: Optional[str] = '6.2.41133'\ncuda: Optional[str] = None\n", "rocm", None),
        ("2.5.1", "cuda: Optional[str] = '12.4'\n", "cuda", "12.4"),  # PyPI wheel: no local tag
        ("2.5.1", "cuda: Optional[str] = None\nhip: Optional[str] = None\n", "cpu", None),
        ("2.5.1", None, None, None),
    ],
)
def test_build_from(version: str, version_py: str | None, build: str | None, cuda: str | None) -> None:
    assert build_from(version, version_py) == (build, cuda)


def test_triton_pin_from_real_requires() -> None:
    assert triton_pin(_package("metadata_cu130.json").requires) == "3.6.0"
    assert triton_pin(_package("metadata_cpu.json").requires) is None
    assert triton_pin(('pytorch-triton-rocm==3.2.0; platform_system == "Linux"',)) == "3.2.0"


def test_probe_cuda_wheel_whose_metadata_lacks_the_local_tag() -> None:
    """On the H200, pip metadata said 2.11.0 while version.py said 2.11.0+cu130."""
    host = FakeHost(files={f"{SITE}/torch/version.py": _text("version_cu130.py.txt")})
    facts = probe_torch(host, lookup=lambda name: _package("metadata_cu130.json"))
    assert set(facts) == set(TORCH_KEYS)
    assert facts["version"].value == "2.11.0+cu130"
    assert facts["build"].value == "cuda"
    assert facts["cuda_version"].value == "13.0"
    assert facts["triton_pin"].value == "3.6.0"
    assert facts["location"].value == f"{SITE}/torch"


def test_probe_cpu_wheel() -> None:
    host = FakeHost(files={f"{SITE}/torch/version.py": _text("version_cpu.py.txt")})
    facts = probe_torch(host, lookup=lambda name: _package("metadata_cpu.json"))
    assert facts["build"].value == "cpu"
    assert facts["cuda_version"].reason == "CPU-only build"
    assert facts["triton_pin"].reason


def test_probe_not_installed_names_the_interpreter() -> None:
    facts = probe_torch(FakeHost(), lookup=lambda name: None)
    assert facts["installed"].value is False
    assert set(facts) == set(TORCH_KEYS)
    assert all(PY in facts[k].reason for k in TORCH_KEYS if k not in ("installed", "shadowed_by"))


def test_probe_unreadable_version_py_still_uses_the_tag() -> None:
    host = FakeHost(files={f"{SITE}/torch/version.py": PermissionError(13, "Permission denied")})
    pkg = PackageInfo("torch", "2.7.1+cu128", SITE, ())
    facts = probe_torch(host, lookup=lambda name: pkg)
    assert facts["build"].value == "cuda" and facts["cuda_version"].value == "12.8"


def test_probe_does_not_import_torch() -> None:
    code = ("import sys; from envcheck.probes.host import Host; from envcheck.probes.torch_probe import probe_torch; "
            "f = probe_torch(Host()); print(f['installed'].value, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    installed, imported = out.stdout.split()
    assert imported == "False"


# --------------------------------------------------------------------------- runtime (replayed captures)


def test_runtime_h200_capture() -> None:
    facts = probe_torch_runtime(_replay("h200_ok.json"), timeout=60)
    assert set(facts) == set(RUNTIME_KEYS)
    assert facts["import_ok"].value is True
    assert facts["cuda_available"].value is True and facts["device_count"].value == 1
    assert "sm_90" in facts["arch_list"].value
    dev = facts["devices"].value[0]
    assert dev["name"] == "NVIDIA H200" and dev["capability"] == "9.0" and dev["sm_count"] == 132
    assert dev["l2_bytes"] == 60 * 2**20
    assert facts["cudnn_version"].value == 91900
    assert facts["tf32_matmul"].value is False and facts["float32_matmul_precision"].value == "highest"
    assert facts["smoke_ok"].value is True and facts["smoke_s"].value > 0
    assert facts["error"].reason == "no error"


@pytest.mark.parametrize("name", ["h200_cuda_visible_devices_empty.json", "h200_cuda_visible_devices_bad.json"])
def test_runtime_gpu_hidden_by_cuda_visible_devices(name: str) -> None:
    facts = probe_torch_runtime(_replay(name), timeout=60)
    assert facts["import_ok"].value is True
    assert facts["cuda_available"].value is False
    assert facts["smoke_ok"].reason == NO_CUDA_DEVICE
    assert facts["error"].value is None


@pytest.mark.parametrize(("name", "needle"), [("driver_too_old.json", "too old (found version 11040)"),
                                              ("cuda_unknown_error.json", "CUDA unknown error")])
def test_runtime_cuda_init_warnings_are_kept(name: str, needle: str) -> None:
    facts = probe_torch_runtime(_replay(name), timeout=60)
    assert facts["cuda_available"].value is False
    assert any(needle in w for w in facts["warnings"].value)


def test_runtime_arch_mismatch_fails_the_smoke_op() -> None:
    facts = probe_torch_runtime(_replay("sm90_not_in_arch_list.json"), timeout=60)
    assert facts["cuda_available"].value is True
    assert facts["smoke_ok"].value is False
    assert facts["error"].value.startswith("RuntimeError: CUDA error: no kernel image")
    assert any("sm_90 is not compatible" in w for w in facts["warnings"].value)


def test_runtime_import_segfault() -> None:
    facts = probe_torch_runtime(_replay("import_segfault.json"), timeout=60)
    assert facts["import_ok"].value is False
    assert facts["error"].value == "crashed with SIGSEGV"
    assert "Segmentation fault" in facts["output_tail"].value
    assert facts["cuda_available"].reason == "runtime probe crashed with SIGSEGV"


def test_runtime_not_installed() -> None:
    facts = probe_torch_runtime(_replay("not_installed.json"), timeout=60)
    assert facts["import_ok"].value is False
    assert facts["error"].value == "ModuleNotFoundError: No module named 'torch'"
    assert facts["smoke_ok"].reason == "torch import failed"


def test_runtime_timeout() -> None:
    host = FakeHost(commands={PY: RunResult((PY,), None, "", "", timed_out=True, error="timed out after 5 s")})
    facts = probe_torch_runtime(host, timeout=5)
    assert facts["import_ok"].value is False
    assert facts["error"].value == "timed out after 5 s"


def test_not_run_covers_every_key() -> None:
    facts = not_run(RUNTIME_KEYS)
    assert set(facts) == set(RUNTIME_KEYS) and all(f.reason.startswith("not run") for f in facts.values())


def test_runtime_on_this_machine_really_isolated() -> None:
    """The real child on the test machine: on a CPU-only box, no CUDA device; on a GPU box, the op passes."""
    pytest.importorskip("torch")
    host = Host()
    host.python_executable = sys.executable
    facts = probe_torch_runtime(host, timeout=120)
    assert facts["import_ok"].value is True
    if facts["cuda_available"].value:
        assert facts["smoke_ok"].value is True
    else:
        assert facts["smoke_ok"].reason == NO_CUDA_DEVICE


# --------------------------------------------------------------------------- a torch shadowed on PYTHONPATH


def test_a_torch_package_on_pythonpath_shadows_the_installed_one() -> None:
    host = FakeHost(files={"/home/u/src/torch/__init__.py": "", f"{SITE}/torch/version.py": "__version__ = '2.7.1'\n"},
                    environ={"PYTHONPATH": "/home/u/src"})
    facts = probe_torch(host, lookup=lambda name: _package("metadata_cu130.json"))
    assert facts["shadowed_by"].value == "/home/u/src/torch"
    assert facts["location"].value == f"{SITE}/torch"


def test_a_bare_torch_folder_or_the_installed_one_on_pythonpath_is_no_shadow() -> None:
    for files, path in (({"/home/u/data/torch/weights.pt": ""}, "/home/u/data"), ({}, SITE)):
        host = FakeHost(files={**files, f"{SITE}/torch/__init__.py": ""}, environ={"PYTHONPATH": path})
        facts = probe_torch(host, lookup=lambda name: _package("metadata_cu130.json"))
        assert facts["shadowed_by"].reason == "no torch package on PYTHONPATH ahead of the installed one"


def test_the_isolated_import_reports_where_torch_was_loaded_from() -> None:
    out = ('@@envcheck-json@@ {"import_ok": true, "import_s": 0.5, "location": "/home/u/src/torch"}\n')
    host = FakeHost(commands={PY: RunResult((PY,), 0, out, "", wall_s=1.0)})
    assert probe_torch_runtime(host, timeout=60)["location"].value == "/home/u/src/torch"
