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

import planted  # noqa: E402 - tests/ is on the path of a script run from it
import torch

from envcheck.bench import accuracy, impls, interpret


def matmul_fp16_acc(a, b, out, precision):
    return planted.matmul_acc16(a, b, out, precision)


def row_sum_drop_last(x, out):
    from envcheck.bench.kernels import row_sum

    return row_sum(x[:, :-1], out)  # the bug: one column short


PLANTED = {"matmul": matmul_fp16_acc, "row_sum": row_sum_drop_last}


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


# Cases per mode: (op, dtype, precision, shape), each measured for every implementation listed. The matmul's K:
# 128 (left out of what test_judge requires caught), 256 (aligned) and 520 (ragged: 32.5 tiles of 16; 1000 took
# twice as long to interpret); the row sums: 256 rows (the error within 1% of 1/sqrt(cols)) and long rows.
PLANTED_CASES = [("matmul", "fp16", "fp16", (128, 128, k)) for k in (128, 256, 520)] + [
    ("row_sum", "bf16", "bf16", (256, 8192)), ("row_sum", "bf16", "bf16", (32, 32768))]


def main(mode: str) -> None:
    out = []
    if mode == "planted":
        for op, dtype, precision, shape in PLANTED_CASES:
            for impl in ("torch", "triton", "planted"):
                out.append(stats(op, impl, dtype, precision, shape))
    else:  # "sweep": the suite's ops at every dtype, at sizes the interpreter runs in seconds
        # Per op: a size its blocks divide, a ragged one (masked tails), and for the reductions and the
        # matmul the longest accumulation (where a 16-bit error grows). An elementwise op's error does not
        # grow with its size; (1000, 4097) rows, a million elements and 256^3 added no property to these
        # and were 60% of the child's time.
        vector = [(1 << 10,), (100_003,)]
        rows = [(257, 1025), (64, 32768)]
        mm = [(128, 128, 128), (255, 257, 253), (128, 128, 1000)]
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
    interpret.fix_scalar_index()
    interpret.round_bf16_to_nearest()
    main(sys.argv[1])
