"""Triton: what its JIT needs at first use (C compiler, Python headers, libcuda, a ptxas that
knows the GPU) and whether a kernel really compiles and runs."""

from __future__ import annotations

import posixpath

from envcheck.checks import cuda_versions as cv
from envcheck.checks import machine
from envcheck.model import Check, Environment
from envcheck.probes.cuda import WSL_LIB_DIR

MIN_CC = (7, 0)  # Triton 3.x generates code for Volta and newer only


def _installed(env: Environment) -> bool:
    return env.get("triton", "installed") is True


def _skip(cid: str, title: str) -> Check:
    return Check(cid, "skip", title, "Triton is not installed")


NO_GPU = "no usable NVIDIA GPU (see the driver check): Triton's JIT runs only for one"


def check_installed(env: Environment) -> Check:
    title = "Triton installed"
    if _installed(env):
        return Check("triton.installed", "pass", title,
                     f"Triton {env.get('triton', 'version')} at {env.get('triton', 'location')}")
    pin = env.get("torch", "triton_pin")
    fix = f"pip install triton=={pin} (the version torch {env.get('torch', 'version')} pins)" if pin else \
        "pip install triton"
    return Check("triton.installed", "warn", title, "Triton is not installed: envcheck run benchmarks Triton kernels",
                 fix=fix)


def _base(version: str) -> str:
    return version.split("+")[0]


def check_pin(env: Environment) -> Check:
    title = "Triton matches torch"
    pin = env.get("torch", "triton_pin")
    version = env.get("triton", "version")
    if not _installed(env):
        return _skip("triton.version_pin", title)
    if not pin or not version:
        return Check("triton.version_pin", "skip", title, "torch pins no Triton version")
    if _base(str(pin)) == _base(str(version)):
        return Check("triton.version_pin", "pass", title, f"Triton {version} is the version torch pins")
    return Check(
        "triton.version_pin", "warn", title,
        f"torch {env.get('torch', 'version')} was built against Triton {pin}, but {version} is installed: "
        "torch.compile may fail to generate kernels",
        fix=f"pip install triton=={pin}",
    )


def check_compiler(env: Environment) -> Check:
    title = "C compiler for Triton"
    if not _installed(env):
        return _skip("triton.c_compiler", title)
    cc = env.get("cuda", "cc_path")
    if not cc and not machine.has_gpu(env):
        return Check("triton.c_compiler", "skip", title, NO_GPU)
    if cc:
        return Check("triton.c_compiler", "pass", title, f"{cc} (Triton builds its launcher with it)")
    return Check(
        "triton.c_compiler", "fail", title,
        f"no C compiler ({env.fact('cuda', 'cc_path').reason}): Triton compiles a small C launcher at first use",
        fix="sudo apt install build-essential (or export CC=/path/to/gcc)",
    )


def check_headers(env: Environment) -> Check:
    title = "Python headers for Triton"
    if not _installed(env):
        return _skip("triton.python_headers", title)
    headers = env.get("cuda", "python_headers")
    if not headers and not machine.has_gpu(env):
        return Check("triton.python_headers", "skip", title, NO_GPU)
    if headers:
        return Check("triton.python_headers", "pass", title, str(headers))
    version = str(env.get("system", "python_version") or "")
    return Check(
        "triton.python_headers", "fail", title,
        f"Python.h missing for Python {version or '?'} ({env.fact('cuda', 'python_headers').reason}): "
        "Triton's launcher build fails with 'Python.h: No such file or directory'",
        fix=headers_fix(env),
    )


def headers_fix(env: Environment) -> str:
    version = str(env.get("system", "python_version") or "")
    mm = ".".join(version.split(".")[:2]) or "3"
    if env.get("system", "python_env") == "conda":
        return f"conda install python={mm} (conda's Python ships its headers; the env is incomplete)"
    return f"sudo apt install python{mm}-dev (for the system Python a venv is built on)"


def libcuda_fix(env: Environment) -> str:
    """Make Triton find libcuda.so.1 (it asks `ldconfig -p`, then LD_LIBRARY_PATH)."""
    if machine.is_wsl(env):
        from envcheck.checks.wsl import LOADER_FIX

        return LOADER_FIX
    path = env.get("cuda", "libcuda_path")
    folder = posixpath.dirname(str(path)) if path else "<folder holding libcuda.so.1>"
    return f"sudo ldconfig (or export TRITON_LIBCUDA_PATH={folder})"


def link_fix(env: Environment) -> str:
    """Give the linker the libcuda.so that ``-lcuda`` needs, beside the libcuda.so.1 Triton found."""
    dirs = env.get("cuda", "triton_libcuda_dirs")
    folder = str(dirs[0]) if isinstance(dirs, list) and dirs else posixpath.dirname(str(env.get("cuda", "libcuda_path")))
    if machine.is_wsl(env) and folder == WSL_LIB_DIR:
        files = env.get("wsl", "lib_dir_files")
        real = "libcuda.so.1.1" if isinstance(files, list) and "libcuda.so.1.1" in files else "libcuda.so.1"
        return f"cd {WSL_LIB_DIR} && sudo ln -sf {real} libcuda.so && sudo ldconfig"
    return f"sudo ln -s libcuda.so.1 {folder}/libcuda.so && sudo ldconfig"


def check_libcuda(env: Environment) -> Check:
    """What Triton's launcher build needs from the driver: libcuda.so.1 found the way Triton looks for
    it, and a libcuda.so beside it for ``-lcuda`` (torch.compile builds through Triton the same way)."""
    title = "libcuda for Triton"
    if not _installed(env):
        return _skip("triton.libcuda", title)
    path = env.get("cuda", "libcuda_path")
    if not path and not machine.has_gpu(env):
        return Check("triton.libcuda", "skip", title, "no NVIDIA driver or GPU: see the driver check")
    if not path:
        return Check(
            "triton.libcuda", "fail", title,
            f"libcuda.so.1 not found ({env.fact('cuda', 'libcuda_path').reason}): Triton fails with "
            "'libcuda.so cannot found!'",
            fix=libcuda_fix(env),
        )
    cuda = env.sections.get("cuda", {})
    if "triton_libcuda_dirs" not in cuda or "libcuda_link" not in cuda:
        # A report from before envcheck looked at Triton's own search: libcuda.so.1 is what it knows.
        return Check("triton.libcuda", "pass", title, f"libcuda.so.1 resolves to {path}")
    if env.get("cuda", "triton_libcuda_dirs") is None:
        return Check(
            "triton.libcuda", "fail", title,
            f"libcuda.so.1 is at {path}, but Triton looks only in `ldconfig -p` and LD_LIBRARY_PATH "
            f"({env.fact('cuda', 'triton_libcuda_dirs').reason}): it fails with 'libcuda.so cannot found!'",
            fix=libcuda_fix(env),
        )
    link = env.get("cuda", "libcuda_link")
    if not link:
        return Check(
            "triton.libcuda", "fail", title,
            f"libcuda.so.1 is at {path}, but {env.fact('cuda', 'libcuda_link').reason}: Triton and torch.compile "
            "stop with '/usr/bin/ld: cannot find -lcuda'",
            fix=link_fix(env),
        )
    return Check("triton.libcuda", "pass", title, f"libcuda.so.1 resolves to {path}; -lcuda links {link}")


def _ptxas_for(env: Environment, sm: int) -> tuple[int | None, str | None, str]:
    """(max sm, version, env var) of the ptxas Triton uses for ``sm`` (sm_100+ has its own since 3.3)."""
    if sm >= 100 and env.get("triton", "ptxas_blackwell_max_sm") is not None:
        return (env.get("triton", "ptxas_blackwell_max_sm"), env.get("triton", "ptxas_blackwell_version"),
                "TRITON_PTXAS_BLACKWELL_PATH")
    return env.get("triton", "ptxas_max_sm"), env.get("triton", "ptxas_version"), "TRITON_PTXAS_PATH"


def check_gpu_support(env: Environment) -> list[Check]:
    """Per GPU: compute capability Triton supports, and a ptxas that can target it."""
    title = "Triton can target the GPU"
    if not _installed(env):
        return [_skip("triton.gpu", title)]
    if not env.gpus:
        return [Check("triton.gpu", "skip", title, "no GPU")]
    out = []
    for gpu in env.gpus:
        cid = f"triton.gpu.{gpu.index}"
        cc = machine.capability(gpu)
        label = machine.gpu_label(gpu)
        if cc is None:
            out.append(Check(cid, "skip", title, f"{label}: compute capability unknown"))
            continue
        sm = cc[0] * 10 + cc[1]
        if cc < MIN_CC:
            out.append(Check(cid, "fail", title,
                             f"{label} has compute capability {cv.text(cc)}: Triton {env.get('triton', 'version')} "
                             "needs 7.0 (Volta) or newer",
                             fix="benchmark torch only on this GPU (envcheck run skips Triton cases), or use a newer GPU"))
            continue
        max_sm, version, var = _ptxas_for(env, sm)
        if not isinstance(max_sm, int):
            out.append(Check(cid, "skip", title, f"{label}: ptxas version unknown"))
            continue
        if max_sm >= sm:
            out.append(Check(cid, "pass", title, f"{label} is sm_{sm}; Triton's ptxas {version} targets up to "
                                                 f"sm_{max_sm}"))
            continue
        override = machine.variables(env).get(var)
        fix = f"unset {var} (it points at an older ptxas)" if override else "pip install -U triton"
        need = cv.arch_min_cuda(cc)
        out.append(Check(cid, "fail", title,
                         f"{label} is sm_{sm}, but the ptxas Triton uses ({version}) targets only up to sm_{max_sm}",
                         fix=f"{fix}; or export {var}=<ptxas of CUDA {cv.text(need)} or newer>"))
    return out


def _smoke_fix(error: str, env: Environment) -> str:
    low = error.lower()
    if "c compiler" in low:
        return "sudo apt install build-essential (or export CC=/path/to/gcc)"
    if "python.h" in low:
        return headers_fix(env)
    if "cannot find -lcuda" in low:
        if not env.get("cuda", "libcuda_link"):
            return link_fix(env)
        # The libcuda.so is there but this Triton's search missed it (Triton 2.0 used `whereis`,
        # which never looks in /usr/lib/wsl/lib): gcc also searches LIBRARY_PATH for -l.
        return f"export LIBRARY_PATH={posixpath.dirname(str(env.get('cuda', 'libcuda_link')))}:$LIBRARY_PATH"
    if "libcuda" in low:
        return libcuda_fix(env)
    if "ptxas" in low or "ptx" in low:
        return "pip install -U triton (its bundled ptxas must know the GPU); unset TRITON_PTXAS_PATH if set"
    if "timed out" in low:
        return "nvidia-smi (is the GPU responsive?); run again with a longer --timeout"
    return "pip install --force-reinstall triton" + (f"=={env.get('torch', 'triton_pin')}"
                                                     if env.get("torch", "triton_pin") else "")


def check_smoke(env: Environment) -> Check:
    title = "Triton kernel compiles and runs"
    if not _installed(env):
        return _skip("triton.smoke", title)
    if not machine.runtime_ran(env, "triton_runtime"):
        return Check("triton.smoke", "skip", title, machine.not_run_reason(env, "triton_runtime"))
    ok = env.get("triton_runtime", "smoke_ok")
    if ok is None:
        return Check("triton.smoke", "skip", title, env.fact("triton_runtime", "smoke_ok").reason or "not run")
    error = str(env.get("triton_runtime", "error") or "")
    details = "\n".join(str(x) for x in (error, env.get("triton_runtime", "output_tail")) if x) or None
    if ok and env.get("triton_runtime", "run_ok") is not False:
        compile_s = env.get("triton_runtime", "compile_s")
        run_s = env.get("triton_runtime", "run_s")
        parts = []
        if isinstance(compile_s, (int, float)):
            parts.append(f"first call (JIT compile) {compile_s:.2f} s")
        if isinstance(run_s, (int, float)):
            parts.append(f"second call {run_s * 1e3:.2f} ms")
        return Check("triton.smoke", "pass", title,
                     "masked vector add exact" + (": " + ", ".join(parts) if parts else ""))
    first = " ".join(error.strip().splitlines()[0].split()) if error.strip() else "wrong result"
    what = "compiled but the second call failed" if ok else "failed"
    return Check("triton.smoke", "fail", title, f"masked vector add {what}: {first}",
                 fix=_smoke_fix(error + "\n" + str(env.get("triton_runtime", "output_tail") or ""), env),
                 details=details)


def checks(env: Environment) -> list[Check]:
    return [check_installed(env), check_pin(env), check_compiler(env), check_headers(env), check_libcuda(env),
            *check_gpu_support(env), check_smoke(env)]
