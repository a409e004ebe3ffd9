"""Numeric error against float64 references: tolerances, NaN/inf, poisoned outputs."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from envcheck.bench import accuracy, ops  # noqa: E402


def test_tolerances_from_unit_roundoff() -> None:
    u32, u_tf32, u_bf16 = 2.0**-24, 2.0**-11, 2.0**-8
    tf32 = accuracy.tolerance("matmul", "fp32", "tf32", 512)
    assert tf32 == pytest.approx(3 * (2 * u_tf32 + math.sqrt(512) * u32 + u32))
    # The reference measurements: TF32 512^3 7.7e-4 passes, IEEE 2e-7 passes.
    assert 7.7e-4 < tf32 < 5e-3
    ieee = accuracy.tolerance("matmul", "fp32", "fp32", 512)
    assert 2e-7 < ieee < 1e-5
    # A TF32 result judged as IEEE fp32 fails: the error belongs to the arithmetic, not a bug.
    assert 7.7e-4 > ieee
    bf16 = accuracy.tolerance("matmul", "bf16", "bf16", 4096)
    assert bf16 == pytest.approx(3 * (64 * u32 + u_bf16))
    # Accumulation grows like sqrt(K).
    assert accuracy.tolerance("row_sum", "fp32", "fp32", 40000) > accuracy.tolerance("row_sum", "fp32", "fp32", 100)
    with pytest.raises(ValueError):
        accuracy.tolerance("matmul", "fp64", "fp64", 8)


def _compare(out, op: str, inputs, dtype: str, precision: str):
    shape = {"vector_add": lambda: (inputs["x"].numel(),), "relu": lambda: (inputs["x"].numel(),),
             "softmax": lambda: tuple(inputs["x"].shape), "row_sum": lambda: tuple(inputs["x"].shape),
             "matmul": lambda: (inputs["a"].shape[0], inputs["b"].shape[1], inputs["a"].shape[1])}[op]()
    tol = accuracy.tolerance(op, dtype, precision, ops.accumulation_length(op, shape))
    return accuracy.compare(out, ops.reference_chunks(op, inputs, chunk_elements=1000), precision, tol)


def test_torch_fp32_results_pass_and_error_is_small() -> None:
    g = torch.Generator().manual_seed(0)
    inputs = ops.make_inputs("matmul", (96, 80, 64), "fp32", "cpu", g)
    out = inputs["a"] @ inputs["b"]
    c = _compare(out, "matmul", inputs, "fp32", "fp32")
    assert c.error.passed and c.nonfinite == 0 and c.message is None
    assert 0 < c.error.rel_l2 < 1e-6
    assert c.elements == 96 * 80


def test_bf16_result_judged_as_bf16_passes_but_not_as_fp32() -> None:
    g = torch.Generator().manual_seed(1)
    inputs = ops.make_inputs("softmax", (64, 300), "fp32", "cpu", g)
    out = torch.softmax(inputs["x"], dim=-1).to(torch.bfloat16)  # rounded to bf16 storage
    as_bf16 = _compare(out, "softmax", {"x": inputs["x"].to(torch.bfloat16)}, "bf16", "bf16")
    # The reference is of the same (bf16-rounded) input, so only the output rounding counts.
    assert as_bf16.error.passed
    as_fp32 = _compare(out.float(), "softmax", inputs, "fp32", "fp32")
    assert not as_fp32.error.passed
    assert "exceeds the fp32 tolerance" in as_fp32.message


def test_poisoned_unwritten_elements_fail() -> None:
    g = torch.Generator().manual_seed(2)
    inputs = ops.make_inputs("vector_add", (5000,), "fp32", "cpu", g)
    out = torch.empty(5000)
    accuracy.poison(out)
    assert torch.isnan(out).all()
    out[:4990] = inputs["x"][:4990] + inputs["y"][:4990]  # a kernel that misses the tail
    c = _compare(out, "vector_add", inputs, "fp32", "fp32")
    assert not c.error.passed
    assert c.nonfinite == 10
    assert "10 of 5000 outputs are NaN/inf" in c.message
    # Unwritten elements count as zeros: finite, JSON-safe, and about sqrt(10/5000) of the norm.
    assert math.isfinite(c.error.rel_l2) and 0.02 < c.error.rel_l2 < 0.08


def test_never_written_output_has_relative_error_one() -> None:
    g = torch.Generator().manual_seed(3)
    inputs = ops.make_inputs("relu", (2048,), "fp32", "cpu", g)
    out = torch.empty(2048)
    accuracy.poison(out)
    c = _compare(out, "relu", inputs, "fp32", "fp32")
    assert c.error.rel_l2 == pytest.approx(1.0)
    assert c.nonfinite == 2048 and not c.error.passed


def test_inf_never_passes_even_when_tiny_elsewhere() -> None:
    g = torch.Generator().manual_seed(4)
    inputs = ops.make_inputs("row_sum", (50, 40), "fp32", "cpu", g)
    out = inputs["x"].double().sum(dim=-1).float()
    out[7] = float("inf")
    c = _compare(out, "row_sum", inputs, "fp32", "fp32")
    assert c.nonfinite == 1 and not c.error.passed


def test_wrong_values_fail_with_max_abs() -> None:
    g = torch.Generator().manual_seed(5)
    inputs = ops.make_inputs("matmul", (64, 64, 64), "fp16", "cpu", g)
    out = (inputs["a"].float() @ inputs["b"].float()).half()
    out[3, 5] += 4.0  # one corrupted element
    c = _compare(out, "matmul", inputs, "fp16", "fp16")
    assert c.error.max_abs == pytest.approx(4.0, rel=0.01)
    assert not c.error.passed


def test_judge_all_zero_reference_uses_absolute_norm() -> None:
    assert accuracy.judge(0.0, 0.0, 0.0, 0, 10, "fp32", 1e-6).error.passed
    c = accuracy.judge(1e-4, 0.0, 1e-2, 0, 10, "fp32", 1e-6)
    assert c.error.rel_l2 == pytest.approx(1e-2) and not c.error.passed


def test_chunked_reference_equals_whole_reference() -> None:
    g = torch.Generator().manual_seed(6)
    inputs = ops.make_inputs("softmax", (37, 53), "fp32", "cpu", g)
    chunks = list(ops.reference_chunks("softmax", inputs, chunk_elements=53 * 5))
    assert len(chunks) == 8  # 5 rows per chunk, 37 rows
    whole = torch.cat([ref for _, ref in chunks])
    assert torch.allclose(whole, torch.softmax(inputs["x"].double(), dim=-1))
    assert whole.dtype == torch.float64
