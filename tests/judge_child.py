"""Error statistics of envcheck's Triton kernels, two planted bugs and PyTorch on the same
inputs, under the Triton interpreter: ``TRITON_INTERPRET=1 python tests/judge_child.py MODE``.

Run as a child process by tests/test_judge.py (the interpreter must be chosen before Triton
decorates a kernel, and must never leak into other tests). Prints one JSON list: per case its
op, implementation, dtype, precision, shape and ``model.Accuracy`` fields, computed with the
worker's own code (bench/impls.py inputs, bench/accuracy.py reference and statistics).

The planted bugs, as kernel authors write them:
* ``matmul_fp16_acc``: an fp16 matmul accumulating in fp16 (``tl.dot(..., out_dtype=tl.float16)``);
* ``row_sum_drop_last``: a row sum launched over ``cols - 1`` columns (an off-by-one).
"""

from __future__ import annotations

import dataclasses
import json
import sys

import torch
import triton
import triton.language as tl

from envcheck.bench import accuracy, impls


@triton.jit
def _matmul_fp16_acc(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float16)  # the bug: the running sum is fp16
    for k in range(0, K, BK):
        kk = k + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc, out_dtype=tl.float16)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_fp16_acc(a, b, out, precision):
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, 32), triton.cdiv(n, 32))
    _matmul_fp16_acc[grid](a, b, out, m, n, k, *a.stride(), *b.stride(), *out.stride(), BM=32, BN=32, BK=16)
    return out


def row_sum_drop_last(x, out):
    from envcheck.bench.kernels import row_sum

    return row_sum(x[:, :-1], out)  # the bug: one column short


PLANTED = {"matmul": matmul_fp16_acc, "row_sum": row_sum_drop_last}


def round_bf16_to_nearest() -> None:
    """Make the interpreter store bf16 as a GPU does: rounded to nearest even.

    triton 3.6's interpreter converts fp32 to bf16 by dropping the low 16 bits (NumPy has no
    bfloat16; ``cast_impl`` passes no rounding mode), which is round-toward-zero: biased, with
    2-3x the RMS error of round-to-nearest. A GPU's ``.to(tl.bfloat16)`` rounds to nearest even
    (on an H200 Triton's bf16 outputs have exactly torch's error), so the interpreter would
    judge every correct bf16 kernel 2-3x worse than it is.
    """
    import numpy as np
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32).astype(np.uint64)
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            return interpreter.TensorHandle(rounded, dst_type.scalar)
        return original(self, src, dst_type)

    builder.cast_impl = cast_impl


def stats(op, impl, dtype, precision, shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    inputs = impls.make_inputs(op, shape, dtype, "cpu", gen)
    out = impls.make_output(op, shape, dtype, "cpu")
    if impl == "torch":
        fn = impls.torch_impl(op, inputs, out)
    elif impl == "triton":
        fn = impls.triton_impl(op, inputs, out, precision)
    else:
        bug = PLANTED[op]
        args = list(inputs.values())
        fn = (lambda: bug(*args, out, precision)) if op == "matmul" else (lambda: bug(*args, out))
    result, _ = accuracy.checked_call(fn, out)
    acc = accuracy.compare(result, accuracy.reference_chunks(op, inputs), dtype)
    return {"op": op, "impl": impl, "dtype": dtype, "precision": precision, "shape": list(shape),
            **dataclasses.asdict(acc)}


# Cases per mode: (op, dtype, precision, shape), each measured for every implementation listed.
PLANTED_CASES = [("matmul", "fp16", "fp16", (128, 128, k)) for k in (128, 256, 1000)] + [
    ("row_sum", "bf16", "bf16", (256, 8192)), ("row_sum", "bf16", "bf16", (64, 32768))]


def main(mode: str) -> None:
    out = []
    if mode == "planted":
        for op, dtype, precision, shape in PLANTED_CASES:
            for impl in ("torch", "triton", "planted"):
                out.append(stats(op, impl, dtype, precision, shape))
    else:  # "sweep": the suite's ops at every dtype, at sizes the interpreter runs in seconds
        vector = [(1 << 10,), (100_003,), (1 << 20,)]
        rows = [(257, 1025), (1000, 4097), (64, 32768)]
        mm = [(128, 128, 128), (255, 257, 253), (256, 256, 256), (128, 128, 1000)]
        for dtype in ("fp32", "fp16", "bf16"):
            for op, shapes in (("vector_add", vector), ("relu", vector), ("softmax", rows), ("row_sum", rows)):
                for shape in shapes:
                    out += [stats(op, impl, dtype, dtype, shape) for impl in ("torch", "triton")]
            precisions = ("fp32", "tf32") if dtype == "fp32" else (dtype,)
            for precision in precisions:
                for shape in mm:
                    out += [stats("matmul", impl, dtype, precision, shape) for impl in ("torch", "triton")]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    from tests.test_kernels import _fix_interpreter_scalar_index

    _fix_interpreter_scalar_index()
    round_bf16_to_nearest()
    main(sys.argv[1])
