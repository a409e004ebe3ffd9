"""Questions about the probed machine that several checks ask (read from an ``Environment`` only)."""

from __future__ import annotations

from envcheck.checks import cuda_versions
from envcheck.checks.said import said
from envcheck.model import Check, Environment, Gpu, Status


def gpu_count(env: Environment) -> int:
    """GPUs NVML reported (0 when NVML failed or saw none)."""
    n = env.get("driver", "gpu_count")
    return n if isinstance(n, int) else len(env.gpus)


def has_gpu(env: Environment) -> bool:
    return gpu_count(env) > 0 or bool(env.gpus)


def cpu_only(env: Environment) -> bool:
    """No NVIDIA GPU to be seen (none from NVML, no WSL2 GPU device): GPU-only advice does not apply."""
    return not has_gpu(env) and not (is_wsl(env) and env.get("wsl", "dxg_present") is True)


def nvml_error(env: Environment) -> str | None:
    err = env.get("driver", "nvml_error")
    return err if isinstance(err, str) and err else None


def is_wsl(env: Environment) -> bool:
    return env.get("wsl", "is_wsl") is True


def driver_cuda(env: Environment) -> cuda_versions.Version | None:
    return cuda_versions.parse(env.get("driver", "cuda_driver_version"))


def gpu_label(gpu: Gpu) -> str:
    """``GPU 0 (NVIDIA H200)``: how every per-GPU finding names its GPU."""
    name = gpu.get("name")
    return f"GPU {gpu.index} ({name})" if name else f"GPU {gpu.index}"


def gpu_said(rule: str, gpu: Gpu, status: Status, key: str, fix: str | None = None, /, **params: object) -> Check:
    """The check ``gpu.<rule>.<index>`` of ``gpu``, which its finding names first (``gpu=GPU 0 (NVIDIA H200)``)."""
    return said(f"gpu.{rule}.{gpu.index}", status, key, fix, gpu=gpu_label(gpu), **params)


def gpu_skip(rule: str, gpu: Gpu, fact: str) -> Check:
    found = gpu.facts.get(fact)
    return gpu_said(rule, gpu, "skip", "gpu.skip", reason=found.reason if found and found.reason else "not probed")


def unread(check_id: str, env: Environment, section: str, key: str, default: str = "not probed") -> Check:
    return said(check_id, "skip", "reason", reason=env.fact(section, key).reason or default)


def capability(gpu: Gpu) -> cuda_versions.Version | None:
    return cuda_versions.parse(gpu.get("compute_capability"))


def not_run(check_id: str, env: Environment, section: str) -> Check | None:
    """``check_id`` skipped, with the recorded reason, when the runtime probe ``section`` did not run (``envcheck
    probe`` skips them; a snapshot may hold none); None when it ran."""
    why = env.fact(section, "error").reason or ""
    return said(check_id, "skip", "reason", reason=why) if why.startswith("not run") else None


def variables(env: Environment) -> dict[str, str]:
    v = env.get("env", "variables")
    return v if isinstance(v, dict) else {}


def container(env: Environment) -> str | None:
    """``docker``, ``podman``, ``kubernetes`` or ``lxc`` when envcheck runs in a container, else None."""
    found = env.get("system", "container")
    return found if isinstance(found, str) and found not in ("", "none") else None


def driver_fix_for(env: Environment, cuda: cuda_versions.Version) -> dict[str, str]:
    """How to get a driver that runs CUDA ``cuda``, as a fix's parameters: under WSL2 the driver is Windows', in a
    container the host's."""
    need, in_container = cuda_versions.min_driver(cuda), container(env)
    where = "wsl" if is_wsl(env) else "k8s" if in_container == "kubernetes" else "container" if in_container else "host"
    return {"upgrade_key": f"check.driver.upgrade.{where}.need", "need": need} if need else {
        "upgrade_key": f"check.driver.upgrade.{where}"}
