"""``Op``: declaring your own op for ``envcheck bench FILE.py`` (the one public API): its implementations, a float64
reference, its inputs, shapes and dtypes, and what one call moves and computes. Every callable runs in the
isolated worker. Each field's contract: docs/userbench.md."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from envcheck.ops import ITEMSIZE, OPS, Cost, Declared, OpSpec, declared_op, valid_name

Shape = tuple[int, ...]


class DeclarationError(ValueError):
    """A declaration envcheck cannot run (one line, naming the op and the field)."""


def _count(value: object, what: str, name: str, positive: bool) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < (1 if positive else 0):
        raise DeclarationError(f"op {name!r}: {what} must return a {'positive' if positive else 'non-negative'} "
                               f"integer, got {value!r}")
    return value


@dataclass(frozen=True)
class Op:
    """One op of your own (each field's contract: docs/userbench.md)."""

    name: str
    impls: Mapping[str, Callable[..., object] | str]
    reference: Callable[..., object]
    inputs: Callable[..., object]  # a tensor or a tuple of them (checked where called)
    shapes: Sequence[Shape]
    bytes: Callable[[Shape, str], int]
    flops: Callable[[Shape, str], int] | None = None
    dtypes: Sequence[str] = ("fp32",)
    baseline: str | None = None  # the implementation others are compared with (default: the first)
    accumulation: Callable[[Shape], int] | None = None
    magnitude: Callable[..., object] | None = None
    exact: Callable[..., object] | None = None
    roundings: int = 0
    compute_bound: bool = False

    def __post_init__(self) -> None:
        name = self.name
        if not valid_name(name):
            raise DeclarationError(f"op name {name!r}: use 1 to 64 letters, digits and _.-")
        if name in OPS:
            raise DeclarationError(f"op name {name!r} is a built-in op's: choose another")
        if not isinstance(self.impls, Mapping) or not self.impls:
            raise DeclarationError(f"op {name!r}: impls must be a non-empty mapping of name -> callable")
        for impl, fn in self.impls.items():
            if not valid_name(impl):
                raise DeclarationError(f"op {name!r}: implementation name {impl!r}: use letters, digits and _.-")
            if not (callable(fn) or (isinstance(fn, str) and fn.count(":") == 1)):
                raise DeclarationError(f"op {name!r}: implementation {impl!r} must be a callable or "
                                       f"a 'module:function' string, got {type(fn).__name__}")
        for what in ("reference", "inputs", "bytes"):
            if not callable(getattr(self, what)):
                raise DeclarationError(f"op {name!r}: {what} must be a callable")
        for what in ("flops", "accumulation", "magnitude", "exact"):
            if getattr(self, what) is not None and not callable(getattr(self, what)):
                raise DeclarationError(f"op {name!r}: {what} must be a callable or None")
        object.__setattr__(self, "shapes", self._shapes(self.shapes))
        dtypes = tuple(self.dtypes) if not isinstance(self.dtypes, str) else (self.dtypes,)
        if not dtypes or any(d not in ITEMSIZE for d in dtypes) or len(set(dtypes)) != len(dtypes):
            raise DeclarationError(f"op {name!r}: dtypes must be distinct among {', '.join(ITEMSIZE)}, got {dtypes}")
        object.__setattr__(self, "dtypes", dtypes)
        baseline = self.baseline if self.baseline is not None else next(iter(self.impls))
        if baseline not in self.impls:
            raise DeclarationError(f"op {name!r}: baseline {baseline!r} is not one of its implementations")
        object.__setattr__(self, "baseline", baseline)
        if not isinstance(self.roundings, int) or isinstance(self.roundings, bool) or self.roundings < 0:
            raise DeclarationError(f"op {name!r}: roundings must be a non-negative integer")
        if not isinstance(self.compute_bound, bool):
            raise DeclarationError(f"op {name!r}: compute_bound must be True or False")

    def _shapes(self, shapes: object) -> tuple[Shape, ...]:
        try:
            out = tuple(tuple(s) for s in shapes)  # type: ignore[attr-defined]
        except TypeError:
            out = ()
        shapes_ok = all(s and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in s) for s in out)
        if not out or not shapes_ok or len(set(out)) != len(out):
            raise DeclarationError(f"op {self.name!r}: shapes must be distinct tuples of positive integers")
        return out

    def spec(self) -> OpSpec:
        """The op as the registry and the report know it, its cost at every shape and dtype."""
        costs = []
        for shape in self.shapes:
            k = _count(self.accumulation(shape), "accumulation", self.name, True) if self.accumulation else 1
            for dtype in self.dtypes:
                nbytes = _count(self.bytes(shape, dtype), "bytes", self.name, True)
                flops = _count(self.flops(shape, dtype), "flops", self.name, False) if self.flops else 0
                costs.append(Cost(shape, dtype, nbytes, flops, k))
        assert self.baseline is not None
        return declared_op(self.name, self.compute_bound,
                           Declared(tuple(self.impls), self.baseline, tuple(costs), self.roundings))
