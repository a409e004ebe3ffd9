"""Triton's CPU interpreter (``TRITON_INTERPRET=1``), made to compute as a GPU does: what
``envcheck run --interpret`` (settings.interpret) runs the built-in Triton kernels under, so
a machine without a GPU (CI) judges their accuracy end to end, through the worker's own path.

Triton reads the switch when it decorates a kernel, so ``enable`` runs in the worker before
any kernel module is imported. Two workarounds for triton 3.6's interpreter come with it:

* scalars are 1-element arrays whose ``__index__`` is ``int(array)``, which NumPy 2.4 made a
  TypeError: every kernel with a run-time loop bound (``range(0, cols, BLOCK)``) fails;
* fp32 -> bf16 drops the low 16 bits (NumPy has no bfloat16; ``cast_impl`` passes no rounding
  mode), a biased round-toward-zero with 2-3x the RMS error of the round-to-nearest-even a
  GPU's ``.to(tl.bfloat16)`` does (on an H200 Triton's bf16 outputs have exactly torch's
  error): every correct bf16 kernel would read 2-3x worse than it is.
"""

from __future__ import annotations

import os
from typing import Any

from envcheck.ops import interpreted

_patched = False


def checked_only(rt: Any, planned: Any) -> bool:
    """Whether the implementation ``planned`` (of ``rt``'s run) is run by the interpreter: then it is
    checked against its reference and never warmed up or timed, since its time means nothing."""
    return interpreted(rt.settings.interpret, "cuda" if rt.cuda else "cpu", planned.impl,
                       rt.spec(planned.op).baseline)


def enable() -> None:
    """Turn the interpreter on for kernels decorated from now on, with both workarounds."""
    global _patched
    os.environ["TRITON_INTERPRET"] = "1"
    if _patched:
        return
    _patched = True
    fix_scalar_index()
    round_bf16_to_nearest()


def fix_scalar_index() -> None:
    """Work around triton 3.6's interpreter on NumPy >= 2.4: it keeps scalars as 1-element arrays and
    implements ``__index__`` as ``int(array)``, which NumPy 2.4 turned from a deprecation into a
    TypeError; every kernel with a run-time loop bound (``range(0, cols, BLOCK)``) then fails."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def patched(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    interpreter._patch_lang_tensor = patched


def round_bf16_to_nearest() -> None:
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.cast_impl

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32).astype(np.uint64)
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            return interpreter.TensorHandle(rounded, dst_type.scalar)
        return original(self, src, dst_type)

    builder.cast_impl = cast_impl
