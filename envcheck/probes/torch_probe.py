"""PyTorch: what is installed (pip's metadata and ``torch/version.py`` as text: no broken CUDA can crash it), and in a
child one GPU op whose answer is checked, as ``torch.cuda.is_available()`` does not mean kernels run."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING

from envcheck.model import Fact, Facts, known, missing, reasons
from envcheck.probes.host import Emit, Host
from envcheck.probes.isolate import Isolated, error_facts, run_python
from envcheck.probes.packages import Lookup, PackageInfo

if TYPE_CHECKING:
    from envcheck.outside_json import Json

TORCH_KEYS = ("installed", "version", "build", "cuda_version", "location", "triton_pin", "shadowed_by")
RUNTIME_KEYS = (
    "import_ok", "import_s", "location", "cuda_available", "device_count", "arch_list", "devices", "cudnn_version",
    "tf32_matmul", "tf32_cudnn", "float32_matmul_precision", "smoke_ok", "smoke_s", "error",
    "warnings", "output_tail",
)
NOT_SHADOWED = "no torch package on PYTHONPATH ahead of the installed one"
NO_CUDA_DEVICE = reasons.NO_CUDA_DEVICE
SMOKE_N = 1024  # sum of the first n odd numbers is n**2: exact in float32 for n <= 4096

# torch/version.py assigns e.g. ``cuda: Optional[str] = '13.0'`` or ``hip = None``.
_VERSION_PY = r"^{name}\s*(?::[^=\n]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)"
# Requires-Dist lines naming the Triton torch was built against (ROCm wheels pin pytorch-triton-rocm).
_TRITON_PIN = re.compile(r"^\s*(?:triton|pytorch-triton(?:-rocm|-xpu)?)\s*==\s*([^\s;,]+)", re.IGNORECASE)


def version_py_value(text: str, name: str) -> str | None:
    """The string assigned to ``name`` in torch/version.py text, or None (unset or ``None``)."""
    m = re.search(_VERSION_PY.format(name=re.escape(name)), text, re.MULTILINE)
    return None if not m else m.group(1) if m.group(1) is not None else m.group(2)


def build_from(version: str, version_py: str | None) -> tuple[str | None, str | None]:
    """(build, cuda_version): build is ``cuda`` | ``rocm`` | ``cpu``; either None when unknowable. The local tag
    (``+cu130``, ``+cpu``) decides when present; a PyPI wheel has none, so version.py decides then."""
    cuda = version_py_value(version_py, "cuda") if version_py else None
    hip = version_py_value(version_py, "hip") if version_py else None
    local = version.partition("+")[2].lower()
    build = next((b for prefix, b in (("cu", "cuda"), ("rocm", "rocm"), ("cpu", "cpu")) if local.startswith(prefix)),
                 None)
    if build == "cuda" and cuda is None and re.fullmatch(r"cu\d{3,}", local):
        cuda = f"{local[2:-1]}.{local[-1]}"  # cu128 -> 12.8, cu130 -> 13.0
    if build is None:
        build = "cuda" if cuda else "rocm" if hip else "cpu" if version_py is not None else None
    return build, cuda


def triton_pin(requires: tuple[str, ...]) -> str | None:
    return next((m.group(1) for m in map(_TRITON_PIN.match, requires) if m), None)


def shadowing_torch(host: Host, installed: str | None) -> str | None:
    """The ``torch`` package a PYTHONPATH folder puts ahead of the installed one (``installed``), or None: a bare
    ``torch/`` folder (a namespace portion) loses to the installed package, so only a package or module counts."""
    real_installed = host.realpath(installed) if installed else None
    for d in host.environ.get("PYTHONPATH", "").split(":"):
        if not d:
            continue  # an empty entry is the current folder of whatever runs; not a fixed place
        pkg_dir = posixpath.join(d, "torch")
        if host.exists(posixpath.join(pkg_dir, "__init__.py")):
            return None if host.realpath(pkg_dir) == real_installed else pkg_dir
        if host.exists(posixpath.join(d, "torch.py")):
            return posixpath.join(d, "torch.py")
    return None


def probe_torch(host: Host, lookup: Lookup | None = None) -> Facts:
    """Facts of the ``torch`` section from package metadata only; never imports torch, never raises."""
    pkg: PackageInfo | None = (lookup or host.package)("torch")
    shadow = shadowing_torch(host, pkg.path("torch") if pkg else None)
    shadow_fact = known(shadow) if shadow else missing(NOT_SHADOWED)
    if pkg is None:
        why = f"PyTorch is not installed for {host.python_executable}" if host.python_executable else reasons.NO_TORCH
        return {"installed": known(False), **{k: missing(why) for k in TORCH_KEYS if k != "installed"},
                "shadowed_by": shadow_fact}
    version_py_path = pkg.path("torch", "version.py")
    version_py: str | None = None
    vp_reason = ""
    try:
        version_py = host.read_text(version_py_path)
    except OSError as e:
        vp_reason = f"cannot read {version_py_path} ({e.strerror or e.__class__.__name__})"
    # A wheel's metadata may say "2.11.0" where torch.__version__ says "2.11.0+cu130", what users quote.
    version = (version_py_value(version_py, "__version__") if version_py else None) or pkg.version
    build, cuda = build_from(version, version_py)
    facts: Facts = {
        "installed": known(True),
        "version": known(version) if version else missing("no version in the package metadata"),
        "build": known(build) if build else missing(vp_reason or "build not recognised"),
        "location": known(pkg.path("torch")),
    }
    if cuda:
        facts["cuda_version"] = known(cuda)
    elif build == "cpu":
        facts["cuda_version"] = missing(reasons.CPU_ONLY_BUILD)
    elif build == "rocm":
        hip = version_py_value(version_py, "hip") if version_py else None
        facts["cuda_version"] = missing(f"ROCm build (HIP {hip})" if hip else "ROCm build")
    else:
        facts["cuda_version"] = missing(vp_reason or "no CUDA version in torch/version.py")
    pin = triton_pin(pkg.requires)
    facts["triton_pin"] = known(pin) if pin else missing("torch's metadata requires no Triton version")
    facts["shadowed_by"] = shadow_fact
    return facts


def runtime_child(args: object, out: Emit) -> None:
    """In the child: import torch, read CUDA's view, run one op whose answer is known. Reports in stages, so a
    crash in CUDA's start still leaves the import's facts."""
    import os
    import time
    import warnings

    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def texts() -> list[str]:
            return [f"{w.category.__name__}: {w.message}" for w in caught]

        try:
            import torch
        except Exception as e:  # noqa: BLE001 - the import's failure is the answer
            out({"import_ok": False, "import_s": time.perf_counter() - t0, "error": f"{type(e).__name__}: {e}",
                 "warnings": texts()})
            return
        out({"import_ok": True, "import_s": time.perf_counter() - t0,
             "location": os.path.dirname(getattr(torch, "__file__", None) or "") or None})
        got: dict[str, Json] = {}
        try:
            got["arch_list"] = list(torch.cuda.get_arch_list())
            got["cudnn_version"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
            got["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
            got["tf32_cudnn"] = bool(torch.backends.cudnn.allow_tf32)
            got["float32_matmul_precision"] = torch.get_float32_matmul_precision()
            got["cuda_available"] = bool(torch.cuda.is_available())
            got["device_count"] = int(torch.cuda.device_count()) if got["cuda_available"] else 0
            got["warnings"] = texts()
            out(got)
            devices = []
            for i in range(got["device_count"]):
                p = torch.cuda.get_device_properties(i)
                devices.append({"index": i, "name": p.name, "capability": f"{p.major}.{p.minor}",
                                "sm_count": p.multi_processor_count, "memory_bytes": p.total_memory,
                                "l2_bytes": getattr(p, "L2_cache_size", None)})
            out({"devices": devices, "warnings": texts()})
            if got["cuda_available"]:
                n = SMOKE_N
                x = torch.arange(n, device="cuda", dtype=torch.float32)
                torch.cuda.synchronize()
                t = time.perf_counter()
                value = (x * 2 + 1).sum().item()
                smoke_s = time.perf_counter() - t
                out({"smoke_ok": value == float(n * n), "smoke_s": smoke_s, "smoke_value": value,
                     "smoke_expected": float(n * n), "warnings": texts()})
        except Exception as e:  # noqa: BLE001 - reported as the section's error
            out({"error": f"{type(e).__name__}: {e}", "warnings": texts()})


def _fact(data: dict[str, Json], key: str, reason: str) -> Fact:
    v = data.get(key)
    return known(v) if v is not None else missing(reason)


def runtime_facts(iso: Isolated) -> Facts:
    data = iso.data or {}
    error_text = data.get("error") or iso.error
    if not data.get("import_ok"):
        why = "torch import failed" if data or not iso.error else f"runtime probe {iso.error}"
    elif iso.error:
        why = f"runtime probe {iso.error}"
    else:
        why = error_text or "not reported"
    facts: Facts = {
        "import_ok": known(bool(data.get("import_ok"))),
        "import_s": _fact(data, "import_s", why),
        "location": _fact(data, "location", why),
        "warnings": known(list(data.get("warnings") or [])),
    }
    for key in ("arch_list", "cudnn_version", "tf32_matmul", "tf32_cudnn", "float32_matmul_precision",
                "cuda_available", "device_count", "devices"):
        facts[key] = _fact(data, key, why)
    if data.get("cudnn_version") is None and "cudnn_version" in data and not error_text:
        facts["cudnn_version"] = missing("cuDNN not available to this torch")
    if data.get("arch_list") == [] and data.get("cuda_available") is False:
        facts["arch_list"] = missing(reasons.NO_CUDA_ARCHS)
    if "smoke_ok" in data:
        facts["smoke_ok"] = known(bool(data["smoke_ok"]))
        facts["smoke_s"] = _fact(data, "smoke_s", why)
        if not data["smoke_ok"] and not error_text:
            error_text = f"smoke op gave {data.get('smoke_value')!r}, expected {data.get('smoke_expected')!r}"
    elif data.get("cuda_available") is False and not error_text:
        facts["smoke_ok"] = facts["smoke_s"] = missing(NO_CUDA_DEVICE)
    elif data.get("cuda_available") and error_text:
        # CUDA was reported available, then device properties or the op failed or crashed.
        facts["smoke_ok"] = known(False)
        facts["smoke_s"] = missing(why)
    else:
        facts["smoke_ok"] = facts["smoke_s"] = missing(why)
    facts.update(error_facts(error_text, iso))
    return facts


def probe_torch_runtime(host: Host, timeout: float) -> Facts:
    """Facts of the ``torch_runtime`` section: import torch, init CUDA and run one op, in a child."""
    return runtime_facts(run_python(host, "envcheck.probes.torch_probe:runtime_child", timeout, "torch_runtime"))
