"""envcheck's own Triton kernels, one family per module, loaded on first use (``kernels.<op>``): importing this
package imports neither torch nor Triton, so ``--help`` stays fast and a broken Triton shows only where a kernel
is wanted. Every wrapper writes a preallocated ``out``, allocates nothing (but a reduction's missing workspace)
and never synchronises, so it can be captured in a CUDA graph; bad arguments are a one-line ``ValueError``.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from envcheck.errors import one_line
from envcheck.ops import OP_NAMES

if TYPE_CHECKING:
    import torch

OPS: tuple[str, ...] = OP_NAMES  # each defined by the module of its name, but the reductions (one module)
MODULES: dict[str, str] = {f"{how}_{over}": "reduce" for how in ("sum", "max") for over in ("all", "inner", "lead")}

__all__ = ["KERNELS", "OPS", "triton_available", *OPS]


def triton_available() -> str | None:
    """None when Triton (and the torch it launches on) import, else the reason in one line."""
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - a broken Triton fails in many ways: each is a reason, not a crash
        return f"cannot import Triton ({one_line(exc)})"
    return None


def __getattr__(name: str) -> Any:  # a kernel, or KERNELS: what the caller named
    # PEP 562: a kernel resolved on first access is cached as a module global (a dict hit, not an import).
    if name in OPS:
        return globals().setdefault(name, getattr(importlib.import_module(f"{__name__}.{MODULES.get(name, name)}"), name))
    if name == "KERNELS":
        kernels: dict[str, Callable[..., torch.Tensor]] = {op: __getattr__(op) for op in OPS}
        return globals().setdefault("KERNELS", kernels)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _KernelPackage(types.ModuleType):
    """Keeps ``kernels.<op>`` the function after ``import kernels.<op>``, which sets the parent's attribute of
    that name to the module (still reachable through ``importlib.import_module``)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in OPS and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _KernelPackage
