"""A user's declared op as the benchmark worker runs it (bench/code.py's ``OpCode``): what its callables raise is
their case's failure; a crash or hang ends the worker, restarted for the cases left (bench/runner.py)."""

from __future__ import annotations

import functools
import pkgutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

from envcheck.bench.accuracy import RefChunk
from envcheck.bench.impls import Impl, Inputs, torch_dtype
from envcheck.userbench.api import DeclarationError, Op

if TYPE_CHECKING:  # annotations only: the suite imports the runtime, which imports this module
    from collections.abc import Callable

    import torch

    from envcheck.bench.suite import PlannedCase


@functools.cache
def _declared(source: str) -> dict[str, Op]:
    from envcheck.userbench.discover import load

    return {op.name: op for op in load(source)}


def user_code(source: str, name: str) -> UserCode:
    ops = _declared(source)
    if name not in ops:
        raise DeclarationError(f"{source} no longer declares op {name!r}")
    return UserCode(ops[name])


class UserCode:
    """One declared op's callables, checked where they hand envcheck something."""

    def __init__(self, op: Op) -> None:
        self.op = op

    def make_inputs(self, shape: tuple[int, ...], dtype: str, device: str, generator: torch.Generator,
                    fn: Callable[..., object] | None = None, what: str = "inputs") -> Inputs:
        import torch

        got = (fn or self.op.inputs)(tuple(shape), torch_dtype(dtype), device, generator)
        if isinstance(got, torch.Tensor):
            got = (got,)
        if not isinstance(got, (tuple, list)) or not got or not all(isinstance(t, torch.Tensor) for t in got):
            raise DeclarationError(f"{self.op.name}: {what}() must return a tuple of tensors, got {type(got).__name__}")
        return {f"arg{i}": t for i, t in enumerate(got)}

    def exact_inputs(self, shape: tuple[int, ...], dtype: str, device: str,
                     generator: torch.Generator) -> Inputs | None:
        if self.op.exact is None:
            return None
        return self.make_inputs(shape, dtype, device, generator, self.op.exact, "exact")

    def make_output(self, shape: tuple[int, ...], dtype: str, device: str) -> None:
        return None  # a user's implementation returns its output (checked_call poisons it)

    def bound(self, planned: PlannedCase, sets: list[tuple[Inputs, object]]) -> list[Impl]:
        fn = self.op.impls[planned.impl]
        if not callable(fn):  # a "module:function" string, imported now
            fn = pkgutil.resolve_name(fn)
        return [functools.partial(fn, *inputs.values()) for inputs, _ in sets]

    def reference_chunks(self, inputs: Inputs, shape: tuple[int, ...] = ()) -> Iterator[RefChunk]:
        import torch

        def wide(t: torch.Tensor) -> torch.Tensor:
            return t.double() if t.is_floating_point() else t

        args = [wide(t) for t in inputs.values()]
        ref = self.op.reference(*args)
        mag = (self.op.magnitude(*args) if self.op.magnitude is not None
               else self.op.reference(*[t.abs() if t.is_floating_point() else t for t in args]))
        for what, t in (("reference", ref), ("magnitude", mag)):
            if not isinstance(t, torch.Tensor):
                raise DeclarationError(f"{self.op.name}: {what}() must return a tensor, got {type(t).__name__}")
        if mag.shape != ref.shape:
            raise DeclarationError(f"{self.op.name}: magnitude() has shape {tuple(mag.shape)}, "
                                   f"reference() {tuple(ref.shape)}")
        yield RefChunk(slice(None), ref.double(), mag.double().abs())

    def kernel(self, planned: PlannedCase) -> str | None:
        return None
