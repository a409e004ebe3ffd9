"""Triton: what its JIT needs at first use (C compiler, Python headers, libcuda, a ptxas that
knows the GPU) and whether a kernel really compiles and runs."""

from __future__ import annotations

import posixpath

from envcheck.checks import cuda_versions as cv
from envcheck.checks import machine
from envcheck.checks.said import said
from envcheck.model import Check, Environment, Gpu
from envcheck.probes.cuda import WSL_LIB_DIR

MIN_CC = (7, 0)  # Triton 3.x generates code for Volta and newer only


Fix = tuple[str, dict[str, str]]  # a fix's key (under check.) and its parameters


def _installed(env: Environment) -> bool:
    return env.get("triton", "installed") is True


def _skip(cid: str) -> Check:
    return said(cid, "skip", "triton.not_installed")


def check_installed(env: Environment) -> Check:
    if _installed(env):
        return said("triton.installed", "pass", "triton.installed", version=env.get("triton", "version"),
                    location=env.get("triton", "location"))
    if machine.cpu_only(env):
        # Triton's kernels need an NVIDIA GPU: on a CPU-only machine its absence is no problem to fix.
        return said("triton.installed", "skip", "triton.not_installed.no_gpu")
    pin = env.get("torch", "triton_pin")
    if pin:
        return said("triton.installed", "warn", "triton.missing", "triton.install_pin.fix", pin=pin,
                    torch=env.get("torch", "version"))
    return said("triton.installed", "warn", "triton.missing", "cmd", cmd="pip install triton")


def check_pin(env: Environment) -> Check:
    pin = env.get("torch", "triton_pin")
    version = env.get("triton", "version")
    if not _installed(env):
        return _skip("triton.version_pin")
    if not pin or not version:
        return said("triton.version_pin", "skip", "triton.no_pin")
    if str(pin).split("+")[0] == str(version).split("+")[0]:  # a local tag (+git...) is no other version
        return said("triton.version_pin", "pass", "triton.pinned", version=version)
    return said("triton.version_pin", "warn", "triton.pin_differs", "cmd", torch=env.get("torch", "version"), pin=pin,
                version=version, cmd=f"pip install triton=={pin}")


def _found(env: Environment, cid: str, key: str, shape: str) -> Check | None:
    """The check of a file Triton's JIT needs (``cuda.<key>``) when it is found or not needed; None: missing."""
    if not _installed(env):
        return _skip(cid)
    path = env.get("cuda", key)
    if path:
        return said(cid, "pass", shape, path=path)
    return None if machine.has_gpu(env) else said(cid, "skip", "triton.no_gpu")


def check_compiler(env: Environment) -> Check:
    return _found(env, "triton.c_compiler", "cc_path", "triton.cc") or said(
        "triton.c_compiler", "fail", "triton.no_cc", "triton.cc.fix", reason=env.fact("cuda", "cc_path").reason)


def check_headers(env: Environment) -> Check:
    if found := _found(env, "triton.python_headers", "python_headers", "path"):
        return found
    version = str(env.get("system", "python_version") or "")
    fix, params = headers_fix(env)
    return said("triton.python_headers", "fail", "triton.no_headers", fix, version=version or "?",
                reason=env.fact("cuda", "python_headers").reason, **params)


def headers_fix(env: Environment) -> Fix:
    version = str(env.get("system", "python_version") or "")
    mm = ".".join(version.split(".")[:2]) or "3"
    return f"triton.headers_{'conda' if env.get('system', 'python_env') == 'conda' else 'apt'}.fix", {"mm": mm}


def libcuda_fix(env: Environment) -> Fix:
    """Make Triton find libcuda.so.1 (it asks `ldconfig -p`, then LD_LIBRARY_PATH)."""
    if machine.is_wsl(env):
        return "wsl.loader.fix", {"lib": WSL_LIB_DIR}
    path = env.get("cuda", "libcuda_path")
    folder = posixpath.dirname(str(path)) if path else "<folder holding libcuda.so.1>"
    return "triton.libcuda.fix", {"folder": folder}


def link_fix(env: Environment) -> Fix:
    """Give the linker the libcuda.so that ``-lcuda`` needs, beside the libcuda.so.1 Triton found."""
    dirs = env.get("cuda", "triton_libcuda_dirs")
    folder = str(dirs[0]) if isinstance(dirs, list) and dirs else posixpath.dirname(str(env.get("cuda", "libcuda_path")))
    if machine.is_wsl(env) and folder == WSL_LIB_DIR:
        files = env.get("wsl", "lib_dir_files")
        real = "libcuda.so.1.1" if isinstance(files, list) and "libcuda.so.1.1" in files else "libcuda.so.1"
        return "cmd", {"cmd": f"cd {WSL_LIB_DIR} && sudo ln -sf {real} libcuda.so && sudo ldconfig"}
    return "cmd", {"cmd": f"sudo ln -s libcuda.so.1 {folder}/libcuda.so && sudo ldconfig"}


def check_libcuda(env: Environment) -> Check:
    """What Triton's launcher build needs: libcuda.so.1 found as Triton looks for it, and libcuda.so for ``-lcuda``."""
    cid = "triton.libcuda"
    if not _installed(env):
        return _skip(cid)
    path = env.get("cuda", "libcuda_path")
    if not path and not machine.has_gpu(env):
        return said(cid, "skip", "triton.libcuda_no_gpu")
    if not path:
        fix, params = libcuda_fix(env)
        return said(cid, "fail", "triton.libcuda_missing", fix, reason=env.fact("cuda", "libcuda_path").reason, **params)
    cuda = env.sections.get("cuda", {})
    if "triton_libcuda_dirs" not in cuda or "libcuda_link" not in cuda:
        # A report from before envcheck looked at Triton's own search: libcuda.so.1 is what it knows.
        return said(cid, "pass", "triton.libcuda_found", path=path)
    if env.get("cuda", "triton_libcuda_dirs") is None:
        fix, params = libcuda_fix(env)
        return said(cid, "fail", "triton.libcuda_unsearched", fix, path=path,
                    reason=env.fact("cuda", "triton_libcuda_dirs").reason, **params)
    link = env.get("cuda", "libcuda_link")
    if not link:
        fix, params = link_fix(env)
        return said(cid, "fail", "triton.libcuda_no_link", fix, path=path, reason=env.fact("cuda", "libcuda_link").reason,
                    **params)
    return said(cid, "pass", "triton.libcuda_ok", path=path, link=link)


def check_gpu_support(env: Environment) -> list[Check]:
    """Per GPU: compute capability Triton supports, and a ptxas that can target it."""
    if not _installed(env):
        return [_skip("triton.gpu")]
    if not env.gpus:
        return [said("triton.gpu", "skip", "triton.gpu_none")]
    return [_gpu_support(env, gpu) for gpu in env.gpus]


def _gpu_support(env: Environment, gpu: Gpu) -> Check:
    cid, label, cc = f"triton.gpu.{gpu.index}", machine.gpu_label(gpu), machine.capability(gpu)
    if cc is None:
        return said(cid, "skip", "torch.cc_unknown", gpu=label)
    sm = cc[0] * 10 + cc[1]
    if cc < MIN_CC:
        return said(cid, "fail", "triton.too_old_gpu", "triton.too_old_gpu.fix", gpu=label, cc=cv.text(cc),
                    version=env.get("triton", "version"))
    # Triton (3.3+) has a ptxas of its own for sm_100 and newer.
    blackwell = sm >= 100 and env.get("triton", "ptxas_blackwell_max_sm") is not None
    key, var = ("ptxas_blackwell", "TRITON_PTXAS_BLACKWELL_PATH") if blackwell else ("ptxas", "TRITON_PTXAS_PATH")
    max_sm, version = env.get("triton", f"{key}_max_sm"), env.get("triton", f"{key}_version")
    if not isinstance(max_sm, int):
        return said(cid, "skip", "triton.ptxas_unknown", gpu=label)
    if max_sm >= sm:
        return said(cid, "pass", "triton.ptxas_ok", gpu=label, sm=sm, version=version, max_sm=max_sm)
    fix = "triton.ptxas_override.fix" if machine.variables(env).get(var) else "triton.ptxas_old.fix"
    return said(cid, "fail", "triton.ptxas_old", fix, gpu=label, sm=sm, version=version, max_sm=max_sm, var=var,
                need=cv.text(cv.arch_min_cuda(cc)))


def _smoke_fix(error: str, env: Environment) -> Fix:
    low = error.lower()
    if "c compiler" in low:
        return "triton.cc.fix", {}
    if "python.h" in low:
        return headers_fix(env)
    if "cannot find -lcuda" in low:
        if not env.get("cuda", "libcuda_link"):
            return link_fix(env)
        # There, but this Triton's search missed it (2.0 used `whereis`): gcc also searches LIBRARY_PATH.
        folder = posixpath.dirname(str(env.get("cuda", "libcuda_link")))
        return "cmd", {"cmd": f"export LIBRARY_PATH={folder}:$LIBRARY_PATH"}
    if "libcuda" in low:
        return libcuda_fix(env)
    if "ptxas" in low or "ptx" in low:
        return "triton.smoke_ptxas.fix", {}
    if "timed out" in low:
        return "triton.smoke_hung.fix", {}
    pin = env.get("torch", "triton_pin")
    return "cmd", {"cmd": "pip install --force-reinstall triton" + (f"=={pin}" if pin else "")}


def check_smoke(env: Environment) -> Check:
    if not _installed(env):
        return _skip("triton.smoke")
    if skipped := machine.not_run("triton.smoke", env, "triton_runtime"):
        return skipped
    ok = env.get("triton_runtime", "smoke_ok")
    if ok is None:
        return machine.unread("triton.smoke", env, "triton_runtime", "smoke_ok", "not run")
    error = str(env.get("triton_runtime", "error") or "")
    details = "\n".join(str(x) for x in (error, env.get("triton_runtime", "output_tail")) if x) or None
    if ok and env.get("triton_runtime", "run_ok") is not False:
        times = {name: f"{value * scale:.2f}" for name, scale in (("compile", 1), ("run", 1e3))
                 if isinstance(value := env.get("triton_runtime", f"{name}_s"), (int, float))}
        shape = {("compile", "run"): ".both", ("compile",): ".compile", ("run",): ".run"}.get(tuple(times), "")
        return said("triton.smoke", "pass", f"triton.smoke{shape}", **times)
    first = " ".join(error.strip().splitlines()[0].split()) if error.strip() else "wrong result"
    fix, params = _smoke_fix(error + "\n" + str(env.get("triton_runtime", "output_tail") or ""), env)
    return said("triton.smoke", "fail", "triton.smoke_second_failed" if ok else "triton.smoke_failed", fix, details,
                error=first, **params)


def checks(env: Environment) -> list[Check]:
    return [check_installed(env), check_pin(env), check_compiler(env), check_headers(env), check_libcuda(env),
            *check_gpu_support(env), check_smoke(env)]
