"""Section ``wsl``: detection, the /usr/lib/wsl/lib bridge, and a Linux driver installed inside WSL2."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeHost

from envcheck.model import Fact
from envcheck.probes.collect import guarded
from envcheck.probes.host import RunResult, default_host
from envcheck.probes.wsl import KEYS, parse_dpkg_installed, probe_wsl, wsl_version

FIX = Path(__file__).parent / "fixtures"
WSL_LIB = "/usr/lib/wsl/lib"
STD = "/usr/lib/x86_64-linux-gnu"


def fixture(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


WSL2_VERSION = fixture("wsl/proc_version.wsl2")
WSL1_VERSION = fixture("wsl/proc_version.wsl1")
NATIVE_VERSION = fixture("system/proc_version.ubuntu_native")
H200_VERSION = fixture("system/proc_version.h200")
WSL_LIB_NAMES = fixture("wsl/usr_lib_wsl_lib.listing").split()
LDCONFIG_WSL2 = fixture("wsl/ldconfig_p_libcuda.wsl2")
# The same cache on a distribution whose /etc/ld.so.conf.d/ld.wsl.conf was removed.
LDCONFIG_NO_WSL = "".join(line + "\n" for line in LDCONFIG_WSL2.splitlines() if WSL_LIB not in line)
DPKG_NO_DRIVER = fixture("system/dpkg_query_no_driver.stdout")


def wsl2_host(*, copies: bool = True, files: dict[str, str] | None = None, links: dict[str, str] | None = None,
              dirs: tuple[str, ...] = ("/dev/dxg", STD), ldconfig: str = LDCONFIG_WSL2,
              dpkg: str = DPKG_NO_DRIVER, environ: dict[str, str] | None = None) -> FakeHost:
    """A WSL2 Ubuntu with the Windows driver's libraries; ``copies``: as the driver ships them."""
    all_files: dict[str, str] = {
        "/proc/version": WSL2_VERSION,
        "/proc/sys/kernel/osrelease": "5.15.153.1-microsoft-standard-WSL2\n",
        "/sbin/ldconfig": "",
        "/usr/bin/dpkg-query": "",
    }
    all_links: dict[str, str] = {}
    for name in WSL_LIB_NAMES:
        if not copies and name in ("libcuda.so", "libcuda.so.1"):
            all_links[f"{WSL_LIB}/{name}"] = "libcuda.so.1.1"
        else:
            all_files[f"{WSL_LIB}/{name}"] = ""
    all_files.update(files or {})
    all_links.update(links or {})
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/wsl/lib",
           "WSL_DISTRO_NAME": "Ubuntu-22.04", "WSL_INTEROP": "/run/WSL/1234_interop"}
    env.update(environ or {})
    return FakeHost(files=all_files, links=all_links, dirs=dirs, environ=env,
                    commands={"ldconfig": (0, ldconfig, ""), "dpkg-query": (1, dpkg, fixture(
                        "system/dpkg_query_no_driver.stderr"))})


def assert_contract(facts: dict[str, Fact]) -> None:
    assert set(facts) == set(KEYS)
    for key, fact in facts.items():
        assert fact.ok or (fact.reason and fact.reason.strip()), key


@pytest.mark.parametrize(
    ("osrelease", "proc_version", "environ", "expected"),
    [
        ("5.15.153.1-microsoft-standard-WSL2", WSL2_VERSION, {}, 2),
        ("4.19.128-microsoft-standard", "Linux version 4.19.128-microsoft-standard (oe-user@oe-host)", {}, 2),
        ("4.4.0-19041-Microsoft", WSL1_VERSION, {}, 1),
        ("6.8.0-45-generic", NATIVE_VERSION, {}, None),
        ("6.18.44-fc-v657-gpu", H200_VERSION, {}, None),
        ("6.6.36-custom", "Linux version 6.6.36-custom (me@box)", {"WSL_INTEROP": "/run/WSL/8_interop"}, 2),
    ],
)
def test_wsl_version(osrelease: str, proc_version: str, environ: dict[str, str], expected: int | None) -> None:
    assert wsl_version(osrelease, proc_version, FakeHost(environ=environ)) == expected


def test_native_linux_every_key_but_is_wsl_is_not_wsl_and_nothing_runs() -> None:
    host = FakeHost(files={"/proc/version": NATIVE_VERSION, "/proc/sys/kernel/osrelease": "6.8.0-45-generic\n",
                           "/sbin/ldconfig": "", "/usr/bin/dpkg-query": ""},
                    commands={"ldconfig": (0, "", ""), "dpkg-query": (0, "", "")})
    facts = probe_wsl(host)
    assert_contract(facts)
    assert facts["is_wsl"].value is False
    assert all(facts[k].reason == "not WSL" for k in KEYS if k != "is_wsl")
    assert host.calls == []


def test_h200_box_is_not_wsl() -> None:
    facts = probe_wsl(FakeHost(files={"/proc/version": H200_VERSION}))
    assert facts["is_wsl"].value is False


def test_wsl1_has_no_gpu_bridge() -> None:
    host = FakeHost(files={"/proc/version": WSL1_VERSION, "/proc/sys/kernel/osrelease": "4.4.0-19041-Microsoft\n"},
                    environ={"WSL_DISTRO_NAME": "Ubuntu"})
    facts = probe_wsl(host)
    assert_contract(facts)
    assert facts["is_wsl"].value is True
    assert facts["wsl_version"].value == 1
    assert facts["distro_name"].value == "Ubuntu"
    assert facts["dxg_present"].value is False
    assert "WSL1" in facts["libcuda_symlinks"].reason
    assert host.calls == []


def test_wsl2_healthy_with_links() -> None:
    host = wsl2_host(copies=False, links={f"{STD}/libcuda.so.1": f"{WSL_LIB}/libcuda.so.1"})
    facts = probe_wsl(host)
    assert_contract(facts)
    assert facts["is_wsl"].value is True
    assert facts["wsl_version"].value == 2
    assert facts["distro_name"].value == "Ubuntu-22.04"
    assert facts["dxg_present"].value is True
    assert facts["lib_dir_present"].value is True
    assert facts["lib_dir_files"].value == ["libcuda.so", "libcuda.so.1", "libcuda.so.1.1", "libcudadebugger.so.1",
                                                "libnvidia-ml.so.1"]
    links = facts["libcuda_symlinks"].value
    assert {link["path"] for link in links} == {f"{WSL_LIB}/libcuda.so", f"{WSL_LIB}/libcuda.so.1",
                                                 f"{STD}/libcuda.so.1"}
    assert all(link["ok"] for link in links)
    assert facts["loader_path_has_wsl_lib"].value is True
    assert facts["linux_driver_in_wsl"].value == []  # dpkg lists libc6 as installed, no driver package


def test_wsl2_stock_copies_are_flagged() -> None:
    facts = probe_wsl(wsl2_host(copies=True))
    links = {link["path"]: link for link in facts["libcuda_symlinks"].value}
    assert set(links) == {f"{WSL_LIB}/libcuda.so", f"{WSL_LIB}/libcuda.so.1"}
    assert all(link["ok"] is False and link["target"] is None for link in links.values())
    # Copies are an ldconfig annoyance, not a Linux driver.
    assert facts["linux_driver_in_wsl"].value == []


def test_wsl2_broken_link_into_unmounted_wsl_lib() -> None:
    # /usr/lib/wsl/lib not mounted (GPU support off in .wslconfig, or an old Windows build).
    host = FakeHost(
        files={"/proc/version": WSL2_VERSION, "/sbin/ldconfig": ""},
        links={f"{STD}/libcuda.so.1": f"{WSL_LIB}/libcuda.so.1", f"{STD}/libcuda.so": "libcuda.so.1"},
        environ={"WSL_DISTRO_NAME": "Ubuntu"},
        commands={"ldconfig": (0, LDCONFIG_NO_WSL, "")},
    )
    facts = probe_wsl(host)
    assert_contract(facts)
    assert facts["dxg_present"].value is False
    assert facts["lib_dir_present"].value is False
    assert not facts["lib_dir_files"].ok
    links = {link["path"]: link for link in facts["libcuda_symlinks"].value}
    assert links[f"{STD}/libcuda.so.1"] == {"path": f"{STD}/libcuda.so.1", "target": f"{WSL_LIB}/libcuda.so.1",
                                           "ok": False}
    assert links[f"{STD}/libcuda.so"]["ok"] is False  # a chain ending in the missing folder
    assert facts["loader_path_has_wsl_lib"].value is False


def test_wsl2_with_linux_driver_installed_inside() -> None:
    dpkg = "nvidia-driver-535\tii \nlibnvidia-compute-535\tii \nlibnvidia-compute-470\trc \n"
    host = wsl2_host(
        files={f"{STD}/libcuda.so.535.183.01": "", f"{STD}/libnvidia-ml.so.535.183.01": ""},
        links={f"{STD}/libcuda.so.1": "libcuda.so.535.183.01", f"{STD}/libcuda.so": "libcuda.so.1",
               f"{STD}/libnvidia-ml.so.1": "libnvidia-ml.so.535.183.01"},
        dirs=("/dev/dxg", STD, "/proc/driver/nvidia"),
        dpkg=dpkg,
    )
    facts = probe_wsl(host)
    evidence = facts["linux_driver_in_wsl"].value
    assert f"{STD}/libcuda.so -> {STD}/libcuda.so.535.183.01 is a Linux driver library (not a link to {WSL_LIB})" \
        in evidence
    assert any(e.startswith(f"{STD}/libnvidia-ml.so.1 -> {STD}/libnvidia-ml.so.535.183.01") for e in evidence)
    assert sum("libcuda.so.535.183.01" in e for e in evidence) == 1  # one real file, reported once
    assert any("/proc/driver/nvidia exists" in e for e in evidence)
    assert any("package nvidia-driver-535 is installed" in e for e in evidence)
    assert any("package libnvidia-compute-535 is installed" in e for e in evidence)
    assert not any("470" in e for e in evidence)  # removed, only its config left ("rc")
    dpkg_call = next(c for c in host.calls if c[0].endswith("dpkg-query"))
    assert "nvidia-driver-*" in dpkg_call and "libnvidia-compute-*" in dpkg_call
    # The Linux library is not a link into the WSL folder, so it is not listed as one.
    assert all(link["path"].startswith(WSL_LIB) for link in facts["libcuda_symlinks"].value)


def test_linux_driver_as_regular_file_and_merged_usr_reported_once() -> None:
    host = wsl2_host(files={f"{STD}/libcuda.so.1": ""}, links={"/lib": "usr/lib"})
    evidence = probe_wsl(host)["linux_driver_in_wsl"].value
    assert evidence == [f"{STD}/libcuda.so.1 is a Linux driver library (not a link to {WSL_LIB})"]


def test_loader_path_from_ld_library_path_or_cache() -> None:
    assert probe_wsl(wsl2_host(ldconfig=LDCONFIG_NO_WSL))["loader_path_has_wsl_lib"].value is False
    fixed = wsl2_host(ldconfig=LDCONFIG_NO_WSL, environ={"LD_LIBRARY_PATH": "/usr/lib/wsl/lib/:/opt/x"})
    assert probe_wsl(fixed)["loader_path_has_wsl_lib"].value is True
    assert probe_wsl(wsl2_host())["loader_path_has_wsl_lib"].value is True


def test_loader_path_unknown_when_ldconfig_fails() -> None:
    host = wsl2_host()
    host.commands["ldconfig"] = RunResult(("/sbin/ldconfig", "-p"), None, timed_out=True, error="timed out after 3 s")
    fact = probe_wsl(host)["loader_path_has_wsl_lib"]
    assert not fact.ok and "timed out" in fact.reason


def test_dpkg_failures_do_not_hide_file_evidence() -> None:
    host = wsl2_host(files={f"{STD}/libcuda.so.1": ""})
    host.commands["dpkg-query"] = RunResult(("dpkg-query",), None, timed_out=True, error="timed out after 5 s")
    assert len(probe_wsl(host)["linux_driver_in_wsl"].value) == 1


def test_no_dpkg_on_non_debian_distribution() -> None:
    host = wsl2_host()
    del host.files["/usr/bin/dpkg-query"]
    assert probe_wsl(host)["linux_driver_in_wsl"].value == []
    assert not any("dpkg-query" in c[0] for c in host.calls)


def test_distro_name_missing_under_sudo() -> None:
    host = wsl2_host()
    host.environ = {"PATH": "/usr/bin:/sbin"}
    fact = probe_wsl(host)["distro_name"]
    assert not fact.ok and "WSL_DISTRO_NAME" in fact.reason


def test_parse_dpkg_installed_real_output() -> None:
    # Real output: libc6* matches installed ("ii") and known-but-absent ("un") packages.
    assert parse_dpkg_installed(DPKG_NO_DRIVER) == ["libc6", "libc6-dbg", "libc6-dev"]
    assert parse_dpkg_installed("nvidia-driver-550\tiU \nnvidia-driver-535\tpn \n") == ["nvidia-driver-550"]


def test_unexpected_failure_is_recorded_not_raised() -> None:
    class Exploding(FakeHost):
        def glob(self, pattern: str) -> list[str]:
            raise RuntimeError("glob broke")

    host = wsl2_host()
    exploding = Exploding(files=host.files, links=host.links, dirs=host.dirs, environ=host.environ,
                          commands=host.commands)
    facts = guarded("wsl", lambda: probe_wsl(exploding))
    assert_contract(facts)
    assert "glob broke" in facts["is_wsl"].reason


def test_real_host_wsl_probe() -> None:
    facts = probe_wsl(default_host())
    assert_contract(facts)
    assert isinstance(facts["is_wsl"].value, bool)


# --------------------------------------------------------------------------- loader shadows, nvidia-smi, packages


def test_ld_library_path_folder_with_a_linux_libnvidia_ml_shadows_the_windows_one() -> None:
    host = wsl2_host(files={f"{STD}/libnvidia-ml.so.525.105.17": ""}, environ={"LD_LIBRARY_PATH": f":{STD}"})
    host.links[f"{STD}/libnvidia-ml.so.1"] = "libnvidia-ml.so.525.105.17"
    facts = probe_wsl(host)
    assert facts["loader_shadows"].value == [
        {"soname": "libnvidia-ml.so.1", "path": f"{STD}/libnvidia-ml.so.1", "folder": STD}]


def test_wsl_lib_first_on_ld_library_path_shadows_nothing() -> None:
    host = wsl2_host(files={f"{STD}/libnvidia-ml.so.1": ""}, environ={"LD_LIBRARY_PATH": f"{WSL_LIB}:{STD}"})
    assert probe_wsl(host)["loader_shadows"].value == []


def test_nvidia_smi_off_path_is_found_in_the_wsl_folder() -> None:
    on = probe_wsl(wsl2_host())
    assert on["nvidia_smi_path"].value == f"{WSL_LIB}/nvidia-smi" and on["nvidia_smi_on_path"].value is True
    off = probe_wsl(wsl2_host(environ={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}))
    assert off["nvidia_smi_path"].value == f"{WSL_LIB}/nvidia-smi" and off["nvidia_smi_on_path"].value is False


def test_installed_linux_driver_packages_are_named() -> None:
    dpkg = "libnvidia-compute-510\tii \nnvidia-utils-510\tii \nnvidia-driver-535\tun \n"
    facts = probe_wsl(wsl2_host(dpkg=dpkg))
    assert facts["linux_driver_packages"].value == ["libnvidia-compute-510", "nvidia-utils-510"]
    assert any("nvidia-utils-510" in e for e in facts["linux_driver_in_wsl"].value)
