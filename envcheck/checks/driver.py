"""The NVIDIA driver: does NVML load, and does it see a GPU.

Policy on machines without a GPU: ``envcheck check`` answers "is this a working GPU
machine?", and its exit status is what scripts test before starting GPU work. A machine
with no usable NVIDIA GPU fails that question, so the first check here is a ``fail`` that
says plainly "no NVIDIA driver" or "no GPU". Everything that needs a GPU then reports
``skip`` (not a cascade of failures), so the one cause is the one red line.
"""

from __future__ import annotations

from envcheck.checks import machine, wsl
from envcheck.model import Check, Environment

TITLE_NVML = "NVIDIA driver (NVML)"
TITLE_GPUS = "NVIDIA GPUs"


def _nvml_process_failure(what: str, env: Environment) -> Check:
    """The child that read NVML crashed or hung: the library itself is broken or the GPU is stuck."""
    hung = what.startswith("hung")
    finding = (f"NVML {what}: envcheck read it in a separate process, which it killed; nvidia-smi and every CUDA "
               "program load the same library")
    if hung:
        fix = ("a GPU stuck in a bad state hangs NVML: sudo dmesg | grep -iE 'nvrm|xid' shows why; reboot"
               if not machine.is_wsl(env) else
               "a GPU stuck in a bad state hangs NVML: `wsl --shutdown` from Windows, then update the NVIDIA driver on "
               "Windows if it happens again")
    elif machine.is_wsl(env):
        fix = ("reinstall the NVIDIA driver on Windows (clean install of the current one: a crashing libnvidia-ml is a "
               "known fault of some drivers under WSL2, microsoft/WSL#11277), then `wsl --shutdown` from Windows")
    else:
        fix = ("reinstall the NVIDIA driver (Ubuntu: sudo apt install --reinstall nvidia-driver-<version>, or the .run "
               "installer again), then reboot; `nvidia-smi` crashes the same way until then")
    return Check("driver.nvml", "fail", TITLE_NVML, finding, fix=fix)


def _wsl_nvml_failure(err: str, env: Environment) -> Check | None:
    """Under WSL2 the cause is usually visible in the wsl facts: say that one, not a generic guess."""
    if wsl.shadows(env):
        return Check("driver.nvml", "fail", TITLE_NVML,
                     f"NVML cannot start: {err} (LD_LIBRARY_PATH loads another driver's libraries: see the WSL2 loader "
                     "check)", fix=wsl.shadow_fix(env))
    if wsl.linux_driver_evidence(env):
        return Check("driver.nvml", "fail", TITLE_NVML,
                     f"NVML cannot start: {err} (a Linux NVIDIA driver inside WSL2 answers instead of the Windows one)",
                     fix=wsl.purge_fix(env))
    low = err.lower()
    if "library not found" in low or "shared library" in low:
        files = env.get("wsl", "lib_dir_files")
        if isinstance(files, list) and "libnvidia-ml.so.1" in files and env.get("wsl", "loader_path_has_wsl_lib") is False:
            return Check("driver.nvml", "fail", TITLE_NVML,
                         f"libnvidia-ml.so.1 is in {wsl.WSL_LIB} but the loader does not search there ({err})",
                         fix=wsl.LOADER_FIX)
        if env.get("wsl", "lib_dir_present") is True:
            return Check("driver.nvml", "fail", TITLE_NVML,
                         f"no libnvidia-ml.so.1 in {wsl.WSL_LIB} ({err}): the Windows driver is too old for WSL2 or "
                         "incompletely installed", fix=wsl.WINDOWS_DRIVER_FIX)
        return None
    if "blocked by the operating system" in low:
        return Check("driver.nvml", "fail", TITLE_NVML,
                     f"NVML cannot start: {err} (the Windows driver refuses WSL2 access to this GPU)",
                     fix="update the NVIDIA driver on Windows and WSL itself (`wsl --update`), then `wsl --shutdown`; a "
                         "GPU in TCC mode or a data-center GPU without WSL support stays blocked")
    return None


def _nvml_failure(err: str, env: Environment) -> Check:
    wsl_ = machine.is_wsl(env)
    if wsl_ and "nvidia-ml-py" not in err.lower():
        found = _wsl_nvml_failure(err, env)
        if found is not None:
            return found
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
        if wsl_:
            return Check(
                "driver.nvml", "fail", TITLE_NVML,
                f"no NVIDIA driver visible in WSL2: libnvidia-ml.so.1 not found ({err})",
                fix=wsl.WINDOWS_DRIVER_FIX,
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
    process = env.get("driver", "nvml_process_error")
    if isinstance(process, str) and (err or env.get("driver", "driver_version") is None):
        return _nvml_process_failure(process, env)
    if err:
        return _nvml_failure(err, env)
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
    process = env.get("driver", "nvml_process_error")
    if count == 0 and isinstance(process, str):
        return Check("driver.gpus", "fail", TITLE_GPUS, f"GPUs not read: the NVML probe process {process}",
                     fix="nvidia-smi (the same library: if it crashes or hangs too, the driver install is at fault); "
                         "`sudo dmesg | grep -iE 'nvrm|xid'`")
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
        if isinstance(env.get("driver", "nvml_process_error"), str) and machine.is_wsl(env):
            fix = ("update the NVIDIA driver on Windows (some drivers' libnvidia-ml crashes under WSL2: "
                   f"microsoft/WSL#11277), then `wsl --shutdown` from Windows; nvidia-smi -q -i {first.index} crashes "
                   "the same way until then")
        elif isinstance(env.get("driver", "nvml_process_error"), str):
            fix = (f"nvidia-smi -q -i {first.index} (the same library: if it crashes or hangs too, the driver install or "
                   "this GPU is at fault); `sudo dmesg | grep -iE 'nvrm|xid'`")
        else:
            fix = (f"nvidia-smi -q -i {first.index}; `sudo dmesg | grep -i xid` (Xid 79: fell off the bus: reboot, "
                   "then reseat or replace it if it recurs)")
        return Check(
            "driver.gpus", "fail", TITLE_GPUS,
            f"{what}; {len(lost)} cannot be queried (GPU {first.index}: {first.lost})",
            fix=fix,
        )
    return Check("driver.gpus", "pass", TITLE_GPUS, what)


def checks(env: Environment) -> list[Check]:
    return [check_nvml(env), check_gpus(env)]
