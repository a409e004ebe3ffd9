"""WSL2: the GPU reaches Linux through /dev/dxg and the Windows driver's libraries in /usr/lib/wsl/lib; a Linux
driver inside the distro, or an LD_LIBRARY_PATH that puts other driver libraries first, shadows them."""

from __future__ import annotations

from envcheck.checks import machine
from envcheck.checks.said import said
from envcheck.model import Check, Environment
from envcheck.probes.cuda import WSL_LIB_DIR as WSL_LIB  # the Windows driver's, mounted into every WSL2 distro


def check_version(env: Environment) -> Check:
    version = env.get("wsl", "wsl_version")
    if version == 1:
        distro = env.get("wsl", "distro_name") or "<distro>"
        return said("wsl.version", "fail", "wsl.v1", "wsl.v1.fix", distro=distro)
    return said("wsl.version", "pass", "wsl.version", version=version or 2, distro=env.get("wsl", "distro_name") or "?")


def check_dxg(env: Environment) -> Check:
    if env.get("wsl", "dxg_present") is True:
        return said("wsl.dxg", "pass", "wsl.dxg")
    if env.get("wsl", "dxg_present") is None:
        return machine.unread("wsl.dxg", env, "wsl", "dxg_present", "unknown")
    return said("wsl.dxg", "fail", "wsl.dxg.missing", "wsl.dxg.missing.fix")


def shadows(env: Environment) -> list[dict[str, str]]:
    """Driver libraries LD_LIBRARY_PATH makes the loader take before the Windows driver's."""
    found = env.get("wsl", "loader_shadows")
    return [x for x in found if isinstance(x, dict)] if isinstance(found, list) else []


def shadow_params(env: Environment) -> dict[str, str]:
    """The parameters of the fix "wsl.shadow.fix": the folders to take out of LD_LIBRARY_PATH."""
    folders = list(dict.fromkeys(str(x.get("folder")) for x in shadows(env)))
    return {"folders": ", ".join(folders), "lib": WSL_LIB}


def check_loader_path(env: Environment) -> Check:
    found = shadows(env)
    if found:
        first = found[0]
        # The loader's own words (soname, path) joined: machine text, the same in every language.
        what = "; ".join(f"{x.get('soname')} <- {x.get('path')}" for x in found)
        return said("wsl.loader_path", "fail", "wsl.shadowed", "wsl.shadow.fix", first=first.get("folder"), what=what,
                    **shadow_params(env))
    reach = env.get("wsl", "loader_path_has_wsl_lib")
    if reach is True:
        return said("wsl.loader_path", "pass", "wsl.on_path", lib=WSL_LIB)
    if reach is None:
        return machine.unread("wsl.loader_path", env, "wsl", "loader_path_has_wsl_lib", "unknown")
    if env.get("wsl", "lib_dir_present") is False:
        return said("wsl.loader_path", "fail", "wsl.no_lib_dir", "wsl.windows_driver.fix", lib=WSL_LIB)
    return said("wsl.loader_path", "fail", "wsl.not_reached", "wsl.loader.fix", lib=WSL_LIB)


def check_symlinks(env: Environment) -> Check:
    """Broken libcuda links fail; copies in /usr/lib/wsl/lib (how several Windows drivers ship them: CUDA still
    loads, ldconfig prints "is not a symbolic link", microsoft/WSL#5663) are a warning."""
    links = env.get("wsl", "libcuda_symlinks")
    if not isinstance(links, list):
        return machine.unread("wsl.libcuda_symlinks", env, "wsl", "libcuda_symlinks", "unknown")
    bad = [x for x in links if isinstance(x, dict) and not x.get("ok")]
    if not bad:
        return said("wsl.libcuda_symlinks", "pass", "wsl.links_ok", count=len(links))
    broken = [x for x in bad if x.get("target") or not str(x.get("path", "")).startswith(WSL_LIB)]
    if broken:
        first = broken[0]
        path, target = first.get("path"), first.get("target")
        cmd = " && ".join(f"sudo ln -sf {WSL_LIB}/libcuda.so.1 {x.get('path')}" for x in broken) + " && sudo ldconfig"
        shape = "wsl.link_missing_target" if target else "wsl.link_is_file"
        return said("wsl.libcuda_symlinks", "fail", shape, "cmd", count=len(broken), path=path, target=target,
                    lib=WSL_LIB, cmd=cmd)
    copies = ", ".join(str(x.get("path")) for x in bad)
    return said("wsl.libcuda_symlinks", "warn", "wsl.link_copies", "wsl.link_copies.fix", copies=copies, lib=WSL_LIB)


def _strings(env: Environment, key: str) -> list[str]:
    found = env.get("wsl", key)
    return [str(x) for x in found] if isinstance(found, list) else []


def purge_params(env: Environment) -> dict[str, str]:
    """The fix "wsl.purge.fix"'s parameters: the Linux driver packages found, else the patterns."""
    names = _strings(env, "linux_driver_packages") or ["'nvidia-driver-*'", "'libnvidia-compute-*'", "'nvidia-utils-*'"]
    return {"packages": " ".join(names), "lib": WSL_LIB}


def linux_driver_evidence(env: Environment) -> list[str]:
    return _strings(env, "linux_driver_in_wsl")


def check_linux_driver(env: Environment) -> Check:
    """A Linux driver inside WSL2 puts its libraries ahead of the Windows driver's: nvidia-smi then says "GPU access
    blocked by the operating system" (microsoft/WSL#9166). Only the toolkit belongs inside."""
    evidence = env.get("wsl", "linux_driver_in_wsl")
    if not isinstance(evidence, list):
        return machine.unread("wsl.linux_driver", env, "wsl", "linux_driver_in_wsl", "unknown")
    if not evidence:
        return said("wsl.linux_driver", "pass", "wsl.windows_only")
    return said("wsl.linux_driver", "fail", "wsl.linux_driver.more" if len(evidence) > 1 else "wsl.linux_driver",
                "wsl.purge.fix", "\n".join(str(e) for e in evidence), first=evidence[0], more=len(evidence) - 1,
                **purge_params(env))


def check_nvidia_smi(env: Environment) -> Check:
    path = env.get("wsl", "nvidia_smi_path")
    on_path = env.get("wsl", "nvidia_smi_on_path")
    if on_path is True:
        return said("wsl.nvidia_smi", "pass", "path", path=path)
    if path:
        return said("wsl.nvidia_smi", "warn", "wsl.smi_off_path", "wsl.smi_off_path.fix", path=path, lib=WSL_LIB)
    reason = env.fact("wsl", "nvidia_smi_path").reason or "not found"
    if env.get("wsl", "lib_dir_present") is False:
        return said("wsl.nvidia_smi", "skip", "wsl.smi_unmapped", reason=reason)
    return said("wsl.nvidia_smi", "warn", "wsl.smi_old_driver", "wsl.smi_old_driver.fix", reason=reason)


def checks(env: Environment) -> list[Check]:
    if not machine.is_wsl(env):
        if env.get("wsl", "is_wsl") is False:
            return [said("wsl", "skip", "wsl.not_wsl")]
        return [said("wsl", "skip", "wsl.unknown", reason=env.fact("wsl", "is_wsl").reason or "unknown")]
    if env.get("wsl", "wsl_version") == 1:
        return [check_version(env)]
    return [check_version(env), check_dxg(env), check_loader_path(env), check_symlinks(env), check_linux_driver(env),
            check_nvidia_smi(env)]
