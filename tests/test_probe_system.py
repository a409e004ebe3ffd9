"""Section ``system`` against captured machines (native Ubuntu, containers, arm) and a bare one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fakes import FakeHost

from envcheck.model import Fact
from envcheck.probes.collect import guarded
from envcheck.probes.host import RunResult, default_host, parse_meminfo
from envcheck.probes.system import KEYS, detect_container, parse_os_release, probe_system

FIX = Path(__file__).parent / "fixtures" / "system"


def fixture(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def meminfo_kb(field: str) -> int:
    m = re.search(rf"^{field}:\s+(\d+) kB", fixture("meminfo.native"), re.M)
    assert m
    return int(m.group(1))


def ubuntu_files(**extra: str | OSError) -> dict[str, str | OSError]:
    files: dict[str, str | OSError] = {
        "/etc/os-release": fixture("os-release.ubuntu2404"),
        "/proc/version": fixture("proc_version.ubuntu_native"),
        "/proc/sys/kernel/osrelease": "6.8.0-45-generic\n",
        "/proc/cpuinfo": fixture("cpuinfo.xeon_2cpu"),
        "/proc/meminfo": fixture("meminfo.native"),
        "/proc/1/cgroup": fixture("cgroup.v1_root"),
    }
    files.update(extra)
    return files


def assert_contract(facts: dict[str, Fact]) -> None:
    assert set(facts) == set(KEYS)
    for key, fact in facts.items():
        assert isinstance(fact, Fact), key
        assert fact.ok or (fact.reason and fact.reason.strip()), f"{key} has neither value nor reason"


def test_native_ubuntu() -> None:
    host = FakeHost(files=ubuntu_files(), dirs=["/home/user/project"], machine="x86_64")
    facts = probe_system(host)
    assert_contract(facts)
    assert facts["os_name"].value == "Ubuntu 24.04.3 LTS"
    assert facts["os_id"].value == "ubuntu"
    assert facts["os_version"].value == "24.04"
    assert facts["kernel"].value == "6.8.0-45-generic"
    assert facts["arch"].value == "x86_64"
    assert facts["cpu_model"].value == "Intel(R) Xeon(R) Processor"
    assert facts["cpu_cores_logical"].value == 2
    assert facts["cpu_cores_physical"].value == 2
    assert facts["ram_total_bytes"].value == meminfo_kb("MemTotal") * 1024
    assert facts["ram_available_bytes"].value == meminfo_kb("MemAvailable") * 1024
    assert facts["container"].value == "none"
    assert facts["python_version"].value == "3.11.9"


def test_physical_cores_count_unique_core_ids_not_threads() -> None:
    # Two hyperthreads on one core: logical 2, physical 1.
    text = fixture("cpuinfo.xeon_2cpu").replace("core id\t\t: 1", "core id\t\t: 0")
    facts = probe_system(FakeHost(files=ubuntu_files(**{"/proc/cpuinfo": text})))
    assert facts["cpu_cores_logical"].value == 2
    assert facts["cpu_cores_physical"].value == 1


def test_grace_arm_cpu_named_from_part_number() -> None:
    facts = probe_system(FakeHost(files=ubuntu_files(**{"/proc/cpuinfo": fixture("cpuinfo.grace_excerpt")}),
                                  machine="aarch64"))
    assert facts["cpu_model"].value == "Arm Neoverse-V2"
    assert facts["cpu_cores_logical"].value == 2
    assert not facts["cpu_cores_physical"].ok
    assert "topology" in facts["cpu_cores_physical"].reason
    assert facts["arch"].value == "aarch64"


def test_kernel_falls_back_to_proc_version() -> None:
    files = ubuntu_files()
    del files["/proc/sys/kernel/osrelease"]
    facts = probe_system(FakeHost(files=files))
    assert facts["kernel"].value == "6.8.0-45-generic"
    files["/proc/version"] = fixture("proc_version.h200")
    assert probe_system(FakeHost(files=files))["kernel"].value == "6.18.44-fc-v657-gpu"


def test_os_release_falls_back_to_usr_lib() -> None:
    files = ubuntu_files()
    files["/usr/lib/os-release"] = files.pop("/etc/os-release")
    assert probe_system(FakeHost(files=files))["os_id"].value == "ubuntu"


def test_parse_os_release_debian_quotes() -> None:
    info = parse_os_release(fixture("os-release.debian12"))
    assert info["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"
    assert info["VERSION_ID"] == "12"
    assert info["VERSION_CODENAME"] == "bookworm"


@pytest.mark.parametrize(
    ("files", "environ", "expected"),
    [
        ({"/.dockerenv": ""}, {}, "docker"),
        ({"/proc/1/cgroup": "12:memory:/docker/3f4e2c1ab9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2\n"}, {},
         "docker"),
        ({"/run/.containerenv": ""}, {}, "podman"),
        ({"/.dockerenv": ""}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "kubernetes"),
        ({"/proc/1/cgroup": "11:cpu,cpuacct:/kubepods/besteffort/pod1234/abcd\n"}, {}, "kubernetes"),
        ({"/proc/1/cgroup": "4:memory:/lxc/ubuntu-ct\n"}, {}, "lxc"),
        ({"/run/systemd/container": "podman\n"}, {}, "podman"),
        ({"/run/systemd/container": "systemd-nspawn\n"}, {}, "none"),
        ({"/proc/1/cgroup": PermissionError(13, "Permission denied")}, {}, "none"),
        ({}, {"WSL_DISTRO_NAME": "Ubuntu"}, "none"),
    ],
)
def test_container_detection(files: dict[str, str | OSError], environ: dict[str, str], expected: str) -> None:
    host = FakeHost(files=ubuntu_files(**{"/proc/1/cgroup": fixture("cgroup.v1_root"), **files}), environ=environ)
    assert detect_container(host) == expected
    assert probe_system(host)["container"].value == expected


def test_python_env_kinds() -> None:
    venv = FakeHost(files=ubuntu_files())
    assert probe_system(venv)["python_env"].value == "venv"
    assert probe_system(venv)["python_env_path"].value == "/home/user/project/.venv"

    conda = FakeHost(files=ubuntu_files(), dirs=["/opt/conda/envs/gpu/conda-meta"], python_prefix="/opt/conda/envs/gpu",
                     base_prefix="/opt/conda/envs/gpu", environ={"CONDA_PREFIX": "/opt/conda/envs/gpu"})
    assert probe_system(conda)["python_env"].value == "conda"
    assert probe_system(conda)["python_env_path"].value == "/opt/conda/envs/gpu"

    system = FakeHost(files=ubuntu_files(), python_prefix="/usr", base_prefix="/usr")
    facts = probe_system(system)
    assert facts["python_env"].value == "system"
    assert not facts["python_env_path"].ok


def test_disk_path_is_nearest_existing_parent_of_reports_dir() -> None:
    host = FakeHost(files=ubuntu_files(), dirs=["/home/user/project"], disk_free={"/home/user/project": 123})
    facts = probe_system(host, reports_dir="evidence/2026")
    assert facts["disk_path"].value == "/home/user/project"
    assert facts["disk_free_bytes"].value == 123
    facts = probe_system(FakeHost(files=ubuntu_files(), dirs=["/data/reports"], disk_free={"/data/reports": 7}),
                         reports_dir="/data/reports")
    assert facts["disk_path"].value == "/data/reports"
    assert facts["disk_free_bytes"].value == 7


def test_disk_free_error_is_a_reason() -> None:
    host = FakeHost(files=ubuntu_files(), disk_free={})
    facts = probe_system(host)
    assert not facts["disk_free_bytes"].ok
    assert "cannot stat" in facts["disk_free_bytes"].reason


def test_bare_machine_every_key_has_a_reason() -> None:
    host = FakeHost(cpu_count=None, machine="", python_version="", python_executable="")
    facts = probe_system(host)
    assert_contract(facts)
    for key in ("os_name", "os_id", "os_version", "kernel", "arch", "cpu_model", "cpu_cores_logical",
                "cpu_cores_physical", "ram_total_bytes", "ram_available_bytes", "python_executable"):
        assert not facts[key].ok, key
    assert "os-release" in facts["os_name"].reason
    assert "/proc/meminfo" in facts["ram_total_bytes"].reason


def test_unreadable_proc_files_become_reasons() -> None:
    denied = PermissionError(13, "Permission denied")
    host = FakeHost(files=ubuntu_files(**{"/proc/cpuinfo": denied, "/proc/meminfo": denied}), cpu_count=16)
    facts = probe_system(host)
    assert "Permission denied" in facts["cpu_model"].reason
    assert facts["cpu_cores_logical"].value == 16  # falls back to the host's count
    assert "Permission denied" in facts["ram_total_bytes"].reason


def test_meminfo_without_memavailable() -> None:
    total, available = parse_meminfo("MemTotal:       16384 kB\nMemFree:  1024 kB\n")
    assert (total, available) == (16384 * 1024, None)
    host = FakeHost(files=ubuntu_files(**{"/proc/meminfo": "MemTotal:       16384 kB\nMemFree:  1024 kB\n"}))
    facts = probe_system(host)
    assert facts["ram_total_bytes"].value == 16384 * 1024
    assert "MemAvailable" in facts["ram_available_bytes"].reason


def test_unexpected_failure_is_recorded_not_raised() -> None:
    class Exploding(FakeHost):
        def machine(self) -> str:
            raise RuntimeError("boom")

    facts = guarded("system", lambda: probe_system(Exploding(files=ubuntu_files())))
    assert_contract(facts)
    assert all("RuntimeError: boom" in f.reason for f in facts.values())


def test_fake_run_answers_and_records() -> None:
    host = FakeHost(commands={("ldconfig", "-p"): (0, "x", ""), "nvcc": RunResult(("nvcc",), None, error="not found")})
    assert host.run(["ldconfig", "-p"], timeout=1).stdout == "x"
    assert host.run(["/usr/local/cuda/bin/nvcc", "--version"], timeout=1).error == "not found"
    assert not host.run(["dpkg-query"], timeout=1).ok
    assert host.calls[-1] == ("dpkg-query",)


def test_real_host_run_timeout_kills_and_reports() -> None:
    host = default_host()
    result = host.run(["sleep", "10"], timeout=0.2)
    assert result.timed_out and not result.ok
    assert result.returncode is None
    assert result.wall_s < 5
    missing_binary = host.run(["envcheck-no-such-binary"], timeout=1)
    assert missing_binary.error == "not found" and not missing_binary.ok
    echoed = host.run(["sh", "-c", "printf 'caf\\303\\251 \\377'; exit 3"], timeout=5)
    assert echoed.returncode == 3 and echoed.stdout.startswith("café")
    assert "\ufffd" in echoed.stdout  # undecodable byte replaced, not raised


def test_real_host_system_probe() -> None:
    facts = probe_system(default_host())
    assert_contract(facts)
    assert facts["python_version"].ok
    assert facts["container"].value in ("docker", "podman", "kubernetes", "lxc", "none")


def test_real_host_file_methods(tmp_path: Path) -> None:
    host = default_host()
    (tmp_path / "libcuda.so.1.1").write_text("elf")
    (tmp_path / "libcuda.so.1").symlink_to("libcuda.so.1.1")
    (tmp_path / "libcuda.so").symlink_to("gone")
    assert host.read_text(str(tmp_path / "libcuda.so.1")) == "elf"
    assert host.listdir(str(tmp_path)) == ["libcuda.so", "libcuda.so.1", "libcuda.so.1.1"]
    assert host.glob(str(tmp_path / "libcuda.so.1*")) == [str(tmp_path / "libcuda.so.1"), str(tmp_path / "libcuda.so.1.1")]
    assert host.is_symlink(str(tmp_path / "libcuda.so")) and not host.exists(str(tmp_path / "libcuda.so"))
    assert host.readlink(str(tmp_path / "libcuda.so.1")) == "libcuda.so.1.1"
    assert host.disk_free(str(tmp_path)) > 0
    with pytest.raises(OSError):
        host.read_text(str(tmp_path / "absent"))
    with pytest.raises(OSError):
        host.listdir(str(tmp_path / "absent"))


def test_real_host_run_env_replaces_environment() -> None:
    """``env`` stands for this process's environment, cut to the allow-list like it (harness/env.py)."""
    env = {"TRITON_X": "1", "ENVCHECK_X": "2", "HF_TOKEN": "hf_secret_value_123"}
    result = default_host().run(["/bin/sh", "-c", "echo \"$TRITON_X|$ENVCHECK_X|$HF_TOKEN|$HOME\""], timeout=5, env=env)
    assert result.ok and result.stdout.strip() == "1|||"


def test_fake_links_and_which_follow_path() -> None:
    host = FakeHost(files={"/opt/cuda/bin/nvcc": ""}, links={"/usr/local/cuda": "/opt/cuda"},
                    environ={"PATH": "/usr/local/cuda/bin"})
    assert host.which("nvcc") == "/usr/local/cuda/bin/nvcc"
    assert host.realpath("/usr/local/cuda/bin/nvcc") == "/opt/cuda/bin/nvcc"
    assert host.listdir("/usr/local/cuda/bin") == ["nvcc"]
    assert host.which("ptxas") is None
