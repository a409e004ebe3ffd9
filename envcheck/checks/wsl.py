"""WSL2: the GPU reaches Linux through /dev/dxg and the Windows driver's libraries in
/usr/lib/wsl/lib; a Linux NVIDIA driver installed inside the distro shadows them."""

from __future__ import annotations

from envcheck.checks import machine
from envcheck.model import Check, Environment
from envcheck.probes.cuda import WSL_LIB_DIR

WSL_LIB = WSL_LIB_DIR  # the Windows driver's libraries, mounted into every WSL2 distro


def check_version(env: Environment) -> Check:
    title = "WSL version"
    version = env.get("wsl", "wsl_version")
    if version == 1:
        distro = env.get("wsl", "distro_name") or "<distro>"
        return Check("wsl.version", "fail", title, "WSL 1 has no GPU support",
                     fix=f"wsl --set-version {distro} 2 (in Windows PowerShell)")
    return Check("wsl.version", "pass", title, f"WSL {version or 2}, distro {env.get('wsl', 'distro_name') or '?'}")


def check_dxg(env: Environment) -> Check:
    title = "WSL2 GPU device"
    if env.get("wsl", "dxg_present") is True:
        return Check("wsl.dxg", "pass", title, "/dev/dxg present")
    if env.get("wsl", "dxg_present") is None:
        return Check("wsl.dxg", "skip", title, env.fact("wsl", "dxg_present").reason or "unknown")
    return Check(
        "wsl.dxg", "fail", title, "/dev/dxg is missing: the GPU is not passed into WSL2",
        fix="in Windows PowerShell: wsl --update, install the current NVIDIA Windows driver, then wsl --shutdown",
    )


def check_loader_path(env: Environment) -> Check:
    title = "WSL2 driver libraries on the loader path"
    reach = env.get("wsl", "loader_path_has_wsl_lib")
    if reach is True:
        return Check("wsl.loader_path", "pass", title, f"{WSL_LIB} is on the loader path")
    if reach is None:
        return Check("wsl.loader_path", "skip", title, env.fact("wsl", "loader_path_has_wsl_lib").reason or "unknown")
    if env.get("wsl", "lib_dir_present") is False:
        return Check("wsl.loader_path", "fail", title, f"{WSL_LIB} does not exist: the Windows driver is not mapped in",
                     fix="install the NVIDIA driver on Windows, then `wsl --shutdown` from Windows")
    return Check(
        "wsl.loader_path", "fail", title,
        f"neither LD_LIBRARY_PATH nor the ldconfig cache reaches {WSL_LIB}: libcuda.so.1 will not load",
        fix=f"export LD_LIBRARY_PATH={WSL_LIB}:$LD_LIBRARY_PATH (add it to ~/.bashrc), or "
            f"echo {WSL_LIB} | sudo tee /etc/ld.so.conf.d/ld.wsl.conf && sudo ldconfig",
    )


# The Windows driver ships libcuda.so, libcuda.so.1 and libcuda.so.1.1 as three copies,
# so every ldconfig run prints "/sbin/ldconfig.real: /usr/lib/wsl/lib/libcuda.so.1 is not
# a symbolic link" (microsoft/WSL#5548, #5663). CUDA still loads; the noise is the harm.
# /usr/lib/wsl/lib is C:\Windows\System32\lxss\lib mounted read-only, so the lasting fix
# is made on Windows (ArchWSL#248), and a driver update brings the copies back.
WINDOWS_LINK_FIX = (
    "optional, in an administrator cmd on Windows: cd C:\\Windows\\System32\\lxss\\lib && del libcuda.so libcuda.so.1 "
    "&& mklink libcuda.so libcuda.so.1.1 && mklink libcuda.so.1 libcuda.so.1.1, then wsl --shutdown"
)


def check_symlinks(env: Environment) -> Check:
    """Broken libcuda links fail; copies inside /usr/lib/wsl/lib (how several Windows drivers
    ship them) only make ldconfig print "is not a symbolic link" and are a warning."""
    title = "libcuda links"
    links = env.get("wsl", "libcuda_symlinks")
    if not isinstance(links, list):
        return Check("wsl.libcuda_symlinks", "skip", title,
                     env.fact("wsl", "libcuda_symlinks").reason or "unknown")
    bad = [x for x in links if isinstance(x, dict) and not x.get("ok")]
    if not bad:
        return Check("wsl.libcuda_symlinks", "pass", title, f"{len(links)} libcuda link(s), all resolve")
    broken = [x for x in bad if x.get("target") or not str(x.get("path", "")).startswith(WSL_LIB)]
    if broken:
        first = broken[0]
        path, target = first.get("path"), first.get("target")
        what = f"{path} -> {target} (target missing)" if target else f"{path} is a file, not a link to {WSL_LIB}"
        return Check("wsl.libcuda_symlinks", "fail", title, f"{len(broken)} broken libcuda link(s): {what}",
                     fix=" && ".join(f"sudo ln -sf {WSL_LIB}/libcuda.so.1 {x.get('path')}" for x in broken)
                     + " && sudo ldconfig")
    copies = ", ".join(str(x.get("path")) for x in bad)
    return Check(
        "wsl.libcuda_symlinks", "warn", title,
        f"{copies}: copies, not links, in the Windows driver's folder: ldconfig warns 'is not a symbolic link' "
        "(harmless for CUDA)",
        fix=WINDOWS_LINK_FIX,
    )


# A Linux driver (apt's nvidia-driver-*, the `cuda` or `cuda-drivers` meta-packages, or
# NVIDIA's .run installer) puts its own libcuda.so.1 ahead of the WSL one: CUDA then fails
# with "no CUDA-capable device" or driver/library mismatches. Only the toolkit belongs inside.
def check_linux_driver(env: Environment) -> Check:
    title = "No Linux driver inside WSL2"
    evidence = env.get("wsl", "linux_driver_in_wsl")
    if not isinstance(evidence, list):
        return Check("wsl.linux_driver", "skip", title, env.fact("wsl", "linux_driver_in_wsl").reason or "unknown")
    if not evidence:
        return Check("wsl.linux_driver", "pass", title, "the GPU is driven by the Windows driver only")
    more = f" (+{len(evidence) - 1} more)" if len(evidence) > 1 else ""
    return Check(
        "wsl.linux_driver", "fail", title, f"a Linux NVIDIA driver is installed inside WSL2: {evidence[0]}{more}",
        fix="sudo apt purge 'nvidia-driver-*' 'libnvidia-compute-*' && sudo apt autoremove (WSL2 uses the Windows "
            "driver through /usr/lib/wsl/lib; install CUDA inside WSL2 only from the WSL-Ubuntu toolkit repo), "
            "then wsl --shutdown from Windows",
        details="\n".join(str(e) for e in evidence),
    )


def checks(env: Environment) -> list[Check]:
    if not machine.is_wsl(env):
        reason = "not WSL" if env.get("wsl", "is_wsl") is False else (env.fact("wsl", "is_wsl").reason or "unknown")
        return [Check("wsl", "skip", "WSL2 GPU path", f"{reason}: the WSL2 checks do not apply")]
    if env.get("wsl", "wsl_version") == 1:
        return [check_version(env)]
    return [check_version(env), check_dxg(env), check_loader_path(env), check_symlinks(env), check_linux_driver(env)]
