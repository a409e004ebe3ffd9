"""WSL2: the GPU reaches Linux through /dev/dxg and the Windows driver's libraries in
/usr/lib/wsl/lib; a Linux NVIDIA driver installed inside the distro, or an LD_LIBRARY_PATH that
puts other driver libraries first, shadows them; nvidia-smi lives in that folder too."""

from __future__ import annotations

from envcheck.checks import machine
from envcheck.model import Check, Environment
from envcheck.probes.cuda import WSL_LIB_DIR

WSL_LIB = WSL_LIB_DIR  # the Windows driver's libraries, mounted into every WSL2 distro

# Makes the loader search the Windows driver's folder, as the ld.wsl.conf WSL writes does.
LOADER_FIX = (f"echo {WSL_LIB} | sudo tee /etc/ld.so.conf.d/ld.wsl.conf && sudo ldconfig "
              f"(or export LD_LIBRARY_PATH={WSL_LIB}:$LD_LIBRARY_PATH in ~/.bashrc)")
WINDOWS_DRIVER_FIX = ("install the current NVIDIA driver on Windows (it provides /usr/lib/wsl/lib inside WSL2; never "
                      "install a Linux driver inside WSL2), then `wsl --update` and `wsl --shutdown` from Windows")


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


def shadows(env: Environment) -> list[dict[str, str]]:
    """Driver libraries LD_LIBRARY_PATH makes the loader take before the Windows driver's."""
    found = env.get("wsl", "loader_shadows")
    return [x for x in found if isinstance(x, dict)] if isinstance(found, list) else []


def shadow_fix(env: Environment) -> str:
    folders = list(dict.fromkeys(str(x.get("folder")) for x in shadows(env)))
    return (f"take {', '.join(folders)} out of LD_LIBRARY_PATH (where ~/.bashrc sets it), or put {WSL_LIB} first: "
            f"export LD_LIBRARY_PATH={WSL_LIB}:$LD_LIBRARY_PATH")


def check_loader_path(env: Environment) -> Check:
    title = "WSL2 driver libraries on the loader path"
    found = shadows(env)
    if found:
        first = found[0]
        what = "; ".join(f"{x.get('soname')} from {x.get('path')}" for x in found)
        return Check(
            "wsl.loader_path", "fail", title,
            f"LD_LIBRARY_PATH puts {first.get('folder')} ahead of {WSL_LIB}: the loader takes {what}, not the "
            "Windows driver's (NVML and CUDA fail to reach the GPU)",
            fix=shadow_fix(env))
    reach = env.get("wsl", "loader_path_has_wsl_lib")
    if reach is True:
        return Check("wsl.loader_path", "pass", title, f"{WSL_LIB} is on the loader path")
    if reach is None:
        return Check("wsl.loader_path", "skip", title, env.fact("wsl", "loader_path_has_wsl_lib").reason or "unknown")
    if env.get("wsl", "lib_dir_present") is False:
        return Check("wsl.loader_path", "fail", title, f"{WSL_LIB} does not exist: the Windows driver is not mapped in",
                     fix=WINDOWS_DRIVER_FIX)
    return Check(
        "wsl.loader_path", "fail", title,
        f"neither LD_LIBRARY_PATH nor the ldconfig cache reaches {WSL_LIB}: libcuda.so.1 and libnvidia-ml.so.1 will "
        "not load",
        fix=LOADER_FIX,
    )


# The Windows driver ships libcuda.so, libcuda.so.1 and libcuda.so.1.1 as three copies, so every
# ldconfig run prints "/sbin/ldconfig.real: /usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link"
# (microsoft/WSL#5548, #5663). CUDA still loads; the noise is the harm. Replacing the two copies by
# links inside WSL is what NVIDIA's forum and #5663 give; a Windows driver update brings the copies
# back, and the lasting fix is made in C:\Windows\System32\lxss\lib (yuk7/ArchWSL#248).
SYMLINK_FIX = (f"cd {WSL_LIB} && sudo ln -sf libcuda.so.1.1 libcuda.so.1 && sudo ln -sf libcuda.so.1.1 libcuda.so "
               "&& sudo ldconfig (repeat after each Windows driver update)")


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
        f"{copies}: copies, not links, in the Windows driver's folder: ldconfig warns '{WSL_LIB}/libcuda.so.1 is not a "
        "symbolic link' (harmless for CUDA)",
        fix=SYMLINK_FIX,
    )


def linux_driver_packages(env: Environment) -> list[str]:
    found = env.get("wsl", "linux_driver_packages")
    return [str(p) for p in found] if isinstance(found, list) else []


def purge_fix(env: Environment) -> str:
    """The exact purge for the Linux driver packages found, or the patterns when none was named."""
    names = linux_driver_packages(env) or ["'nvidia-driver-*'", "'libnvidia-compute-*'", "'nvidia-utils-*'"]
    return (f"sudo apt purge {' '.join(names)} && sudo apt autoremove (WSL2 uses the Windows driver through "
            f"{WSL_LIB}; install CUDA inside WSL2 only from the WSL-Ubuntu toolkit repo), then wsl --shutdown "
            "from Windows")


def linux_driver_evidence(env: Environment) -> list[str]:
    evidence = env.get("wsl", "linux_driver_in_wsl")
    return [str(e) for e in evidence] if isinstance(evidence, list) else []


# A Linux driver (apt's nvidia-driver-*, nvidia-utils-*, the `cuda` or `cuda-drivers` meta-packages,
# or NVIDIA's .run installer) puts its own libcuda.so.1 and libnvidia-ml.so.1 ahead of the WSL ones:
# nvidia-smi then says "GPU access blocked by the operating system" (microsoft/WSL#9166) and CUDA
# "no CUDA-capable device". Only the toolkit belongs inside.
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
        fix=purge_fix(env),
        details="\n".join(str(e) for e in evidence),
    )


NVIDIA_SMI_PATH_FIX = (f"echo 'export PATH=\"$PATH:{WSL_LIB}\"' >> ~/.bashrc (SSH and login shells do not get the "
                       f"PATH WSL sets up); with sudo, run sudo {WSL_LIB}/nvidia-smi")


def check_nvidia_smi(env: Environment) -> Check:
    title = "nvidia-smi on PATH"
    path = env.get("wsl", "nvidia_smi_path")
    on_path = env.get("wsl", "nvidia_smi_on_path")
    if on_path is True:
        return Check("wsl.nvidia_smi", "pass", title, f"{path}")
    if path:
        return Check("wsl.nvidia_smi", "warn", title,
                     f"nvidia-smi is at {path} but not on this session's PATH: `nvidia-smi` says 'command not found'",
                     fix=NVIDIA_SMI_PATH_FIX)
    reason = env.fact("wsl", "nvidia_smi_path").reason or "not found"
    if env.get("wsl", "lib_dir_present") is False:
        return Check("wsl.nvidia_smi", "skip", title, f"{reason} (the Windows driver is not mapped in: see above)")
    return Check("wsl.nvidia_smi", "warn", title, f"{reason}: the Windows driver is older than the ones that ship it",
                 fix="update the NVIDIA driver on Windows, then `wsl --shutdown` from Windows")


def checks(env: Environment) -> list[Check]:
    if not machine.is_wsl(env):
        reason = "not WSL" if env.get("wsl", "is_wsl") is False else (env.fact("wsl", "is_wsl").reason or "unknown")
        return [Check("wsl", "skip", "WSL2 GPU path", f"{reason}: the WSL2 checks do not apply")]
    if env.get("wsl", "wsl_version") == 1:
        return [check_version(env)]
    return [check_version(env), check_dxg(env), check_loader_path(env), check_symlinks(env), check_linux_driver(env),
            check_nvidia_smi(env)]
