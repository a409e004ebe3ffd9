"""Triton's CPU interpreter (``TRITON_INTERPRET=1``, ``envcheck run --interpret``), made to compute as a GPU does,
so a machine without a GPU judges the Triton kernels' accuracy through the worker's own path. ``enable`` runs
before any kernel is decorated (Triton reads the switch then), with two workarounds for triton 3.6's interpreter.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from envcheck.ops import interpreted

if TYPE_CHECKING:
    from envcheck.bench.device import Runtime
    from envcheck.bench.suite import PlannedCase

_patched = False


def checked_only(rt: Runtime, planned: PlannedCase) -> bool:
    """Whether ``planned`` runs in the interpreter: then it is checked, never warmed up or timed."""
    return interpreted(rt.settings.interpret, "cuda" if rt.cuda else "cpu", planned.impl,
                       rt.spec(planned.op).baseline)


def enable() -> None:
    """Turn the interpreter on for kernels decorated from now on."""
    global _patched
    os.environ["TRITON_INTERPRET"] = "1"
    if _patched:
        return
    _patched = True
    fix_scalar_index()
    round_bf16_to_nearest()


def fix_scalar_index() -> None:
    """Scalars are 1-element arrays whose ``__index__`` is ``int(array)``, a TypeError since NumPy 2.4: every kernel
    with a run-time loop bound (``range(0, cols, BLOCK)``) failed."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def patched(tensor: object, scope: Any) -> None:  # Any: Triton's private interpreter
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    interpreter._patch_lang_tensor = patched


def round_bf16_to_nearest() -> None:
    """fp32 -> bf16 dropped the low 16 bits (NumPy has no bfloat16), 2-3x the error of a GPU's round to nearest
    even: every correct bf16 kernel would have read 2-3x worse than it is."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.cast_impl

    def cast_impl(self: object, src: Any, dst_type: Any) -> object:  # Any: Triton's interpreter handles
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32).astype(np.uint64)
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            return interpreter.TensorHandle(rounded, dst_type.scalar)
        return original(self, src, dst_type)

    builder.cast_impl = cast_impl
