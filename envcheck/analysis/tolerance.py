"""Whether an output is right: its error statistics judged for the arithmetic actually used.

Two bounds, both from unit roundoffs (u = 2^-p for p explicit mantissa bits + 1)::

    fp32 (IEEE)  u = 2^-24 = 5.96e-8     tf32  u = 2^-11 = 4.88e-4
    fp16         u = 2^-11 = 4.88e-4     bf16  u = 2^-8  = 3.91e-3

An output element goes through three kinds of rounding:

* rounding inside the op's arithmetic, ``c_op`` roundings of the *compute* precision: a TF32
  matmul rounds both inputs to TF32 before multiplying (c = 2); an IEEE fp32 matmul rounds
  each product (c = 1); fp16/bf16 matmul products are exact in the fp32 accumulator (c = 0);
  softmax does a subtraction, an exp (a few ulp with the fast exp2 GPUs use) and a division
  in fp32 (c = 8 covers them); vector_add, relu and row_sum do nothing beyond the next two.
* accumulation of K terms in fp32 (matmul's K, the row length of softmax and row_sum);
* the final rounding to the storage dtype: u_out.

**Whole output** (``rel_l2``, ||out - ref|| / ||ref||): the rounding errors of a long sum of
random-signed terms add like a random walk, so they grow like sqrt(K) u_fp32 relative to
the result (Higham and Mary, 2019; worst-case bounds grow like K u and would hide real bugs)::

    rel_l2 tolerance = SAFETY x (c_op x u_compute + sqrt(K) x u_fp32 + u_out),   SAFETY = 3

**Each element** (``max_rel_elem``, max |out - ref| / mag, where mag is the op on the absolute
values of its inputs, e.g. (|a||b|)_ij): the classical forward bound of a sum, |error| <=
K u sum|terms|, holds for every element whatever the summation order, so a correct kernel
can never exceed it; relative to mag every rounding above is at most its u::

    element tolerance = SAFETY x (c_op x u_compute + K x u_fp32 + u_out)

It catches what an average hides: a few sign-flipped outputs of a 4096-long matmul are each
off by about 2|c_ij|, some 5% of their mag, against an fp16 bound of 2.2e-3; a zeroed block
of a vector add is off by all of |x + y|, against 1.5e-3 for fp16. A dropped K tile moves
every element by only a little, and the whole-output bound catches it instead.

Inputs are rounded to their dtype before the float64 reference is computed from them, so
input rounding is never counted. Non-finite outputs (unwritten after the NaN poison fill, or
an overflow) always fail.

**Relative to the baseline** (the op's ``baseline`` implementation, PyTorch for the built-in
ops, measured on the same inputs at the same precision in the same group): the two bounds
above are worst cases, the outer limit; a kernel is held to a small multiple of the library's
own measured error, output by output (issue 37)::

    rel_l2    <= RELATIVE_RATIO x max(baseline rel_l2, floor),          RELATIVE_RATIO = 2.5
    excess_l2 <= RELATIVE_RATIO x max(baseline excess_l2, excess floor)
    floor = u_fp32 (+ c x u_tf32 in TF32)

The floor is only where two *correct* implementations round differently whatever the
baseline's error: Triton's TF32 truncates its inputs where cuBLAS rounds to nearest (on an
H200 2.62-2.67x cuBLAS's rel_l2 at every size, 7.7e-4 against 2.9e-4, inside 2.5 x 2 u_tf32);
one fp32 rounding stands for a near-exact baseline (relu's is exact). Every other correct
kernel of the committed H200 reports is within 1.37x of torch (IEEE fp32 matmul 1.95x), every
one under the interpreter within 1.0x or under the floor (tests/test_judge.py's sweep through
the worker, ``run --interpret``). The old floor, c u + sqrt(K) u_fp32, let a layer norm 72x and
223x less accurate than torch pass in fp32.

``excess_l2`` is the error beyond one rounding to the output's dtype (model.Accuracy): at short
accumulations a 16-bit output's rel_l2 is its own rounding whatever the kernel did, so a
16-bit accumulation hid there (fp16 matmul at K <= 256: under 2x torch's rel_l2). A correct
output differs from round(ref) only where its compute error e = c u_c + sqrt(K) u_fp32 crosses
a rounding boundary (probability e / u_out), by one ulp: the excess floor is 2 u_out
sqrt(e / u_out + 4 / elements), the last term the few crossings a small output may show
where its baseline's showed none. The planted fp16 accumulations read 4.7x (matmul, K = 200)
and 4.8x (linear's dx) their allowance, a sample variance in layer norm 2.4-2.6x.

An op with several outputs (linear_fwbw's y, dx and dW; softmax_fwbw's y and dx) is judged
output by output, each against its own bounds (its own accumulation length; softmax_fwbw's y
as softmax's output) and its own baseline (``judge_outputs``); the case fails on any. Reports before schema 4 have one whole-output statistic and no excess:
they are judged whole, on what they hold.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from envcheck.model import Accuracy
from envcheck.ops import OpSpec, spec

UNIT_ROUNDOFF = {"fp32": 2.0**-24, "tf32": 2.0**-11, "fp16": 2.0**-11, "bf16": 2.0**-8}
SAFETY = 3.0
RELATIVE_RATIO = 2.5

# Roundings in the compute precision per output element, beyond accumulation and storage.
_OP_ROUNDINGS = {"vector_add": 0, "relu": 0, "row_sum": 0, "softmax": 8,
                 # issue 22. layer_norm: subtract the mean, rsqrt (a few ulp), scale, weight, bias.
                 # softmax_fwbw: softmax's 8, then y * dy, dy - sum and the product with y.
                 # Reductions: the sum's roundings are its accumulation; a max is exact.
                 "layer_norm": 6, "softmax_fwbw": 12,
                 **{f"{how}_{over}": 0 for how in ("sum", "max") for over in ("all", "inner", "lead")}}
# Intermediates stored in the case's dtype and read back, beyond the output's own rounding:
# autograd keeps softmax's y in fp16/bf16 and the backward reads it (y and the row sum of
# y * dy each carry its rounding into dx).
_STORED_ROUNDINGS = {"softmax_fwbw": 2}
# The forward output y of a forward + backward op is the forward op's output: rounded as it is,
# with nothing stored before it (linear's y is a matmul, as its gradients are).
_FORWARD_OPS = {"softmax_fwbw": "softmax"}
_MATMUL_ROUNDINGS = {"fp32": 1, "tf32": 2, "fp16": 0, "bf16": 0}


def _spec(op: OpSpec | str) -> OpSpec:
    return op if isinstance(op, OpSpec) else spec(op)


def compute_precision(op: OpSpec | str, dtype: str, precision: str) -> str:
    """The arithmetic actually used: TF32 only for fp32 matmuls asked to use it; element-wise
    and reduction ops compute fp16/bf16 inputs in fp32 (PyTorch and our kernels upcast)."""
    if _spec(op).compute_bound:
        return precision
    return "fp32" if dtype in ("fp16", "bf16") else dtype


def _roundings(op: OpSpec, precision: str, name: str) -> int:
    """Roundings of ``op`` computing what op ``name`` computes (its own name, or the forward
    op of its output y: ``_FORWARD_OPS``)."""
    if op.declared is not None:
        return op.declared.roundings
    return _MATMUL_ROUNDINGS[precision] if op.compute_bound else _OP_ROUNDINGS[name]


@dataclass(frozen=True)
class Tolerance:
    """Both bounds of one output of a case, the precision they were derived for, and the floors
    of the relative criteria (``relative_floor`` for rel_l2, ``excess_floor`` for excess_l2:
    see ``relative_allowance``)."""

    rel_l2: float
    element: float
    precision: str  # the compute precision (``compute_precision``)
    relative_floor: float = 0.0
    excess_floor: float = 0.0


def tolerance(op: OpSpec | str, dtype: str, precision: str, shape: tuple[int, ...], output: str = "",
              elements: int | None = None) -> Tolerance:
    """The bounds of ``output`` (an op's named output, ``ops.OpSpec.outputs``; "" for the whole)
    of a case; ``elements``: how many were compared (the excess floor allows for the few
    boundary crossings a small output may show where its baseline's showed none)."""
    if dtype not in UNIT_ROUNDOFF or precision not in UNIT_ROUNDOFF:
        raise ValueError(f"unknown dtype/precision {dtype}/{precision}")
    op = _spec(op)
    compute = compute_precision(op, dtype, precision)
    name = _FORWARD_OPS.get(op.name, op.name) if output == "y" else op.name
    c = _roundings(op, precision, name)
    u_c, u32, u_out = UNIT_ROUNDOFF[compute], UNIT_ROUNDOFF["fp32"], UNIT_ROUNDOFF[dtype]
    k = max(1, dict(op.outputs(shape)).get(output, op.accumulation(shape)))
    stored = u_out * (1 + _STORED_ROUNDINGS.get(name, 0))
    # The relative floor: where two correct implementations may differ whatever the baseline's
    # own error. TF32 rounds its inputs (c = 2) by truncation in Triton and to nearest in cuBLAS
    # (2.6x cuBLAS's error on an H200); every other precision rounds alike, and one fp32
    # rounding stands for a near-exact baseline (relu's is exact).
    floor = (c * u_c if compute == "tf32" else 0.0) + u32
    # The excess floor: a correct output differs from round(ref) only where its compute error e
    # crosses a rounding boundary (probability about e / u_out), by one ulp (2 u_out relative).
    e = c * u_c + math.sqrt(k) * u32
    crossings = min(1.0, e / u_out) + (4.0 / elements if elements else 0.0)
    return Tolerance(rel_l2=SAFETY * (c * u_c + math.sqrt(k) * u32 + stored),
                     element=SAFETY * (c * u_c + k * u32 + stored), precision=compute,
                     relative_floor=floor, excess_floor=max(2.0 * u_out * math.sqrt(min(1.0, crossings)), floor))


def relative_allowance(baseline: Accuracy, tol: Tolerance) -> float:
    """The largest rel_l2 the relative criterion lets pass, given the baseline's error."""
    return RELATIVE_RATIO * max(baseline.rel_l2, tol.relative_floor)


def excess_allowance(baseline: Accuracy, tol: Tolerance) -> float | None:
    """The largest excess_l2 the excess criterion lets pass (None: the baseline has none)."""
    if baseline.excess_l2 is None:
        return None
    return RELATIVE_RATIO * max(baseline.excess_l2, tol.excess_floor)


@dataclass(frozen=True)
class Verdict:
    """``passed``, and which bounds an output broke: ``nonfinite``, ``rel_l2``, ``element``,
    ``relative``, ``excess``. ``ratio``: the worst of each judged error over its bound (at most 1
    keeps within all). ``relative_allowed``: the largest rel_l2 the relative criterion passes
    (None where it is not judged: the baseline itself, or no baseline measured); ``relative``:
    this rel_l2 over the baseline's and ``relative_limit``: the allowance over the baseline's
    (the RELATIVE_RATIO, or more where the floor decides), both None when the baseline is exact.
    For an op with several outputs each is judged on its own: ``failed_outputs`` names those
    that broke a bound, ``output_ratios`` gives each output's ratio (name, ratio), and the
    numbers are the worst output's (the one of the largest ratio)."""

    passed: bool
    broken: tuple[str, ...]
    ratio: float | None = None
    relative: float | None = None
    relative_allowed: float | None = None
    relative_limit: float | None = None
    failed_outputs: tuple[str, ...] = ()
    output_ratios: tuple[tuple[str, float | None], ...] = ()

    def failed_ratios(self) -> tuple[tuple[str, float | None], ...]:
        """(name, ratio) of each output that broke a bound, in the op's order."""
        return tuple((name, ratio) for name, ratio in self.output_ratios if name in self.failed_outputs)


def judge(acc: Accuracy, tol: Tolerance, baseline: Accuracy | None = None) -> Verdict:
    """The verdict on one output; ``baseline``: the baseline implementation's statistics on the
    same inputs (None: the relative criteria are not judged). Reports of schema 1 lack the
    element statistic and the non-finite count: for them only the whole-output bound is judged
    (their NaN outputs were counted as zeros there, which shows as a large rel_l2); reports
    before schema 4 lack excess_l2, which is then not judged."""
    broken = []
    if acc.nonfinite:
        broken.append("nonfinite")
    if not acc.rel_l2 <= tol.rel_l2:
        broken.append("rel_l2")
    if acc.max_rel_elem is not None and not acc.max_rel_elem <= tol.element:
        broken.append("element")
    ratio = acc.rel_l2 / tol.rel_l2 if tol.rel_l2 else None
    if acc.max_rel_elem is not None and tol.element:
        elem = acc.max_rel_elem / tol.element
        ratio = elem if ratio is None else max(ratio, elem)
    relative = allowed = limit = None
    if baseline is not None:
        allowed = relative_allowance(baseline, tol)
        if baseline.rel_l2 > 0:
            relative, limit = acc.rel_l2 / baseline.rel_l2, allowed / baseline.rel_l2
        if not acc.rel_l2 <= allowed:
            broken.append("relative")
        if allowed > 0:
            ratio = acc.rel_l2 / allowed if ratio is None else max(ratio, acc.rel_l2 / allowed)
        excess = excess_allowance(baseline, tol)
        if excess is not None and acc.excess_l2 is not None:
            if not acc.excess_l2 <= excess:
                broken.append("excess")
            ratio = acc.excess_l2 / excess if ratio is None else max(ratio, acc.excess_l2 / excess)
    return Verdict(not broken, tuple(broken), ratio, relative, allowed, limit)


def judge_outputs(outputs: Mapping[str, Accuracy], tols: Mapping[str, Tolerance],
                  baselines: Mapping[str, Accuracy] | None = None) -> Verdict:
    """The verdict on a case of several outputs: each judged against its own bounds and its own
    baseline, the case failing on any (``Verdict.failed_outputs``)."""
    verdicts = {name: judge(acc, tols[name], (baselines or {}).get(name)) for name, acc in outputs.items()}
    worst = max(verdicts.values(), key=lambda v: -1.0 if v.ratio is None else v.ratio)
    broken = tuple(dict.fromkeys(b for v in verdicts.values() for b in v.broken))
    failed = tuple(name for name, v in verdicts.items() if not v.passed)
    return dataclasses.replace(worst, passed=not broken, broken=broken, failed_outputs=failed,
                               output_ratios=tuple((name, v.ratio) for name, v in verdicts.items()))
