"""PyTorch: the right build for this GPU and driver, and whether it actually runs on the GPU."""

from __future__ import annotations

import posixpath
import re

from envcheck.checks import cuda_versions as cv
from envcheck.checks import machine
from envcheck.checks.env import visible_devices_problem
from envcheck.checks.said import said
from envcheck.model import Check, Environment, Gpu


def _version(env: Environment) -> str:
    return str(env.get("torch", "version") or "torch")


def check_installed(env: Environment) -> Check:
    if env.get("torch", "installed"):
        build = env.get("torch", "build")
        cuda = env.get("torch", "cuda_version")
        shape = ("torch.installed.cuda" if cuda else "torch.installed.build") if build else "torch.installed"
        return said("torch.installed", "pass", shape, version=_version(env), build=build, cuda=cuda,
                    location=env.get("torch", "location"))
    reason = env.fact("torch", "version").reason or "not installed"
    driver_cuda = machine.driver_cuda(env)
    install = cv.install_for_driver(driver_cuda, force=False) if driver_cuda and machine.has_gpu(env) else None
    if install is None:
        return said("torch.installed", "warn", "torch.missing", "cmd", reason=reason, cmd="pip install torch")
    return said("torch.installed", "warn", "torch.missing", "install.fix", reason=reason, **install)


def check_cpu_build(env: Environment) -> Check:
    build = env.get("torch", "build")
    if not env.get("torch", "installed") or build is None:
        return said("torch.cpu_build_with_gpu", "skip", "torch.build_unknown")
    if build != "cpu":
        return said("torch.cpu_build_with_gpu", "pass", "torch.build", version=_version(env), build=build.upper())
    if not machine.has_gpu(env):
        return said("torch.cpu_build_with_gpu", "skip", "torch.cpu_no_gpu", version=_version(env))
    driver_cuda = machine.driver_cuda(env)
    drv = {"driver": env.get("driver", "driver_version"), "cuda": cv.text(driver_cuda)} if driver_cuda else {}
    if driver_cuda is None:
        fix, how = "torch.pick_index.fix", cv.pick_index_by_hand()
    elif (install := cv.install_for_driver(driver_cuda)) is not None:
        fix, how = "install.fix", install
    else:
        fix, how = "install.after_upgrade.fix", {"pip": cv.pip_install(cv.WHEEL_CUDA[-1])}
    return said("torch.cpu_build_with_gpu", "fail", "torch.cpu_with_gpu.driver" if drv else "torch.cpu_with_gpu",
                fix, version=_version(env), count=machine.gpu_count(env), **drv, **how)


def check_driver_compat(env: Environment) -> Check:
    cid = "torch.driver_too_old"
    torch_cuda = cv.parse(env.get("torch", "cuda_version"))
    driver_cuda = machine.driver_cuda(env)
    if env.get("torch", "build") != "cuda" or torch_cuda is None:
        return said(cid, "skip", "torch.not_cuda")
    if driver_cuda is None:
        return said(cid, "skip", "torch.driver_cuda_unknown")
    both = {"driver": env.get("driver", "driver_version"), "driver_cuda": cv.text(driver_cuda),
            "version": _version(env), "cuda": cv.text(torch_cuda)}
    if torch_cuda <= driver_cuda:
        return said(cid, "pass", "torch.driver_ok", **both)
    wheel = cv.wheel_for_driver(driver_cuda)
    if torch_cuda[0] > driver_cuda[0]:  # no compatibility across CUDA majors: is_available() is False
        fix, how = _driver_or_keep(env, torch_cuda, driver_cuda)
        return said(cid, "fail", "torch.driver_too_old", fix, **(both | how))
    # Minor-version compatibility (CUDA 11+): runs, but PTX JIT of newer code and newer APIs fail.
    upgrade = machine.driver_fix_for(env, torch_cuda)
    fix, how = ("driver_or_pip.fix", upgrade | {"pip": cv.pip_install(wheel)}) if wheel else ("driver.fix", upgrade)
    if "driver on your system is too old" in _runtime_text(env):
        # Minor-version compatibility did not carry: torch itself refused this driver.
        return said(cid, "fail", "torch.driver_refused", fix, **(both | how))
    return said(cid, "warn", "torch.driver_minor_compat", fix, **(both | how))


def _driver_or_keep(env: Environment, need: cv.Version, driver_cuda: cv.Version | None) -> tuple[str, dict[str, str]]:
    """Upgrade the driver for CUDA ``need``, or keep it and install the torch build it runs (when one does)."""
    upgrade = machine.driver_fix_for(env, need)
    install = cv.install_for_driver(driver_cuda) if driver_cuda else None
    return ("driver_or_keep.fix", upgrade | install) if install else ("driver.fix", upgrade)


def _runtime_text(env: Environment) -> str:
    return " ".join(str(x) for x in [env.get("torch_runtime", "error") or "",
                                     *(env.get("torch_runtime", "warnings") or [])])


_ARCH = re.compile(r"^(sm|compute)_(\d+?)(\d)([af]?)$")


def arch_support(cc: cv.Version, arch_list: list[str]) -> tuple[str, str | None]:
    """How torch's ``arch_list`` covers a GPU of capability ``cc``: ``sass`` (a binary for it), ``compatible`` (one
    of its major and a lower minor, which runs unchanged), ``ptx`` (JIT-compiled at first use) or ``none``."""
    entries = [(m[1], (int(m[2]), int(m[3])), m[4], e) for e in arch_list if (m := _ARCH.match(e))]
    # sm_90a too: arch-specific code runs on exactly that GPU
    sass = next((e for kind, v, _, e in entries if kind == "sm" and v == cc), None)
    if sass:
        return "sass", sass
    plain = [(kind, v, e) for kind, v, suffix, e in entries if not suffix]
    compat = max(((v, e) for kind, v, e in plain if kind == "sm" and v[0] == cc[0] and v[1] < cc[1]), default=None)
    if compat:
        return "compatible", compat[1]
    ptx = max(((v, e) for kind, v, e in plain if kind == "compute" and v <= cc), default=None)
    return ("ptx", ptx[1]) if ptx else ("none", None)


def check_arch(env: Environment) -> list[Check]:
    arch_list = env.get("torch_runtime", "arch_list")
    if not isinstance(arch_list, list) or not arch_list:
        reason = env.fact("torch_runtime", "arch_list").reason or "empty arch list"
        return [said("torch.arch", "skip", "torch.arch_unknown", reason=reason)]
    if not env.gpus:
        return [said("torch.arch", "skip", "torch.arch_no_gpu")]
    return [_arch(env, gpu, arch_list) for gpu in env.gpus]


def _arch(env: Environment, gpu: Gpu, arch_list: list[str]) -> Check:
    cc, cid = machine.capability(gpu), f"torch.arch.{gpu.index}"
    if cc is None:
        return said(cid, "skip", "torch.cc_unknown", gpu=machine.gpu_label(gpu))
    kind, entry = arch_support(cc, arch_list)
    who = {"gpu": machine.gpu_label(gpu), "sm": f"sm_{cc[0]}{cc[1]}", "entry": entry}
    if kind in ("sass", "compatible"):
        return said(cid, "pass", f"torch.arch_{kind}", **who)
    wheel = cv.wheel_for_arch(cc, machine.driver_cuda(env))
    if wheel:
        fix, how = "cmd", {"cmd": cv.pip_install(wheel)}
    else:
        need = cv.LAST_WHEEL_FOR_OLD_ARCH if cc < (7, 5) else cv.arch_min_cuda(cc)
        fix, how = "driver_then_pip.fix", machine.driver_fix_for(env, need) | {"pip": cv.pip_install(need)}
    if kind == "ptx":
        return said(cid, "warn", "torch.arch_ptx", fix, **who, **how)
    return said(cid, "fail", "torch.arch_none", fix, version=_version(env), listed=" ".join(arch_list), **who, **how)


def shadow(env: Environment) -> tuple[str, str] | None:
    """(where ``import torch`` really loads torch from, the fix) when it is not the installed distribution."""
    installed = env.get("torch", "location")
    static = env.get("torch", "shadowed_by")
    loaded = env.get("torch_runtime", "location")
    moved = isinstance(loaded, str) and installed and posixpath.normpath(loaded) != posixpath.normpath(str(installed))
    where = loaded if moved else static if isinstance(static, str) else None
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
    found = shadow(env)
    if found is None:
        loaded = env.get("torch_runtime", "location")
        if isinstance(loaded, str):
            return said("torch.location", "pass", "torch.loads", where=loaded)
        if not env.get("torch", "installed"):
            return said("torch.location", "skip", "torch.not_installed")
        return said("torch.location", "pass", "torch.not_hidden", location=env.get("torch", "location"))
    where, fix = found
    if env.get("torch", "installed"):
        return said("torch.location", "fail", "torch.shadowed", "cmd", where=where, version=_version(env),
                    location=env.get("torch", "location"), cmd=fix)
    return said("torch.location", "fail", "torch.shadowed.none", "cmd", where=where, cmd=fix)


def _details(env: Environment) -> str | None:
    warnings = env.get("torch_runtime", "warnings")
    warned = "\n".join(str(w) for w in warnings) if isinstance(warnings, list) else ""
    return "\n".join(str(p) for p in (env.get("torch_runtime", "error"), env.get("torch_runtime", "output_tail"),
                                       warned) if p) or None


def _first_line(text: str) -> str:
    return " ".join(text.strip().splitlines()[0].split()) if text.strip() else text


def check_import(env: Environment) -> Check:
    if not env.get("torch", "installed"):
        return said("torch.import", "skip", "torch.not_installed")
    if skipped := machine.not_run("torch.import", env, "torch_runtime"):
        return skipped
    if env.get("torch_runtime", "import_ok"):
        secs = env.get("torch_runtime", "import_s")
        if isinstance(secs, (int, float)):
            return said("torch.import", "pass", "torch.imported.time", seconds=f"{secs:.1f}")
        return said("torch.import", "pass", "torch.imported")
    error = str(env.get("torch_runtime", "error") or "failed")
    shadowed = shadow(env)
    if shadowed is not None:
        where, fix = shadowed
        return said("torch.import", "fail", "torch.import_failed.where", "cmd", _details(env), error=_first_line(error),
                    where=where, cmd=fix)
    fix = next((f"torch.import_{kind}.fix" for said_, kind in (("timed out", "hung"), ("crashed with", "crashed"),
                                                               ("No module named", "incomplete")) if said_ in error),
               "torch.reinstall.fix")
    return said("torch.import", "fail", "torch.import_failed", fix, _details(env), error=_first_line(error))


def check_cuda_available(env: Environment) -> Check:
    cid = "torch.cuda_available"
    if env.get("torch", "build") != "cuda":
        return said(cid, "skip", "torch.not_cuda")
    if skipped := machine.not_run(cid, env, "torch_runtime"):
        return skipped
    avail = env.get("torch_runtime", "cuda_available")
    if avail is None:
        return said(cid, "skip", "torch.available_unknown", reason=env.fact("torch_runtime", "cuda_available").reason)
    if avail:
        return said(cid, "pass", "torch.available", count=env.get("torch_runtime", "device_count"))
    if not machine.has_gpu(env):
        return said(cid, "skip", "torch.unavailable_no_gpu")
    text = _runtime_text(env)
    cvd = machine.variables(env).get("CUDA_VISIBLE_DEVICES")
    count = machine.gpu_count(env)
    if cvd is not None and visible_devices_problem(cvd, count):
        return said(cid, "fail", "torch.unavailable.cvd", "torch.unavailable.cvd.fix", _details(env), count=count,
                    value=repr(cvd))
    if "too old" in text:
        need = cv.parse(env.get("torch", "cuda_version")) or cv.WHEEL_CUDA[-1]
        fix, how = _driver_or_keep(env, need, machine.driver_cuda(env))
        return said(cid, "fail", "torch.unavailable.old_driver", fix, _details(env), count=count, **how)
    if "unknown error" in text:
        return said(cid, "fail", "torch.unavailable.unknown_error", "torch.unavailable.uvm.fix", _details(env),
                    count=count)
    return said(cid, "fail", "torch.unavailable", "torch.unavailable.fix", _details(env), count=count)


def check_smoke(env: Environment) -> Check:
    if skipped := machine.not_run("torch.smoke", env, "torch_runtime"):
        return skipped
    ok = env.get("torch_runtime", "smoke_ok")
    if ok is None:
        return said("torch.smoke", "skip", "not_run", reason=env.fact("torch_runtime", "smoke_ok").reason)
    if ok:
        secs = env.get("torch_runtime", "smoke_s")
        if isinstance(secs, (int, float)):
            return said("torch.smoke", "pass", "torch.smoke.time", ms=f"{secs * 1000:.0f}")
        return said("torch.smoke", "pass", "torch.smoke")
    error = str(env.get("torch_runtime", "error") or "wrong result")
    fix = "torch.smoke_arch.fix" if "no kernel image" in error else "torch.smoke_oom.fix" if "out of memory" in error \
        else "torch.smoke_other.fix"
    return said("torch.smoke", "fail", "torch.smoke_failed", fix, _details(env), error=_first_line(error))


def checks(env: Environment) -> list[Check]:
    return [check_installed(env), check_shadowed(env), check_cpu_build(env), check_driver_compat(env),
            check_import(env), check_cuda_available(env), *check_arch(env), check_smoke(env)]
