"""envcheck's own Triton kernels, one family per module, loaded on first use.

Every wrapper takes a preallocated ``out``, returns it, allocates nothing and never
synchronises, so one warm-up call (JIT compile, the matmul race) makes it safe to
capture in a CUDA graph, and its host-side cost is only validation plus the launch:

- ``vector_add(x, y, out)``, ``relu(x, out)``: 1-D contiguous tensors of any length.
- ``softmax(x, out)``: softmax over the last dim of a 2-D tensor.
- ``row_sum(x, out)``: sum over the last dim of a 2-D tensor into ``out`` of shape (rows,).
- ``matmul(a, b, out, precision)``: ``out = a @ b``; precision ``fp32`` (IEEE), ``tf32``,
  ``fp16`` or ``bf16``.
- ``conv2d(x, weight, out, stride, precision)``: NCHW convolution, padding R // 2.
- ``layer_norm(x, weight, bias, out)``: layer norm over the last dim of a 2-D tensor.
- ``sum_all`` / ``sum_inner`` / ``sum_lead`` / ``max_*`` ``(x, out, work)``: reductions of a
  3-D tensor (module ``reduce``; ``work`` is the two-stage paths' workspace).
- ``softmax_fwbw(x, dy, y, out)``, ``linear_fwbw(x, w, dy, y, out, precision)``: forward and
  backward, ``out`` the gradient(s).

Exceptions to "allocates nothing": the reductions make their workspace when none is given.

Bad arguments raise ``ValueError`` with a one-line message before anything is launched.

Importing this package imports neither torch nor Triton: ``envcheck probe`` and
``--help`` stay fast, and a broken Triton install surfaces only where a kernel is
wanted, through :func:`triton_available` or the first attribute access.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

# op name -> module that defines a function of the same name
OPS: tuple[str, ...] = ("vector_add", "relu", "matmul", "softmax", "row_sum", "conv2d", "layer_norm",
                        "sum_all", "sum_inner", "sum_lead", "max_all", "max_inner", "max_lead",
                        "softmax_fwbw", "linear_fwbw")
# Ops defined in a module of another name (one module for the six reductions).
MODULES: dict[str, str] = {f"{how}_{over}": "reduce" for how in ("sum", "max") for over in ("all", "inner", "lead")}

__all__ = ["KERNELS", "OPS", "triton_available", *OPS]


def triton_available() -> str | None:
    """None when Triton (and the torch it launches on) import, else the reason in one line."""
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    # A half-installed or mismatched Triton fails in many ways (ImportError, OSError from a
    # missing shared library, RuntimeError from a backend check); each is a reason, not a crash.
    except Exception as exc:  # noqa: BLE001
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        detail = f": {first_line}" if first_line else ""
        return f"cannot import Triton ({type(exc).__name__}{detail})"
    return None


def _load(op: str) -> Callable[..., Any]:
    module = importlib.import_module(f"{__name__}.{MODULES.get(op, op)}")
    return getattr(module, op)


def __getattr__(name: str) -> Any:
    # PEP 562: resolve kernels on first access and cache them as plain module globals, so
    # later lookups cost a dict hit, not an import.
    if name in OPS:
        fn = _load(name)
        globals()[name] = fn
        return fn
    if name == "KERNELS":
        kernels: dict[str, Callable[..., Any]] = {op: __getattr__(op) for op in OPS}
        globals()["KERNELS"] = kernels
        return kernels
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _KernelPackage(types.ModuleType):
    """Keeps ``kernels.<op>`` the function even after ``import kernels.<op>`` ran.

    Importing a submodule makes the import system set the parent's attribute of that name to
    the module, which would shadow the function of the same name; this stores the function.
    The modules themselves stay reachable through ``importlib.import_module`` and
    ``from envcheck.bench.kernels.<op> import <name>``.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in OPS and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _KernelPackage
