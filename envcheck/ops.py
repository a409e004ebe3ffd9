"""The benchmarked ops as data, plain Python: per op its shapes, whether it is judged on bandwidth or FLOP/s, the
minimum bytes and FLOPs of one call (each input read and output written once), the memory a group of cases needs
and its outputs' accumulation lengths and roundings (docs/judge.md). Shapes: ``(n,)``, ``(rows, cols)``, ``(M, N,
K)`` (x is M x K, W is N x K), ``(a, b, c)`` for reductions, ``(N, C, H, W, K, R, stride)`` for conv2d (NCHW).
A user's op (``envcheck bench``) is an ``OpSpec`` of family ``declared``, carried in ``Bench.ops``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from envcheck.outside_json import Int

DTYPES: tuple[str, ...] = ("fp32", "fp16", "bf16")
# The arithmetic a case uses: its dtype, or TF32 for an fp32 matmul on tensor cores.
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16")
ITEMSIZE: dict[str, int] = {"fp32": 4, "fp16": 2, "bf16": 2}
IMPLS: tuple[str, ...] = ("torch", "triton", "compile", "jax")
UNIT_ROUNDOFF: dict[str, float] = {"fp32": 2.0**-24, "tf32": 2.0**-11, "fp16": 2.0**-11, "bf16": 2.0**-8}

# Roundings in the compute precision per output element beyond accumulation and storage (softmax: subtract,
# exp, divide; a TF32 matmul rounds both inputs, an IEEE one each product; a max is exact): docs/judge.md.
_ROUNDINGS = {"softmax": 8, "layer_norm": 6, "softmax_fwbw": 12, "fp32": 1, "tf32": 2}
# Intermediates rounded to the case's dtype: autograd keeps softmax's y in fp16/bf16 for the backward.
_STORED = {"softmax_fwbw": 4}
# FLOPs per element read (exp counted as one, as roofline models do); 1 for the ops not listed.
FLOPS_PER_ELEMENT = {"softmax": 5, "layer_norm": 7, "softmax_fwbw": 9}

# The float64 reference is compared in chunks of at most this many elements: a 2^28-element vector would need
# 2 GiB per float64 copy, more than a smaller GPU can spare beside the case.
REFERENCE_CHUNK_ELEMENTS = 1 << 24


@dataclass(frozen=True)
class Traffic:
    """Minimum bytes moved to and from memory, and arithmetic done, by one call."""

    bytes: int
    flops: int


@dataclass(frozen=True)
class Cost:
    """What one call of a declared op moves and computes at one (shape, dtype), as declared; ``accumulation``:
    terms summed into one output element (what a correct implementation's rounding error grows with)."""

    shape: tuple[Int, ...]
    dtype: str
    bytes: Int
    flops: Int
    accumulation: Int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.shape, tuple):
            object.__setattr__(self, "shape", tuple(self.shape))
        if not self.shape or any(not _int_from(d, 1) for d in self.shape):
            raise ValueError(f"a declared shape needs positive integers, got {self.shape}")
        if self.dtype not in ITEMSIZE:
            raise ValueError(f"unknown dtype {self.dtype!r} (known: {', '.join(ITEMSIZE)})")
        if not (_int_from(self.bytes, 1) and _int_from(self.flops, 0) and _int_from(self.accumulation, 1)):
            raise ValueError("bytes and accumulation must be positive integers, flops a non-negative integer")


@dataclass(frozen=True)
class Declared:
    """A user's op: its implementations, the ``baseline`` speedups and relative errors compare with, the
    roundings per output element beyond accumulation and storage, and its cost at each (shape, dtype)."""

    impls: tuple[str, ...]
    baseline: str
    costs: tuple[Cost, ...]
    roundings: Int = 0

    def __post_init__(self) -> None:
        if not self.impls or any(not valid_name(i) for i in self.impls) or len(set(self.impls)) != len(self.impls):
            raise ValueError(f"implementations need distinct names of letters, digits and _.- (got {self.impls})")
        if self.baseline not in self.impls:
            raise ValueError(f"the baseline {self.baseline!r} is not one of the implementations")
        if not self.costs:
            raise ValueError("a declared op needs at least one (shape, dtype) cost")
        if len({(c.shape, c.dtype) for c in self.costs}) != len(self.costs):
            raise ValueError("each (shape, dtype) of a declared op is declared once")
        if not _int_from(self.roundings, 0):
            raise ValueError("roundings must be a non-negative integer")

    def cost(self, shape: tuple[int, ...], dtype: str) -> Cost | None:
        return next((c for c in self.costs if c.shape == tuple(shape) and c.dtype == dtype), None)


def _int_from(x: object, low: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= low


def valid_name(name: object) -> bool:
    """A user's op or implementation name: at most 64 of letters, digits and _.- (safe in every output)."""
    return isinstance(name, str) and 0 < len(name) <= 64 and all(ch.isascii() and (ch.isalnum() or ch in "_.-")
                                                                   for ch in name)


@dataclass(frozen=True)
class OpSpec:
    """What one op is. ``family`` groups ops that take the same shapes: ``vector`` (n,), ``rows`` (rows, cols),
    ``matmul`` (M, N, K), ``reduce``, ``conv``, and ``declared`` for a user's op (rank 0: any)."""

    name: str
    family: str
    rank: Int
    compute_bound: bool  # judged on FLOP/s against the precision's peak; else on bandwidth
    inputs: Int  # tensors read, each of the full input shape (matmul: a and b)
    reduce_over: str = ""  # reduce family: "all", "inner" or "lead" (the axes reduced)
    backward: bool = False  # a forward + backward (autograd) op: the output is the gradient
    declared: Declared | None = None  # a user's op: its declaration

    @property
    def impls(self) -> tuple[str, ...]:
        return self.declared.impls if self.declared is not None else IMPLS

    @property
    def baseline(self) -> str:
        """The implementation others are compared with (speedup, relative error)."""
        return self.declared.baseline if self.declared is not None else "torch"

    def check_shape(self, shape: tuple[int, ...]) -> None:
        if self.declared is not None:
            if not any(c.shape == tuple(shape) for c in self.declared.costs):
                raise ValueError(f"{self.name} declares no case of shape {tuple(shape)}")
            return
        if len(shape) != self.rank or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in shape):
            raise ValueError(f"{self.name} needs a shape of {self.rank} positive integer(s), got {tuple(shape)}")
        if self.family == "conv" and shape[6] > shape[5]:
            raise ValueError(f"{self.name} needs a stride no larger than the kernel, got {tuple(shape)}")

    def conv_output(self, shape: tuple[int, ...]) -> tuple[int, int]:
        """(P, Q): the output height and width of a conv shape (padding R // 2)."""
        _, _, h, w, _, r, stride = shape
        pad = r // 2
        return (h + 2 * pad - r) // stride + 1, (w + 2 * pad - r) // stride + 1

    def output_elements(self, shape: tuple[int, ...]) -> int:
        if self.family == "vector":
            return shape[0]
        if self.family == "rows":
            return shape[0] if self.name == "row_sum" else shape[0] * shape[1]
        if self.family == "reduce":
            a, b, c = shape
            return {"all": 1, "inner": a * b, "lead": c}[self.reduce_over]
        if self.family == "conv":
            p, q = self.conv_output(shape)
            return shape[0] * shape[4] * p * q
        if self.backward:  # linear: dx (M x K) over dW (N x K)
            m, n, k = shape
            return (m + n) * k
        return shape[0] * shape[1]

    def input_elements(self, shape: tuple[int, ...]) -> int:
        if self.family == "matmul":
            m, n, k = shape
            return m * k + k * n + (m * n if self.backward else 0)  # linear_fwbw also reads dy
        if self.family == "conv":
            n, c, h, w, k, r, _ = shape
            return n * c * h * w + k * c * r * r
        if self.name == "layer_norm":
            return math.prod(shape) + 2 * shape[1]  # x, weight and bias
        return self.inputs * math.prod(shape)

    def forward_elements(self, shape: tuple[int, ...]) -> int:
        """Elements of the forward output a forward + backward op also writes (autograd keeps it for the
        backward): softmax's y, linear's y = x W^T; 0 for the other ops."""
        return shape[0] * shape[1] if self.backward else 0

    def traffic(self, shape: tuple[int, ...], dtype: str) -> Traffic:
        """Bytes and FLOPs of one call at ``shape`` in ``dtype`` (a shape checked where its case was made)."""
        if self.declared is not None:
            cost = self._cost(shape, dtype)
            return Traffic(cost.bytes, cost.flops)
        size = ITEMSIZE[dtype]
        nbytes = (self.input_elements(shape) + self.output_elements(shape) + self.forward_elements(shape)) * size
        if self.family == "matmul":
            m, n, k = shape
            flops = (6 if self.backward else 2) * m * n * k  # forward, dx and dW: three matmuls
        elif self.family == "conv":
            _, c, _, _, _, r, _ = shape
            flops = 2 * self.output_elements(shape) * c * r * r
        else:  # one add or one max per element read, or the op's count
            flops = FLOPS_PER_ELEMENT.get(self.name, 1) * math.prod(shape)
        return Traffic(nbytes, flops)

    def working_set_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """Bytes of the tensors one call touches (what could sit in L2): each once per call, so the traffic."""
        return self.traffic(shape, dtype).bytes

    def compute_precision(self, dtype: str, precision: str) -> str:
        """The arithmetic actually used: TF32 only for fp32 matmuls asked to use it; element-wise and reduction
        ops compute fp16/bf16 inputs in fp32 (PyTorch and our kernels upcast)."""
        if self.compute_bound:
            return precision
        return "fp32" if dtype in ("fp16", "bf16") else dtype

    def roundings(self, precision: str, output: str = "") -> tuple[int, int]:
        """(roundings in the compute precision per element of ``output`` beyond accumulation and storage,
        intermediates stored in the case's dtype); a forward + backward op's y counts as its forward op's."""
        if self.declared is not None:
            return self.declared.roundings, 0
        name = "softmax" if output == "y" and self.name == "softmax_fwbw" else self.name
        return _ROUNDINGS.get(precision if self.compute_bound else name, 0), _STORED.get(name, 0)

    def outputs(self, shape: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
        """The outputs judged apart, each with its accumulation length: linear_fwbw's y = x W^T (over K),
        dx = dy W (over N), dW = dy^T x (over M); softmax_fwbw's y and dx (a row); one unnamed output else."""
        if self.backward and self.family == "matmul":
            m, n, k = shape
            return (("y", k), ("dx", n), ("dW", m))
        if self.backward:
            return (("y", shape[1]), ("dx", shape[1]))
        return (("", self.accumulation(shape)),)

    def accumulation(self, shape: tuple[int, ...]) -> int:
        """Terms summed into one output element (a declared op: the longest declared over its dtypes)."""
        if self.declared is not None:
            return max(c.accumulation for c in self.declared.costs if c.shape == tuple(shape))
        if self.family == "matmul":
            # linear_fwbw's gradients sum over N (dx) and over M (dW).
            return max(shape[0], shape[1]) if self.backward else shape[2]
        if self.family == "rows":
            return shape[1]
        if self.family == "reduce":
            # A max rounds nothing: whatever it reads, its result is one of its inputs.
            return 1 if self.name.startswith("max") else math.prod(shape) // self.output_elements(shape)
        if self.family == "conv":
            _, c, _, _, _, r, _ = shape
            return c * r * r
        return 1

    def memory_needed_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """Device memory one group of cases needs at its peak: inputs, two outputs and the float64 reference chunk
        with its float64 inputs (matmul also holds ``b`` and |b| whole)."""
        if self.declared is not None:
            # Unknown layout: inputs and outputs, again for a second output, float64 copies for the reference.
            return 4 * self._cost(shape, dtype).bytes
        size = ITEMSIZE[dtype]
        ws = self.working_set_bytes(shape, dtype)
        out = self.output_elements(shape) * size
        chunk = min(REFERENCE_CHUNK_ELEMENTS, max(1, self.output_elements(shape)))
        ref = 8 * 4 * chunk  # reference, magnitude reference, and the float64 output chunk
        if self.name == "matmul":
            _, n, k = shape
            ref += 2 * 8 * k * n
        elif self.backward or self.family in ("conv", "reduce") or self.name == "layer_norm":
            # These references hold float64 copies of the inputs (and |inputs|) and of the forward output whole.
            ref += 2 * 8 * (self.input_elements(shape) + self.forward_elements(shape))
        return ws + out + ref

    def _cost(self, shape: tuple[int, ...], dtype: str) -> Cost:
        assert self.declared is not None
        cost = self.declared.cost(shape, dtype)
        if cost is None:
            raise ValueError(f"{self.name} declares no case of shape {tuple(shape)} in {dtype}")
        return cost


def declared_op(name: str, compute_bound: bool, declared: Declared) -> OpSpec:
    """The spec of a user's op (ValueError if its name is a built-in op's or not a valid name)."""
    if not valid_name(name):
        raise ValueError(f"op name {name!r}: use at most 64 letters, digits and _.-")
    if name in OPS:
        raise ValueError(f"op name {name!r} is a built-in op's: choose another")
    return OpSpec(name, "declared", 0, compute_bound, 0, declared=declared)


OPS: dict[str, OpSpec] = {
    spec.name: spec for spec in (
        OpSpec("vector_add", "vector", 1, False, inputs=2),
        OpSpec("relu", "vector", 1, False, inputs=1),
        OpSpec("matmul", "matmul", 3, True, inputs=2),
        OpSpec("softmax", "rows", 2, False, inputs=1),
        OpSpec("row_sum", "rows", 2, False, inputs=1),
        OpSpec("conv2d", "conv", 7, True, inputs=2),
        OpSpec("layer_norm", "rows", 2, False, inputs=1),
        *(OpSpec(f"{how}_{over}", "reduce", 3, False, inputs=1, reduce_over=over)
          for how in ("sum", "max") for over in ("all", "inner", "lead")),
        OpSpec("softmax_fwbw", "rows", 2, False, inputs=2, backward=True),
        OpSpec("linear_fwbw", "matmul", 3, True, inputs=3, backward=True),
    )
}
OP_NAMES: tuple[str, ...] = tuple(OPS)


# Implementations that never run a Triton kernel: on the CPU they run natively, interpreter on or off.
NATIVE_IMPLS = ("torch", "compile", "jax")


def interpreted(interpret: bool, backend: str, impl: str, baseline: str) -> bool:
    """Whether ``impl`` runs in Triton's interpreter (checked, never timed): ``--interpret`` (or ``envcheck
    bench`` under ``TRITON_INTERPRET=1``) on the CPU, neither its op's baseline nor a native implementation."""
    return interpret and backend != "cuda" and impl != baseline and impl not in NATIVE_IMPLS


def lookup(op: str, declared: Iterable[OpSpec] = ()) -> OpSpec:
    """The spec of ``op``: a built-in one, else one of the ``declared`` ops (a report's ``Bench.ops``)."""
    found = OPS.get(op) or next((s for s in declared if s.name == op), None)
    if found is None:
        raise ValueError(f"unknown op {op!r} (known: {', '.join((*OPS, *(s.name for s in declared)))})")
    return found


spec = lookup  # a built-in op's spec


def variant(dtype: str, precision: str) -> str:
    """``fp32``, or ``fp32/tf32`` when the arithmetic differs from the dtype: the one short form."""
    return dtype if precision == dtype else f"{dtype}/{precision}"


# What runs without --ops: the machine-health suite; the workloads run when named (they would triple its
# time). Ops named replace the default ones; the group ``default`` names them (``default,workloads``).
DEFAULT_OPS: tuple[str, ...] = ("vector_add", "relu", "matmul", "softmax", "row_sum")
OP_GROUPS: dict[str, tuple[str, ...]] = {"default": DEFAULT_OPS,
                                         "workloads": tuple(op for op in OP_NAMES if op not in DEFAULT_OPS)}


def ops_help() -> str:
    """Every built-in op and group, as ``--ops`` takes them (the CLI's help)."""
    return "; ".join(f"{g}: {', '.join(ops)}" for g, ops in OP_GROUPS.items())
