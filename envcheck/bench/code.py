"""What the worker runs for one op behind one seam (inputs, implementations, float64 reference), so envcheck's
ops (``BuiltinCode``) and a user's (userbench/code.py) are prepared, checked and timed the same way."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from envcheck.bench import accuracy, exact, impls
from envcheck.bench.impls import Impl, Inputs, Sets
from envcheck.ops import spec

if TYPE_CHECKING:  # annotations only: the suite imports the runtime, which imports this module
    import torch

    from envcheck.bench.suite import PlannedCase


class OpCode(Protocol):
    """Inputs; the output implementations write into (None: they allocate); exact inputs (exact.py; None: none);
    ``planned``'s implementation bound to each (inputs, output) set; the float64 reference; the kernel that ran."""

    def make_inputs(self, shape: tuple[int, ...], dtype: str, device: str,
                    generator: torch.Generator | None) -> Inputs: ...
    def make_output(self, shape: tuple[int, ...], dtype: str, device: str) -> torch.Tensor | None: ...
    def exact_inputs(self, shape: tuple[int, ...], dtype: str, device: str,
                     generator: torch.Generator | None) -> Inputs | None: ...
    def bound(self, planned: PlannedCase, sets: Sets) -> list[Impl]: ...
    def reference_chunks(self, inputs: Inputs, shape: tuple[int, ...] = ()) -> Iterable[accuracy.RefChunk]: ...
    def kernel(self, planned: PlannedCase) -> str | None: ...


@dataclass(frozen=True)
class BuiltinCode:
    """One of envcheck's own ops. ``control``: the run's positive control (model.CONTROLS), for the Triton binding."""

    op: str
    control: str | None = None

    def make_inputs(self, shape: tuple[int, ...], dtype: str, device: str,
                    generator: torch.Generator | None) -> Inputs:
        return impls.make_inputs(self.op, shape, dtype, device, generator)

    def make_output(self, shape: tuple[int, ...], dtype: str, device: str) -> torch.Tensor:
        return impls.make_output(self.op, shape, dtype, device)

    def exact_inputs(self, shape: tuple[int, ...], dtype: str, device: str,
                     generator: torch.Generator | None) -> Inputs:
        return exact.inputs(self.op, shape, dtype, device, generator)

    def bound(self, planned: PlannedCase, sets: Sets) -> list[Impl]:
        op, impl = self.op, planned.impl
        # conv2d's stride lives in its shape, and a compiled linear_fwbw writes into the set's output.
        more = spec(op).family == "conv" or spec(op).backward
        shape = {"shape": planned.shape} if more else {}
        if impl == "torch":
            return [impls.torch_impl(op, inputs, out, **shape) for inputs, out in sets]
        if impl == "triton":
            control = {"control": self.control} if self.control else {}
            return [impls.triton_impl(op, inputs, out, planned.precision, **shape, **control) for inputs, out in sets]
        if impl == "jax":
            from envcheck.bench import jax_impl

            return jax_impl.on_sets(op, sets, planned.precision, planned.shape)
        if more:
            return impls.compiled_on_sets(op, [inputs for inputs, _ in sets], planned.shape, [out for _, out in sets])
        return impls.compiled_on_sets(op, [inputs for inputs, _ in sets])

    def reference_chunks(self, inputs: Inputs, shape: tuple[int, ...] = ()) -> Iterable[accuracy.RefChunk]:
        return accuracy.reference_chunks(self.op, inputs, shape=shape)

    def kernel(self, planned: PlannedCase) -> str | None:
        if planned.impl != "triton":
            return None
        return impls.triton_kernel(self.op, planned.shape, planned.dtype, planned.precision)
