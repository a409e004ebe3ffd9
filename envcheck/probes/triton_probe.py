"""Triton: what is installed (metadata, its ptxas) and whether a kernel compiles and runs (isolated). The ptxas
Triton ships (or ``TRITON_PTXAS_PATH`` names), not the CUDA toolkit, decides which GPUs it can target; since
Triton 3.3 a second one, ``ptxas-blackwell``, serves sm_100 and newer.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from envcheck.model import Facts, known, missing, reasons
from envcheck.probes.host import Emit, Host
from envcheck.probes.isolate import Isolated, error_facts, run_python
from envcheck.probes.packages import Lookup

if TYPE_CHECKING:
    from envcheck.outside_json import Json

TRITON_KEYS = ("installed", "version", "location", "bundled_ptxas", "ptxas_path", "ptxas_version", "ptxas_max_sm",
               "ptxas_blackwell_path", "ptxas_blackwell_version", "ptxas_blackwell_max_sm")
RUNTIME_KEYS = ("smoke_ok", "compile_s", "run_ok", "run_s", "error", "output_tail")
NO_GPU = reasons.TRITON_NO_GPU
PTXAS_TIMEOUT_S = 10.0

# Highest sm_XX each CUDA release's ptxas can target (CUDA Toolkit release notes).
PTXAS_MAX_SM: tuple[tuple[tuple[int, int], int], ...] = (
    ((10, 0), 75),
    ((11, 0), 80),
    ((11, 1), 86),
    ((11, 8), 90),
    ((12, 0), 90),
    ((12, 8), 120),
    ((12, 9), 121),
    ((13, 0), 121),
)

_RELEASE = re.compile(r"release (\d+)\.(\d+)(?:, V(\d+(?:\.\d+)+))?")


def ptxas_max_sm(release: str) -> int | None:
    """Highest sm number (90 for sm_90) the ptxas of CUDA ``release`` ("12.8") targets, or None."""
    m = re.match(r"(\d+)\.(\d+)", release)
    if not m:
        return None
    ver = (int(m.group(1)), int(m.group(2)))
    return next((sm for since, sm in reversed(PTXAS_MAX_SM) if ver >= since), None)


def parse_ptxas_version(text: str) -> str | None:
    """``12.8.93`` from ``ptxas --version`` output ("Cuda compilation tools, release 12.8, V12.8.93")."""
    m = _RELEASE.search(text)
    return (m.group(3) or f"{m.group(1)}.{m.group(2)}") if m else None


def _ptxas_facts(host: Host, env_var: str, bundled: str, prefix: str, path_fallback: bool) -> Facts:
    """``<prefix>_path``, ``_version``, ``_max_sm`` of the ptxas Triton will pick: $env_var, bundled, PATH."""
    override = host.environ.get(env_var)
    chosen = (override if override and host.exists(override) else bundled if host.exists(bundled)
              else host.which("ptxas") if path_fallback else None)
    if not chosen:
        why = f"no ptxas: {env_var} unset and none bundled at {bundled}"
        return {f"{prefix}_path": missing(why), f"{prefix}_version": missing(why), f"{prefix}_max_sm": missing(why)}
    facts: Facts = {f"{prefix}_path": known(chosen)}
    res = host.run([chosen, "--version"], timeout=PTXAS_TIMEOUT_S)
    version = parse_ptxas_version(res.stdout) if res.ok else None
    if version is None:
        why = res.describe() if not res.ok else "unrecognised `ptxas --version` output"
        facts[f"{prefix}_version"] = facts[f"{prefix}_max_sm"] = missing(why)
        return facts
    facts[f"{prefix}_version"] = known(version)
    sm = ptxas_max_sm(version)
    facts[f"{prefix}_max_sm"] = known(sm) if sm is not None else missing(f"ptxas {version} is not in envcheck's table")
    return facts


def probe_triton(host: Host, lookup: Lookup | None = None) -> Facts:
    """Facts of the ``triton`` section from metadata and ``ptxas --version``; never imports Triton."""
    pkg = (lookup or host.package)("triton")
    if pkg is None:
        why = f"Triton is not installed for {host.python_executable}" if host.python_executable else reasons.NO_TRITON
        return {"installed": known(False), **{k: missing(why) for k in TRITON_KEYS if k != "installed"}}
    bin_dir = pkg.path("triton", "backends", "nvidia", "bin")
    bundled = f"{bin_dir}/ptxas"
    facts: Facts = {
        "installed": known(True),
        "version": known(pkg.version) if pkg.version else missing("no version in the package metadata"),
        "location": known(pkg.path("triton")),
        "bundled_ptxas": known(bundled) if host.exists(bundled) else missing(f"not found at {bundled}"),
    }
    # Triton 2.x fell back to the ptxas on PATH; keeping that fallback reports what old versions use.
    facts.update(_ptxas_facts(host, "TRITON_PTXAS_PATH", bundled, "ptxas", path_fallback=True))
    blackwell = f"{bin_dir}/ptxas-blackwell"
    if host.exists(blackwell) or host.environ.get("TRITON_PTXAS_BLACKWELL_PATH"):
        facts.update(_ptxas_facts(host, "TRITON_PTXAS_BLACKWELL_PATH", blackwell, "ptxas_blackwell",
                                  path_fallback=False))
    else:
        why = "this Triton uses one ptxas for every architecture"
        facts.update({f"ptxas_blackwell_{k}": missing(why) for k in ("path", "version", "max_sm")})
    return facts


# Written to a file and imported after TRITON_CACHE_DIR is set: a private cache makes the first call a real compile.
KERNEL_SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
'''

def runtime_child(args: object, out: Emit) -> None:
    """In the child: compile and run a masked vector add, its answer checked against torch's."""
    import importlib.util
    import os
    import shutil
    import tempfile
    import time

    folder = tempfile.mkdtemp(prefix="envcheck-triton-")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "cache")
    try:
        try:
            import torch
            import triton
        except Exception as e:  # noqa: BLE001 - the import's failure is the answer
            out({"error": f"{type(e).__name__}: {e}"})
            return
        if not torch.cuda.is_available():
            out({"cuda": False})
            return
        out({"cuda": True})
        path = os.path.join(folder, "envcheck_smoke_kernel.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(KERNEL_SOURCE)
        spec = importlib.util.spec_from_file_location("envcheck_smoke_kernel", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        n = 98_317  # not a multiple of BLOCK: the mask must work
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(n, device="cuda", generator=g)
        y = torch.randn(n, device="cuda", generator=g)
        want = x + y
        result = torch.empty_like(x)
        grid = (triton.cdiv(n, 1024),)
        for first in (True, False):  # the compile, then a call of the compiled kernel
            try:
                result.fill_(float("nan"))
                torch.cuda.synchronize()
                t = time.perf_counter()
                mod.add_kernel[grid](x, y, result, n, BLOCK=1024)
                torch.cuda.synchronize()
                took = time.perf_counter() - t
                out({"compile_s": took, "smoke_ok": bool(torch.equal(result, want)),
                     "mismatches": int((result != want).sum().item())} if first
                    else {"run_s": took, "run_ok": bool(torch.equal(result, want))})
            except Exception as e:  # noqa: BLE001 - the call's failure is the answer
                out({"smoke_ok" if first else "run_ok": False, "error": f"{type(e).__name__}: {e}"[:4000]})
                return
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def runtime_facts(iso: Isolated) -> Facts:
    data: dict[str, Json] = iso.data or {}
    error_text = data.get("error") or iso.error
    if data.get("cuda") is False and not error_text:
        return {**{k: missing(NO_GPU) for k in RUNTIME_KEYS}, "error": missing("no error")}
    why = f"smoke kernel {iso.error}" if iso.error else (error_text or "not reported")
    facts: Facts = {}
    if "smoke_ok" in data:
        facts["smoke_ok"] = known(bool(data["smoke_ok"]))
        if not data["smoke_ok"] and not error_text:
            error_text = f"wrong result: {data.get('mismatches')} of 98317 elements differ from torch's x + y"
    elif data.get("cuda"):
        facts["smoke_ok"] = known(False)  # started on a GPU, then failed or crashed before reporting
    else:
        facts["smoke_ok"] = missing(why)
    facts["compile_s"] = known(data["compile_s"]) if data.get("compile_s") is not None else missing(why)
    if "run_ok" in data:
        facts["run_ok"] = known(bool(data["run_ok"]))
    elif data.get("smoke_ok"):
        facts["run_ok"] = known(False)  # the compile worked, the second call did not report
    else:
        facts["run_ok"] = missing("the first call failed" if facts["smoke_ok"].value is False else why)
    facts["run_s"] = known(data["run_s"]) if data.get("run_s") is not None else missing(
        facts["run_ok"].reason or why)
    facts.update(error_facts(error_text, iso))
    return facts


def probe_triton_runtime(host: Host, timeout: float) -> Facts:
    """Facts of the ``triton_runtime`` section: compile and run a masked vector add in a child."""
    return runtime_facts(run_python(host, "envcheck.probes.triton_probe:runtime_child", timeout, "triton_runtime"))
