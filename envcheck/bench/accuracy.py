"""Numeric error of an output against a float64 reference, judged for the arithmetic used.

Two numbers per output: the relative L2 error ``||out - ref|| / ||ref||`` (one number for the
whole tensor, robust to a few unlucky elements) and the max absolute error (shows a single
wrong element or a tile written with garbage).

Tolerance, from unit roundoffs (u = 2^-p for p explicit mantissa bits + 1):

    fp32 (IEEE)  u = 2^-24 = 5.96e-8     tf32  u = 2^-11 = 4.88e-4
    fp16         u = 2^-11 = 4.88e-4     bf16  u = 2^-8  = 3.91e-3

An output element goes through three kinds of rounding:

* rounding inside the op's arithmetic, ``c_op`` roundings of the *compute* precision: a TF32
  matmul rounds both inputs to TF32 before multiplying (c = 2); an IEEE fp32 matmul rounds
  each product (c = 1); fp16/bf16 matmul products are exact in the fp32 accumulator (c = 0);
  softmax does a subtraction, an exp (a few ulp with the fast exp2 GPUs use) and a division
  in fp32 (c = 8 covers them); vector_add, relu and row_sum do nothing beyond the next two.
* accumulation of K terms in fp32 (matmul's K, the row length of softmax and row_sum): the
  rounding errors of a long sum of random-signed terms add like a random walk, so they grow
  like sqrt(K) u_fp32 relative to the result (the probabilistic bound of Higham and Mary,
  2019; worst-case bounds grow like K u and would hide real bugs).
* the final rounding to the storage dtype: u_out.

    tolerance = SAFETY x (c_op x u_compute + sqrt(K) x u_fp32 + u_out),   SAFETY = 3

Inputs are random and zero-mean, so the input-rounding errors of a dot product add randomly
too and do not grow with K. The reference is computed from the *same rounded inputs*, so
rounding the inputs to the dtype is never counted. Checks against the reference
measurements: TF32 matmul 512^3 measured 7.7e-4, tolerance 2.9e-3; IEEE fp32 matmul 512^3
measured 2e-7, tolerance 4.4e-6; bf16 matmul measured ~2.4e-3, tolerance 1.2e-2. A wrong
tile, a dropped K block or a row left unwritten gives errors of 1e-2 to 1, far above each.

Non-finite outputs (NaN from the poison fill left unwritten, inf from overflow) always fail.
They count as zeros in both norms, so the numbers stay finite and JSON-safe and say how much
of the output is missing (an output never written has rel_l2 = 1.0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from envcheck.model import NumericError

UNIT_ROUNDOFF = {"fp32": 2.0**-24, "tf32": 2.0**-11, "fp16": 2.0**-11, "bf16": 2.0**-8}
SAFETY = 3.0

# Roundings in the compute precision per output element, beyond accumulation and storage.
_OP_ROUNDINGS = {"vector_add": 0, "relu": 0, "row_sum": 0, "softmax": 8}
_MATMUL_ROUNDINGS = {"fp32": 1, "tf32": 2, "fp16": 0, "bf16": 0}


def compute_precision(op: str, dtype: str, precision: str) -> str:
    """The arithmetic actually used: TF32 only for fp32 matmuls asked to use it; element-wise
    and reduction ops compute fp16/bf16 inputs in fp32 (PyTorch and our kernels upcast)."""
    if op == "matmul":
        return precision
    return "fp32" if dtype in ("fp16", "bf16") else dtype


def tolerance(op: str, dtype: str, precision: str, accumulation: int) -> float:
    """Bound on the relative L2 error of ``op`` (see the module docstring for the derivation)."""
    if dtype not in UNIT_ROUNDOFF or precision not in UNIT_ROUNDOFF:
        raise ValueError(f"unknown dtype/precision {dtype}/{precision}")
    if op == "matmul":
        c, u_c = _MATMUL_ROUNDINGS[precision], UNIT_ROUNDOFF[precision]
    else:
        c, u_c = _OP_ROUNDINGS[op], UNIT_ROUNDOFF[compute_precision(op, dtype, precision)]
    u32 = UNIT_ROUNDOFF["fp32"]
    k = max(1, int(accumulation))
    return SAFETY * (c * u_c + math.sqrt(k) * u32 + UNIT_ROUNDOFF[dtype])


@dataclass(frozen=True)
class Comparison:
    """Result of comparing one output with its reference."""

    error: NumericError
    elements: int
    nonfinite: int  # outputs that were NaN or inf (unwritten, or overflowed)

    @property
    def message(self) -> str | None:
        """One line for the Case when the output is wrong, else None."""
        if self.nonfinite:
            return (f"{self.nonfinite} of {self.elements} outputs are NaN/inf "
                    "(left unwritten after the NaN poison fill, or overflowed)")
        if not self.error.passed:
            return (f"relative error {self.error.rel_l2:.2e} exceeds the {self.error.precision} "
                    f"tolerance {self.error.tolerance:.1e}")
        return None


def judge(err_sq: float, ref_sq: float, max_abs: float, nonfinite: int, elements: int,
          precision: str, tol: float) -> Comparison:
    """A Comparison from accumulated sums of squares (pure: the tests feed it numbers)."""
    if ref_sq > 0:
        rel = math.sqrt(err_sq / ref_sq)
    else:
        # An all-zero reference (relu of all-negative input) has no scale: the absolute norm
        # of the error stands in, so anything nonzero still shows.
        rel = math.sqrt(err_sq)
    passed = nonfinite == 0 and math.isfinite(rel) and rel <= tol
    return Comparison(NumericError(rel_l2=rel, max_abs=max_abs, tolerance=tol, precision=precision, passed=passed),
                      elements, nonfinite)


def compare(out: Any, reference: Iterable[tuple[slice, Any]], precision: str, tol: float) -> Comparison:
    """Compare ``out`` (a torch tensor) with float64 reference chunks ``(slice, tensor)`` along dim 0.

    The sums are accumulated in float64 on the output's device, one chunk at a time, so the
    comparison needs one chunk of float64 memory, never a float64 copy of the whole output.
    """
    import torch

    err_sq = ref_sq = 0.0
    max_abs = 0.0
    nonfinite = 0
    elements = 0
    for sl, ref in reference:
        o = out[sl].double()
        bad = ~torch.isfinite(o)
        n_bad = int(bad.sum().item())
        if n_bad:
            o = torch.where(bad, torch.zeros_like(o), o)
        diff = o - ref
        err_sq += float(torch.sum(diff * diff).item())
        ref_sq += float(torch.sum(ref * ref).item())
        if diff.numel():
            max_abs = max(max_abs, float(diff.abs().max().item()))
        nonfinite += n_bad
        elements += o.numel()
    return judge(err_sq, ref_sq, max_abs, nonfinite, elements, precision, tol)


def poison(out: Any) -> None:
    """Fill a floating-point output with NaN so elements a kernel fails to write stay visible."""
    if out.is_floating_point():
        out.fill_(float("nan"))
