"""PyTorch: the right build for this GPU and driver, and whether it actually runs on the GPU."""

from __future__ import annotations

import posixpath
import re

from envcheck.checks import cuda_versions as cv
from envcheck.checks import machine
from envcheck.checks.env import visible_devices_problem
from envcheck.model import Check, Environment

# A torch CUDA build runs on an older driver of the same CUDA major (minor-version
# compatibility, CUDA 11+), except for code that needs the newer driver: PTX JIT of code
# built by the newer toolkit fails with "the provided PTX was compiled with an unsupported
# toolchain", and APIs added in the newer minor release return "not supported".
MINOR_COMPAT_CAVEAT = "PTX JIT and newer-driver features fail ('the provided PTX was compiled with an unsupported toolchain')"


def _version(env: Environment) -> str:
    return str(env.get("torch", "version") or "torch")


def check_installed(env: Environment) -> Check:
    title = "PyTorch installed"
    if env.get("torch", "installed"):
        build = env.get("torch", "build")
        cuda = env.get("torch", "cuda_version")
        what = f"{_version(env)} ({build} build{', CUDA ' + cuda if cuda else ''})" if build else _version(env)
        return Check("torch.installed", "pass", title, f"{what} at {env.get('torch', 'location')}")
    reason = env.fact("torch", "version").reason or "not installed"
    driver_cuda = machine.driver_cuda(env)
    fix = (cv.install_for_driver(driver_cuda, force=False) if driver_cuda and machine.has_gpu(env) else None) \
        or "pip install torch"
    return Check("torch.installed", "warn", title, f"{reason}: envcheck run needs it to benchmark",
                 fix=fix)


def check_cpu_build(env: Environment) -> Check:
    title = "PyTorch build matches the hardware"
    build = env.get("torch", "build")
    if not env.get("torch", "installed") or build is None:
        return Check("torch.cpu_build_with_gpu", "skip", title, "PyTorch build unknown")
    if build != "cpu":
        return Check("torch.cpu_build_with_gpu", "pass", title, f"{_version(env)} is a {build.upper()} build")
    if not machine.has_gpu(env):
        return Check("torch.cpu_build_with_gpu", "skip", title,
                     f"{_version(env)} is a CPU-only build, and no NVIDIA GPU is visible")
    driver_cuda = machine.driver_cuda(env)
    drv = f"driver {env.get('driver', 'driver_version')} (CUDA {cv.text(driver_cuda)})" if driver_cuda else "a driver"
    if driver_cuda is None:
        fix = cv.pick_index_by_hand()
    else:
        fix = cv.install_for_driver(driver_cuda) or cv.pip_install(cv.WHEEL_CUDA[-1]) + " (after a driver upgrade)"
    return Check(
        "torch.cpu_build_with_gpu", "fail", title,
        f"{_version(env)} is a CPU-only build on a machine with {machine.gpu_count(env)} NVIDIA GPU(s) and {drv}",
        fix=fix,
    )


def check_driver_compat(env: Environment) -> Check:
    title = "Driver runs torch's CUDA"
    cid = "torch.driver_too_old"
    torch_cuda = cv.parse(env.get("torch", "cuda_version"))
    driver_cuda = machine.driver_cuda(env)
    if env.get("torch", "build") != "cuda" or torch_cuda is None:
        return Check(cid, "skip", title, "not a CUDA build of torch")
    if driver_cuda is None:
        return Check(cid, "skip", title, "driver CUDA version unknown")
    drv = f"driver {env.get('driver', 'driver_version')} runs CUDA up to {cv.text(driver_cuda)}"
    need = f"{_version(env)} is built for CUDA {cv.text(torch_cuda)}"
    if torch_cuda <= driver_cuda:
        return Check(cid, "pass", title, f"{drv}; {need}")
    wheel = cv.wheel_for_driver(driver_cuda)
    if torch_cuda[0] > driver_cuda[0]:
        # No compatibility across CUDA majors: torch.cuda.is_available() is False
        # ("The NVIDIA driver on your system is too old").
        install = cv.install_for_driver(driver_cuda)
        alt = f"; or keep the driver and {install}" if install else ""
        return Check(cid, "fail", title, f"{drv}, but {need}: CUDA does not start (driver too old)",
                     fix=machine.driver_fix_for(env, torch_cuda) + alt)
    alt = f"; or {cv.pip_install(wheel)}" if wheel else ""
    if _runtime_says_too_old(env):
        # Minor-version compatibility did not carry: torch itself refused this driver.
        return Check(cid, "fail", title, f"{drv}, but {need}: torch reports the driver too old and CUDA does not start",
                     fix=machine.driver_fix_for(env, torch_cuda) + alt)
    return Check(
        cid, "warn", title,
        f"{drv}, but {need}: runs by CUDA minor-version compatibility, yet {MINOR_COMPAT_CAVEAT}",
        fix=machine.driver_fix_for(env, torch_cuda) + alt,
    )


def _runtime_text(env: Environment) -> str:
    return " ".join(str(x) for x in [env.get("torch_runtime", "error") or "",
                                     *(env.get("torch_runtime", "warnings") or [])])


def _runtime_says_too_old(env: Environment) -> bool:
    return "driver on your system is too old" in _runtime_text(env)


_ARCH = re.compile(r"^(sm|compute)_(\d+?)(\d)([af]?)$")


def arch_support(cc: cv.Version, arch_list: list[str]) -> tuple[str, str | None]:
    """How torch's ``arch_list`` covers a GPU of capability ``cc``.

    ``("sass", "sm_90")``: a binary for it; ``("compatible", "sm_80")``: a binary of the
    same major and a lower minor, which runs unchanged (sm_80 code on an sm_86 GPU);
    ``("ptx", "compute_90")``: only PTX, JIT-compiled by the driver at first use;
    ``("none", None)``.
    """
    best_compat: tuple[int, str] | None = None
    best_ptx: tuple[int, str] | None = None
    for entry in arch_list:
        m = _ARCH.match(entry)
        if not m:
            continue
        kind, major, minor, suffix = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if kind == "sm" and (major, minor) == cc:
            return "sass", entry  # sm_90a too: arch-specific code runs on exactly that GPU
        if suffix:
            continue
        if kind == "sm" and major == cc[0] and minor < cc[1] and (best_compat is None or minor > best_compat[0]):
            best_compat = (minor, entry)
        if kind == "compute" and (major, minor) <= cc:
            num = major * 10 + minor
            if best_ptx is None or num > best_ptx[0]:
                best_ptx = (num, entry)
    if best_compat:
        return "compatible", best_compat[1]
    if best_ptx:
        return "ptx", best_ptx[1]
    return "none", None


def check_arch(env: Environment) -> list[Check]:
    title = "GPU architecture in torch's build"
    arch_list = env.get("torch_runtime", "arch_list")
    if not isinstance(arch_list, list) or not arch_list:
        reason = env.fact("torch_runtime", "arch_list").reason or "empty arch list"
        return [Check("torch.arch", "skip", title, f"torch's arch list unknown: {reason}")]
    if not env.gpus:
        return [Check("torch.arch", "skip", title, "no GPU to compare with")]
    out = []
    listed = " ".join(arch_list)
    for gpu in env.gpus:
        cc = machine.capability(gpu)
        cid = f"torch.arch.{gpu.index}"
        if cc is None:
            out.append(Check(cid, "skip", title, f"{machine.gpu_label(gpu)}: compute capability unknown"))
            continue
        kind, entry = arch_support(cc, arch_list)
        sm = machine.sm_name(cc)
        who = f"{machine.gpu_label(gpu)} is {sm}"
        if kind == "sass":
            out.append(Check(cid, "pass", title, f"{who}; torch ships {entry} code"))
        elif kind == "compatible":
            out.append(Check(cid, "pass", title, f"{who}; torch's {entry} code runs on it unchanged"))
        else:
            wheel = cv.wheel_for_arch(cc, machine.driver_cuda(env))
            if wheel:
                fix = cv.pip_install(wheel)
            else:
                need = cv.LAST_WHEEL_FOR_OLD_ARCH if cc < (7, 5) else cv.arch_min_cuda(cc)
                fix = f"{machine.driver_fix_for(env, need)}; then {cv.pip_install(need)}"
            if kind == "ptx":
                out.append(Check(cid, "warn", title,
                                 f"{who}; torch has only {entry} PTX for it: the driver JIT-compiles every kernel at "
                                 "first use (minutes of start-up, slower code)", fix=fix))
            else:
                out.append(Check(cid, "fail", title,
                                 f"{who}, not in {_version(env)}'s arch list ({listed}): CUDA kernels cannot run",
                                 fix=fix))
    return out


def shadow(env: Environment) -> tuple[str, str] | None:
    """(where ``import torch`` really loads torch from, the fix) when it is not the installed
    distribution: a ``torch`` package on PYTHONPATH (seen without importing), or the folder the
    isolated import reported."""
    installed = env.get("torch", "location")
    static = env.get("torch", "shadowed_by")
    loaded = env.get("torch_runtime", "location")
    where = None
    if isinstance(loaded, str) and installed and posixpath.normpath(loaded) != posixpath.normpath(str(installed)):
        where = loaded
    elif isinstance(static, str):
        where = static
    if where is None:
        return None
    pythonpath = machine.variables(env).get("PYTHONPATH") or ""
    entries = [e for e in pythonpath.split(":") if e]
    folder = posixpath.dirname(where.rstrip("/"))
    if folder in entries:
        rest = [e for e in entries if e != folder]
        fix = (f"unset PYTHONPATH (or drop {folder} from it: export PYTHONPATH={':'.join(rest)})" if rest
               else "unset PYTHONPATH (and remove the line that sets it from ~/.bashrc)")
    else:
        fix = f"rename or remove {where} (python -c 'import torch; print(torch.__file__)' shows which torch loads)"
    return where, fix


def check_shadowed(env: Environment) -> Check:
    title = "import torch loads the installed torch"
    found = shadow(env)
    if found is None:
        loaded = env.get("torch_runtime", "location")
        if isinstance(loaded, str):
            return Check("torch.location", "pass", title, f"import torch loads {loaded}")
        if not env.get("torch", "installed"):
            return Check("torch.location", "skip", title, "PyTorch is not installed")
        return Check("torch.location", "pass", title, f"nothing on PYTHONPATH hides {env.get('torch', 'location')}")
    where, fix = found
    installed = env.get("torch", "location")
    what = f"the installed {_version(env)} at {installed}" if env.get("torch", "installed") else "no installed torch"
    return Check("torch.location", "fail", title, f"import torch loads {where}, not {what}", fix=fix)


def _details(env: Environment) -> str | None:
    parts = [env.get("torch_runtime", "error"), env.get("torch_runtime", "output_tail")]
    warnings = env.get("torch_runtime", "warnings")
    if isinstance(warnings, list) and warnings:
        parts.append("\n".join(str(w) for w in warnings))
    text = "\n".join(str(p) for p in parts if p)
    return text or None


def _first_line(text: str) -> str:
    return " ".join(text.strip().splitlines()[0].split()) if text.strip() else text


def check_import(env: Environment) -> Check:
    title = "import torch (isolated)"
    if not env.get("torch", "installed"):
        return Check("torch.import", "skip", title, "PyTorch is not installed")
    if not machine.runtime_ran(env, "torch_runtime"):
        return Check("torch.import", "skip", title, machine.not_run_reason(env, "torch_runtime"))
    if env.get("torch_runtime", "import_ok"):
        secs = env.get("torch_runtime", "import_s")
        return Check("torch.import", "pass", title,
                     f"imported in {secs:.1f} s" if isinstance(secs, (int, float)) else "imported")
    error = str(env.get("torch_runtime", "error") or "failed")
    shadowed = shadow(env)
    if shadowed is not None:
        where, fix = shadowed
        return Check("torch.import", "fail", title, f"import torch failed: {_first_line(error)} (it loads {where})",
                     fix=fix, details=_details(env))
    if "timed out" in error:
        fix = ("nvidia-smi (a GPU stuck in a bad state hangs CUDA init: reboot); python -X importtime -c 'import torch' "
               "shows where the import waits")
    elif "crashed with" in error:
        fix = "python -X faulthandler -c 'import torch' (shows where it crashes); " + \
              "pip install --force-reinstall torch (with the --index-url you installed it from)"
    elif "No module named" in error:
        fix = "pip install --force-reinstall torch (the installed files are incomplete)"
    else:
        fix = "pip install --force-reinstall torch (with the --index-url you installed it from)"
    return Check("torch.import", "fail", title, f"import torch failed: {_first_line(error)}", fix=fix,
                 details=_details(env))


def check_cuda_available(env: Environment) -> Check:
    title = "torch sees the GPU"
    cid = "torch.cuda_available"
    if env.get("torch", "build") != "cuda":
        return Check(cid, "skip", title, "not a CUDA build of torch")
    if not machine.runtime_ran(env, "torch_runtime"):
        return Check(cid, "skip", title, machine.not_run_reason(env, "torch_runtime"))
    avail = env.get("torch_runtime", "cuda_available")
    if avail is None:
        return Check(cid, "skip", title, f"unknown: {env.fact('torch_runtime', 'cuda_available').reason}")
    if avail:
        n = env.get("torch_runtime", "device_count")
        return Check(cid, "pass", title, f"torch.cuda.is_available() is True, {n} device(s)")
    if not machine.has_gpu(env):
        return Check(cid, "skip", title, "torch.cuda.is_available() is False, and NVML sees no GPU either")
    text = _runtime_text(env)
    cvd = machine.variables(env).get("CUDA_VISIBLE_DEVICES")
    why = ""
    if cvd is not None and visible_devices_problem(cvd, machine.gpu_count(env)):
        why = f": CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU"
        fix = "unset CUDA_VISIBLE_DEVICES (or list valid indexes or UUIDs from `nvidia-smi -L`)"
    elif "too old" in text:
        why = ": the NVIDIA driver is too old for this torch"
        need = cv.parse(env.get("torch", "cuda_version")) or cv.WHEEL_CUDA[-1]
        driver_cuda = machine.driver_cuda(env)
        install = cv.install_for_driver(driver_cuda) if driver_cuda else None
        fix = machine.driver_fix_for(env, need) + (f"; or keep the driver and {install}" if install else "")
    elif "unknown error" in text:
        why = ": CUDA initialization reported 'CUDA unknown error'"
        fix = ("sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm (the UVM module is often left broken after "
               "suspend/resume), or reboot")
    else:
        fix = "python -c 'import torch; torch.cuda.init()' prints CUDA's own error"
    return Check(cid, "fail", title,
                 f"torch.cuda.is_available() is False on a machine with {machine.gpu_count(env)} NVIDIA GPU(s){why}",
                 fix=fix, details=_details(env))


def check_smoke(env: Environment) -> Check:
    title = "torch GPU op"
    if not machine.runtime_ran(env, "torch_runtime"):
        return Check("torch.smoke", "skip", title, machine.not_run_reason(env, "torch_runtime"))
    ok = env.get("torch_runtime", "smoke_ok")
    if ok is None:
        return Check("torch.smoke", "skip", title, f"not run: {env.fact('torch_runtime', 'smoke_ok').reason}")
    if ok:
        secs = env.get("torch_runtime", "smoke_s")
        took = f" in {secs * 1000:.0f} ms" if isinstance(secs, (int, float)) else ""
        return Check("torch.smoke", "pass", title, f"(2x+1).sum() over 1024 floats on cuda:0 gave 1048576{took}")
    error = str(env.get("torch_runtime", "error") or "wrong result")
    if "no kernel image" in error:
        fix = "install a torch built for this GPU (see the architecture check)"
    elif "out of memory" in error:
        fix = "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv (free the GPU's memory)"
    else:
        fix = "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER; sudo dmesg | grep -i xid (driver errors)"
    return Check("torch.smoke", "fail", title, f"a tiny op on the GPU failed: {_first_line(error)}", fix=fix,
                 details=_details(env))


def checks(env: Environment) -> list[Check]:
    return [check_installed(env), check_shadowed(env), check_cpu_build(env), check_driver_compat(env),
            check_import(env), check_cuda_available(env), *check_arch(env), check_smoke(env)]
