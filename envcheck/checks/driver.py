"""The NVIDIA driver: does NVML load, and does it see a GPU. Without a usable GPU the first check here fails and
everything that needs a GPU is ``skip``, so the one cause is the one red line."""

from __future__ import annotations

from envcheck.checks import machine, wsl
from envcheck.checks.said import said
from envcheck.model import Check, Environment


def _wsl_nvml_failure(err: str, env: Environment) -> Check | None:
    """Under WSL2 the cause is usually visible in the wsl facts: say that one, not a generic guess."""
    if wsl.shadows(env):
        return said("driver.nvml", "fail", "nvml.shadowed", "wsl.shadow.fix", err=err, **wsl.shadow_params(env))
    if wsl.linux_driver_evidence(env):
        return said("driver.nvml", "fail", "nvml.linux_driver", "wsl.purge.fix", err=err, **wsl.purge_params(env))
    low = err.lower()
    if "library not found" in low or "shared library" in low:
        files = env.get("wsl", "lib_dir_files")
        if isinstance(files, list) and "libnvidia-ml.so.1" in files and env.get("wsl", "loader_path_has_wsl_lib") is False:
            return said("driver.nvml", "fail", "nvml.not_searched", "wsl.loader.fix", err=err, lib=wsl.WSL_LIB)
        if env.get("wsl", "lib_dir_present") is True:
            return said("driver.nvml", "fail", "nvml.no_wsl_lib", "wsl.windows_driver.fix", err=err, lib=wsl.WSL_LIB)
        return None
    if "blocked by the operating system" in low:
        return said("driver.nvml", "fail", "nvml.blocked", "nvml.blocked.fix", err=err)
    return None


def _nvml_failure(err: str, env: Environment) -> Check:
    wsl_ = machine.is_wsl(env)
    if wsl_ and "nvidia-ml-py" not in err.lower() and (found := _wsl_nvml_failure(err, env)):
        return found
    low = err.lower()
    if "mismatch" in low:
        return said("driver.nvml", "fail", "nvml.mismatch", "nvml.mismatch.fix", err=err)
    if "library not found" in low or "shared library" in low or "not installed" in low:
        if "nvidia-ml-py" in low:
            return said("driver.nvml", "fail", "nvml.cannot_start", "cmd", err=err, cmd="pip install nvidia-ml-py")
        if wsl_:
            return said("driver.nvml", "fail", "nvml.none.wsl", "wsl.windows_driver.fix", err=err, lib=wsl.WSL_LIB)
        return said("driver.nvml", "fail", "nvml.none", "nvml.none.fix", err=err)
    if "driver not loaded" in low:
        return said("driver.nvml", "fail", "nvml.not_loaded", "nvml.not_loaded.fix", err=err)
    if "insufficient permissions" in low or "no permission" in low:
        return said("driver.nvml", "fail", "nvml.cannot_start", "nvml.permissions.fix", err=err)
    return said("driver.nvml", "fail", "nvml.cannot_start", "nvml.other.fix", err=err)


def check_nvml(env: Environment) -> Check:
    err = machine.nvml_error(env)
    process = env.get("driver", "nvml_process_error")
    if isinstance(process, str) and (err or env.get("driver", "driver_version") is None):
        # The child that read NVML crashed or hung: the library itself is broken or the GPU is stuck.
        fix = f"nvml.{'hung' if process.startswith('hung') else 'crashed'}{'.wsl' if machine.is_wsl(env) else ''}.fix"
        return said("driver.nvml", "fail", "nvml.process", fix, what=process)
    if err:
        return _nvml_failure(err, env)
    version = env.get("driver", "driver_version")
    if version is None:
        return said("driver.nvml", "skip", "nvml.not_probed", reason=env.fact("driver", "driver_version").reason)
    cuda = env.get("driver", "cuda_driver_version")
    if cuda:
        return said("driver.nvml", "pass", "nvml.ok.cuda", version=version, cuda=cuda)
    return said("driver.nvml", "pass", "nvml.ok", version=version)


def check_gpus(env: Environment) -> Check:
    if machine.nvml_error(env):
        return said("driver.gpus", "skip", "gpus.no_nvml")
    count = machine.gpu_count(env)
    process = env.get("driver", "nvml_process_error")
    if count == 0 and isinstance(process, str):
        return said("driver.gpus", "fail", "gpus.process", "gpus.process.fix", what=process)
    if count == 0:
        fact = env.fact("driver", "gpu_count")
        if fact.reason and not fact.reason.startswith("NVML"):
            return said("driver.gpus", "skip", "gpus.unknown", reason=fact.reason)
        return said("driver.gpus", "fail", "gpus.none", "gpus.none.fix")
    lost = [g for g in env.gpus if g.lost]
    names = sorted({str(g.get("name")) for g in env.gpus if g.get("name")})
    seen = {"count": count, "names": ", ".join(names)}
    shape = "gpus.named" if names else "gpus.count"
    if lost:
        first = lost[0]
        crashed = isinstance(process, str)
        fix = "gpus.lost.wsl.fix" if crashed and machine.is_wsl(env) else "gpus.lost.process.fix" if crashed \
            else "gpus.lost.fix"
        return said("driver.gpus", "fail", f"{shape}.lost", fix, **seen, lost=len(lost), index=first.index,
                    why=first.lost)
    return said("driver.gpus", "pass", shape, **seen)


def checks(env: Environment) -> list[Check]:
    return [check_nvml(env), check_gpus(env)]
