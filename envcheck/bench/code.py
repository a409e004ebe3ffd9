"""What the worker runs for one op, behind one seam: its inputs, its implementations bound to
them, its float64 reference. group.py asks the runtime for an ``OpCode`` and prepares, checks
and times every op the same way, whoever wrote it: envcheck's built-in ops (``BuiltinCode``:
impls.py and accuracy.py) and a user's declared ops (envcheck/userbench/code.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from envcheck.bench import accuracy, impls
from envcheck.bench.impls import Impl, Inputs
from envcheck.bench.suite import PlannedCase


class OpCode(Protocol):
    def make_inputs(self, shape: tuple[int, ...], dtype: str, device: str, generator: Any) -> Inputs:
        """Fresh random inputs of one case, drawn from ``generator``."""

    def make_output(self, shape: tuple[int, ...], dtype: str, device: str) -> Any:
        """The preallocated output the implementations write into; None where they allocate."""

    def bound(self, planned: PlannedCase, sets: list[tuple[Inputs, Any]]) -> list[Impl]:
        """``planned``'s implementation bound to each (inputs, output) set, the checked one first."""

    def reference_chunks(self, inputs: Inputs) -> Iterable[accuracy.RefChunk]:
        """The float64 reference of the output of ``inputs``, in pieces."""

    def kernel(self, planned: PlannedCase) -> str | None:
        """Which kernel ran, once it ran (None: nothing to say)."""


@dataclass(frozen=True)
class BuiltinCode:
    """One of envcheck's own ops."""

    op: str

    def make_inputs(self, shape: tuple[int, ...], dtype: str, device: str, generator: Any) -> Inputs:
        return impls.make_inputs(self.op, shape, dtype, device, generator)

    def make_output(self, shape: tuple[int, ...], dtype: str, device: str) -> Any:
        return impls.make_output(self.op, shape, dtype, device)

    def bound(self, planned: PlannedCase, sets: list[tuple[Inputs, Any]]) -> list[Impl]:
        if planned.impl == "torch":
            return [impls.torch_impl(self.op, inputs, out) for inputs, out in sets]
        if planned.impl == "triton":
            return [impls.triton_impl(self.op, inputs, out, planned.precision) for inputs, out in sets]
        return impls.compiled_on_sets(self.op, [inputs for inputs, _ in sets])

    def reference_chunks(self, inputs: Inputs) -> Iterable[accuracy.RefChunk]:
        return accuracy.reference_chunks(self.op, inputs)

    def kernel(self, planned: PlannedCase) -> str | None:
        if planned.impl != "triton":
            return None
        return impls.triton_kernel(self.op, planned.shape, planned.dtype, planned.precision)
