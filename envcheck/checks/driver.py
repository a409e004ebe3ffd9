"""The NVIDIA driver: does NVML load, and does it see a GPU.

Policy on machines without a GPU: ``envcheck check`` answers "is this a working GPU
machine?", and its exit status is what scripts test before starting GPU work. A machine
with no usable NVIDIA GPU fails that question, so the first check here is a ``fail`` that
says plainly "no NVIDIA driver" or "no GPU". Everything that needs a GPU then reports
``skip`` (not a cascade of failures), so the one cause is the one red line.
"""

from __future__ import annotations

from envcheck.checks import machine
from envcheck.model import Check, Environment

TITLE_NVML = "NVIDIA driver (NVML)"
TITLE_GPUS = "NVIDIA GPUs"


def _nvml_failure(err: str, wsl: bool) -> Check:
    low = err.lower()
    if "mismatch" in low:
        return Check(
            "driver.nvml", "fail", TITLE_NVML,
            f"NVML cannot start: {err} (the loaded kernel module and the user-space library differ)",
            fix="reboot (the kernel module and the user-space NVML library are different versions after a driver "
                "upgrade); `cat /proc/driver/nvidia/version` shows the module's version until then",
        )
    if "library not found" in low or "shared library" in low or "not installed" in low:
        if "nvidia-ml-py" in low:
            return Check("driver.nvml", "fail", TITLE_NVML, f"NVML cannot start: {err}", fix="pip install nvidia-ml-py")
        if wsl:
            return Check(
                "driver.nvml", "fail", TITLE_NVML,
                f"no NVIDIA driver visible in WSL2: libnvidia-ml.so.1 not found ({err})",
                fix="install the NVIDIA driver on Windows (it provides /usr/lib/wsl/lib inside WSL2; never install a "
                    "Linux driver inside WSL2), then `wsl --shutdown` from Windows",
            )
        return Check(
            "driver.nvml", "fail", TITLE_NVML,
            f"no NVIDIA driver: libnvidia-ml.so.1 not found ({err})",
            fix="install the NVIDIA driver (Ubuntu: sudo ubuntu-drivers install, then reboot); "
                "`lspci | grep -i nvidia` shows whether this machine has an NVIDIA GPU at all",
        )
    if "driver not loaded" in low:
        return Check(
            "driver.nvml", "fail", TITLE_NVML,
            f"the NVIDIA kernel module is not loaded ({err})",
            fix="sudo modprobe nvidia (if it fails, `sudo dmesg | grep -i nvidia` says why: Secure Boot signing or "
                "a kernel upgrade without the matching module); reboot after a fresh driver install",
        )
    if "insufficient permissions" in low or "no permission" in low:
        return Check(
            "driver.nvml", "fail", TITLE_NVML, f"NVML cannot start: {err}",
            fix="ls -l /dev/nvidia*: your user needs read/write access (in a container: run it with --gpus all)",
        )
    return Check(
        "driver.nvml", "fail", TITLE_NVML, f"NVML cannot start: {err}",
        fix="run `nvidia-smi` for the driver's own message; `sudo dmesg | grep -iE 'nvrm|xid'` shows kernel errors",
    )


def check_nvml(env: Environment) -> Check:
    err = machine.nvml_error(env)
    if err:
        return _nvml_failure(err, machine.is_wsl(env))
    version = env.get("driver", "driver_version")
    if version is None:
        return Check("driver.nvml", "skip", TITLE_NVML,
                     f"driver not probed: {env.fact('driver', 'driver_version').reason}")
    cuda = env.get("driver", "cuda_driver_version")
    cuda_part = f", runs CUDA up to {cuda}" if cuda else ""
    return Check("driver.nvml", "pass", TITLE_NVML, f"driver {version}{cuda_part}")


def check_gpus(env: Environment) -> Check:
    if machine.nvml_error(env):
        return Check("driver.gpus", "skip", TITLE_GPUS, "NVML unavailable: see the driver check")
    count = machine.gpu_count(env)
    if count == 0:
        fact = env.fact("driver", "gpu_count")
        if fact.reason and not fact.reason.startswith("NVML"):
            return Check("driver.gpus", "skip", TITLE_GPUS, f"GPU count unknown: {fact.reason}")
        return Check(
            "driver.gpus", "fail", TITLE_GPUS, "the NVIDIA driver is loaded but sees no GPU",
            fix="`nvidia-smi -L` lists GPUs; in a container run it with --gpus all (NVIDIA Container Toolkit); "
                "`sudo dmesg | grep -iE 'nvrm|xid'` shows a GPU that fell off the bus",
        )
    lost = [g for g in env.gpus if g.lost]
    names = sorted({str(g.get("name")) for g in env.gpus if g.get("name")})
    what = f"{count} GPU{'s' if count != 1 else ''}" + (f": {', '.join(names)}" if names else "")
    if lost:
        first = lost[0]
        return Check(
            "driver.gpus", "fail", TITLE_GPUS,
            f"{what}; {len(lost)} cannot be queried (GPU {first.index}: {first.lost})",
            fix=f"nvidia-smi -q -i {first.index}; `sudo dmesg | grep -i xid` (Xid 79: fell off the bus: reboot, "
                "then reseat or replace it if it recurs)",
        )
    return Check("driver.gpus", "pass", TITLE_GPUS, what)


def checks(env: Environment) -> list[Check]:
    return [check_nvml(env), check_gpus(env)]
