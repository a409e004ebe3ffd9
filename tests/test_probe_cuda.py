"""Sections ``cuda`` (libcuda, toolkit, compilers) and ``env`` (relevant variables, secrets redacted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import FakeHost

from envcheck.model import Fact, to_dict
from envcheck.probes import cuda, envvars
from envcheck.probes.cuda import LdCache, parse_ldconfig, parse_nvcc_version, probe_cuda
from envcheck.probes.envvars import probe_env
from envcheck.probes.host import RunResult, default_host
from envcheck.redact import REDACTED
from envcheck.redact import redact_value as redact

FIX = Path(__file__).parent / "fixtures"
LDCONFIG_H200 = (FIX / "system" / "ldconfig_p.h200").read_text(encoding="utf-8")
NVCC_H200 = (FIX / "system" / "nvcc_version.h200").read_text(encoding="utf-8")
LDCONFIG_WSL2 = (FIX / "wsl" / "ldconfig_p_libcuda.wsl2").read_text(encoding="utf-8")


def h200_host(**overrides: object) -> FakeHost:
    """The H200 container: driver libraries in /usr/local/nvidia/lib64, toolkit 13.0 in /usr/local/cuda."""
    kwargs: dict[str, object] = dict(
        files={
            "/sbin/ldconfig": "",
            "/usr/local/nvidia/lib64/libcuda.so.1": "",
            "/lib/libcuda.so.1": "",
            "/usr/local/cuda-13.0/bin/nvcc": "",
            "/usr/local/cuda-13.0/bin/ptxas": "",
            "/usr/bin/gcc": "",
            "/usr/include/python3.12/Python.h": "",
        },
        links={"/usr/local/cuda": "cuda-13.0", "/usr/bin/cc": "gcc"},
        dirs=["/usr/local/cuda-13.0/nvvm"],
        environ={"PATH": "/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                 "CUDA_HOME": "/usr/local/cuda", "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:/usr/local/nvidia/lib"},
        commands={"ldconfig": (0, LDCONFIG_H200, ""), "nvcc": (0, NVCC_H200, "")},
        python_include_dir="/usr/include/python3.12",
    )
    kwargs.update(overrides)
    return FakeHost(**kwargs)  # type: ignore[arg-type]


def assert_contract(facts: dict[str, Fact]) -> None:
    assert set(facts) == set(cuda.KEYS)
    for key, fact in facts.items():
        assert fact.ok or (fact.reason and fact.reason.strip()), key


# --------------------------------------------------------------------------- parsing


def test_parse_ldconfig_h200_keeps_loader_order() -> None:
    libs = parse_ldconfig(LDCONFIG_H200, "x86_64")
    assert libs["libcuda.so.1"] == ["/usr/local/nvidia/lib64/libcuda.so.1", "/lib/libcuda.so.1"]
    assert libs["libcudart.so.13"] == ["/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13"]


def test_parse_ldconfig_skips_other_abis() -> None:
    text = ("\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n" + LDCONFIG_WSL2)
    assert parse_ldconfig(text, "x86_64")["libcuda.so.1"] == ["/usr/lib/wsl/lib/libcuda.so.1"]
    assert "libcuda.so.1" not in parse_ldconfig(LDCONFIG_WSL2, "aarch64")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (NVCC_H200, "13.0.88"),
        ("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 11.8, V11.8.89\n", "11.8.89"),
        ("Cuda compilation tools, release 9.2\n", "9.2"),
        ("nvcc: command not found\n", None),
    ],
)
def test_parse_nvcc_version(text: str, expected: str | None) -> None:
    assert parse_nvcc_version(text) == expected


# --------------------------------------------------------------------------- probe_cuda


def test_h200_machine() -> None:
    host = h200_host()
    facts = probe_cuda(host)
    assert_contract(facts)
    assert facts["libcuda_path"].value == "/usr/local/nvidia/lib64/libcuda.so.1"
    assert facts["toolkit_path"].value == "/usr/local/cuda"
    assert facts["nvcc_path"].value == "/usr/local/cuda/bin/nvcc"
    assert facts["nvcc_version"].value == "13.0.88"
    assert facts["ptxas_path"].value == "/usr/local/cuda/bin/ptxas"
    assert facts["cc_path"].value == "/usr/bin/cc"
    assert facts["python_headers"].value == "/usr/include/python3.12/Python.h"
    assert ("/usr/local/cuda/bin/nvcc", "--version") in host.calls


def test_libcuda_from_ldconfig_cache_when_ld_library_path_lacks_it() -> None:
    host = h200_host(environ={"PATH": "/usr/bin"})
    assert probe_cuda(host)["libcuda_path"].value == "/usr/local/nvidia/lib64/libcuda.so.1"


def test_libcuda_stale_cache_entry_falls_through_to_next() -> None:
    host = h200_host(environ={"PATH": "/usr/bin"})
    del host.files["/usr/local/nvidia/lib64/libcuda.so.1"]
    assert probe_cuda(host)["libcuda_path"].value == "/lib/libcuda.so.1"


def test_libcuda_in_wsl_folder_without_cache() -> None:
    host = FakeHost(files={"/usr/lib/wsl/lib/libcuda.so.1": ""})  # no ldconfig at all
    facts = probe_cuda(host)
    assert facts["libcuda_path"].value == "/usr/lib/wsl/lib/libcuda.so.1"


def test_given_cache_is_used_instead_of_running_ldconfig() -> None:
    host = FakeHost(files={"/opt/drv/libcuda.so.1": "", "/sbin/ldconfig": ""}, commands={"ldconfig": (0, "", "")})
    facts = probe_cuda(host, cache=LdCache(libs={"libcuda.so.1": ["/opt/drv/libcuda.so.1"]}))
    assert facts["libcuda_path"].value == "/opt/drv/libcuda.so.1"
    assert not any("ldconfig" in c[0] for c in host.calls)


def test_nvcc_wrapper_outside_a_toolkit_is_not_a_toolkit() -> None:
    # A shell wrapper in /usr/local/bin exec'ing the real nvcc; no /usr/local/cuda.
    host = FakeHost(files={"/usr/local/bin/nvcc": ""}, dirs=["/usr/local/include"],
                    environ={"PATH": "/usr/local/bin:/usr/bin"}, commands={"nvcc": (0, NVCC_H200, "")})
    facts = probe_cuda(host)
    assert facts["nvcc_path"].value == "/usr/local/bin/nvcc"
    assert facts["nvcc_version"].value == "13.0.88"
    assert not facts["toolkit_path"].ok


def test_cuda_home_pointing_nowhere_is_the_reason() -> None:
    host = FakeHost(environ={"CUDA_HOME": "/opt/cuda-12.4", "PATH": "/usr/bin"})
    facts = probe_cuda(host)
    assert_contract(facts)
    assert "CUDA_HOME=/opt/cuda-12.4 is not a folder" in facts["toolkit_path"].reason
    assert facts["nvcc_path"].reason == "nvcc not found on PATH or in the CUDA toolkit"


def test_nvcc_found_in_toolkit_when_not_on_path() -> None:
    host = h200_host(environ={"PATH": "/usr/bin", "CUDA_PATH": "/usr/local/cuda-13.0"})
    facts = probe_cuda(host)
    assert facts["toolkit_path"].value == "/usr/local/cuda-13.0"
    assert facts["nvcc_path"].value == "/usr/local/cuda-13.0/bin/nvcc"
    assert facts["ptxas_path"].value == "/usr/local/cuda-13.0/bin/ptxas"


@pytest.mark.parametrize(
    ("answer", "reason_part"),
    [
        (RunResult(("nvcc", "--version"), None, timed_out=True, error="timed out after 5 s"), "timed out"),
        ((127, "", "/usr/local/cuda/bin/nvcc: error while loading shared libraries: libnvvm.so.4\n"), "libnvvm"),
        ((0, "garbage\n", ""), "release"),
    ],
)
def test_nvcc_failure_keeps_path_and_records_why(answer: object, reason_part: str) -> None:
    host = h200_host()
    host.commands["nvcc"] = answer  # type: ignore[assignment]
    facts = probe_cuda(host)
    assert facts["nvcc_path"].ok
    assert not facts["nvcc_version"].ok
    assert reason_part in facts["nvcc_version"].reason


def test_cc_from_environment_and_missing() -> None:
    host = h200_host()
    host.environ = {**host.environ, "CC": "ccache gcc"}
    host.files["/usr/bin/ccache"] = ""
    assert probe_cuda(host)["cc_path"].value == "/usr/bin/ccache"
    bare = FakeHost(environ={"PATH": "/usr/bin", "CC": "clang-18"})
    fact = probe_cuda(bare)["cc_path"]
    assert not fact.ok and "CC=clang-18" in fact.reason


def test_python_headers_missing() -> None:
    fact = probe_cuda(FakeHost(python_include_dir="/usr/include/python3.11"))["python_headers"]
    assert not fact.ok and "/usr/include/python3.11" in fact.reason


def test_bare_machine_every_key_has_a_reason() -> None:
    facts = probe_cuda(FakeHost())
    assert_contract(facts)
    assert not any(f.ok for f in facts.values())
    assert "libcuda.so.1 not found" in facts["libcuda_path"].reason


def test_real_host_cuda_probe() -> None:
    assert_contract(probe_cuda(default_host()))


# --------------------------------------------------------------------------- env and redaction

SECRETS = {
    "HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "GITHUB_TOKEN": "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "DB_PASSWORD": "hunter2",
    "TORCH_HUB_TOKEN": "s3cr3t-value",
    "NCCL_IB_AUTH_KEY": "abc123",
    "TRITON_SESSION_COOKIE": "sid=deadbeef",
}


@pytest.mark.parametrize(("name", "value"), sorted(SECRETS.items()))
def test_secret_names_are_redacted(name: str, value: str) -> None:
    assert redact(name, value) == REDACTED


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("PIP_INDEX_URL", "https://alice:s3cr3t@pypi.corp.example/simple",
         "https://<redacted>@pypi.corp.example/simple"),
        ("https_proxy", "http://bob:pa55w0rd@proxy.corp.example:3128", "http://<redacted>@proxy.corp.example:3128"),
        ("PIP_EXTRA_INDEX_URL", "https://u:p@a.example/simple https://v:q@b.example/simple",
         "https://<redacted>@a.example/simple https://<redacted>@b.example/simple"),
        ("TRITON_CACHE_URL", "https://oauth2:glpatXYZtoken@gitlab.example/x", "https://<redacted>@gitlab.example/x"),
        ("PIP_INDEX_URL", "https://download.pytorch.org/whl/cu130", "https://download.pytorch.org/whl/cu130"),
        ("CUDA_VISIBLE_DEVICES", "0,1", "0,1"),
        ("PATH", "/opt/desk-environment-toolsandmore/bin:/usr/bin", "/opt/desk-environment-toolsandmore/bin:/usr/bin"),
        ("NVIDIA_REQUIRE_CUDA", "cuda>=13.0 brand=tesla,driver>=535", "cuda>=13.0 brand=tesla,driver>=535"),
    ],
)
def test_url_credentials_redacted_and_plain_values_kept(name: str, value: str, expected: str) -> None:
    assert redact(name, value) == expected


def test_token_shaped_value_under_innocent_name_is_redacted() -> None:
    assert redact("TRITON_CACHE_DIR", "/cache/" + SECRETS["HF_TOKEN"]) == REDACTED
    assert redact("TORCH_EXTRA", "AKIAIOSFODNN7EXAMPLE") == REDACTED


def test_probe_env_keeps_only_relevant_variables_and_leaks_nothing() -> None:
    environ = {
        **SECRETS,
        "CUDA_VISIBLE_DEVICES": "1",
        "LD_LIBRARY_PATH": "/usr/lib/wsl/lib",
        "PATH": "/usr/bin",
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "TORCHINDUCTOR_MAX_AUTOTUNE": "1",
        "NCCL_DEBUG": "INFO",
        "PIP_INDEX_URL": "https://alice:s3cr3t@pypi.corp.example/simple",
        "HOME": "/home/user",
        "NV_CUDA_LIB_VERSION": "13.0.2-1",
        "NVIDIA_VISIBLE_DEVICES": "0",
        "NVIDIA_REQUIRE_CUDA": "cuda>=13.0 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536",
    }
    facts = probe_env(FakeHost(environ=environ))
    variables = facts["variables"].value
    assert variables["CUDA_VISIBLE_DEVICES"] == "1"
    assert variables["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert variables["TORCHINDUCTOR_MAX_AUTOTUNE"] == "1"
    assert variables["NCCL_DEBUG"] == "INFO"
    assert variables["TORCH_HUB_TOKEN"] == REDACTED
    assert variables["NCCL_IB_AUTH_KEY"] == REDACTED
    assert variables["NVIDIA_VISIBLE_DEVICES"] == "0"
    for dropped in ("HF_TOKEN", "WANDB_API_KEY", "HOME", "PIP_INDEX_URL", "NV_CUDA_LIB_VERSION", "NVIDIA_REQUIRE_CUDA"):
        assert dropped not in variables
    dumped = json.dumps(to_dict(facts))
    for secret in [*SECRETS.values(), "s3cr3t"]:
        assert secret not in dumped


def test_real_host_env_probe() -> None:
    variables = probe_env(default_host())["variables"].value
    assert isinstance(variables, dict)
    assert all(envvars.is_relevant(name) for name in variables)


# --------------------------------------------------------------------------- -lcuda for Triton's launcher

WSL_CACHE = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"


def test_libcuda_link_found_beside_the_cached_libcuda() -> None:
    host = FakeHost(files={"/usr/lib/wsl/lib/libcuda.so.1": "", "/usr/lib/wsl/lib/libcuda.so": ""})
    facts = probe_cuda(host, cache=LdCache(libs=parse_ldconfig(WSL_CACHE, "x86_64")))
    assert facts["triton_libcuda_dirs"].value == ["/usr/lib/wsl/lib"]
    assert facts["libcuda_link"].value == "/usr/lib/wsl/lib/libcuda.so"


def test_libcuda_link_missing_names_every_folder_searched() -> None:
    host = FakeHost(files={"/usr/lib/wsl/lib/libcuda.so.1": ""}, environ={"LIBRARY_PATH": "/opt/stubs"})
    facts = probe_cuda(host, cache=LdCache(libs=parse_ldconfig(WSL_CACHE, "x86_64")))
    reason = facts["libcuda_link"].reason
    assert reason.startswith("no libcuda.so in /opt/stubs, /usr/lib/wsl/lib, /usr/local/lib")
    assert reason.endswith(": linking with -lcuda fails")


def test_triton_finds_libcuda_only_through_the_cache_or_ld_library_path() -> None:
    # Present in a standard folder, but neither cached nor on LD_LIBRARY_PATH: Triton asserts.
    host = FakeHost(files={"/usr/lib/wsl/lib/libcuda.so.1": "", "/usr/lib/wsl/lib/libcuda.so": ""})
    facts = probe_cuda(host, cache=LdCache(libs={}))
    assert facts["libcuda_path"].value == "/usr/lib/wsl/lib/libcuda.so.1"
    assert facts["triton_libcuda_dirs"].reason == "no libcuda.so.1 in `ldconfig -p` or LD_LIBRARY_PATH"
    assert "libcuda.so cannot found!" in facts["libcuda_link"].reason
    with_env = FakeHost(files={"/usr/lib/wsl/lib/libcuda.so.1": "", "/usr/lib/wsl/lib/libcuda.so": ""},
                        environ={"LD_LIBRARY_PATH": "/usr/lib/wsl/lib"})
    assert probe_cuda(with_env, cache=LdCache(libs={}))["libcuda_link"].ok
