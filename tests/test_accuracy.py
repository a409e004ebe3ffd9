"""Accuracy statistics against float64 references: correct outputs stay small, planted bugs show.

Until the analysis layer's tolerance formula exists these tests hold the statistics against a
documented bound: a planted bug gives ``max_rel_elem`` above ``BUG_BOUND`` (or non-finite
outputs), while correct outputs on the same inputs stay under ``CORRECT_BOUND`` of their
precision: fp32 1e-4 (a few fp32 roundings), fp16 / bf16 1e-2 (the storage rounding, at most
2^-8 = 3.9e-3 of an element's magnitude, plus fp32 accumulation).
"""

from __future__ import annotations

import math
import weakref

import pytest

torch = pytest.importorskip("torch")

from envcheck.bench import accuracy, impls  # noqa: E402

BUG_BOUND = 1e-2
CORRECT_BOUND = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
DT = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def inputs_for(op: str, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict:
    return impls.make_inputs(op, shape, dtype, "cpu", torch.Generator().manual_seed(seed))


def correct(op: str, inputs: dict, dtype: str):
    """What a correct kernel returns: fp32 arithmetic on the rounded inputs, one rounding to dtype."""
    f = {k: v.float() for k, v in inputs.items()}
    if op == "vector_add":
        out = f["x"] + f["y"]
    elif op == "relu":
        out = torch.relu(f["x"])
    elif op == "softmax":
        out = torch.softmax(f["x"], dim=-1)
    elif op == "row_sum":
        out = f["x"].sum(dim=-1)
    else:
        out = f["a"] @ f["b"]
    return out.to(DT[dtype])


def stats(out, op: str, inputs: dict, dtype: str, chunk: int = 1 << 16):
    return accuracy.compare(out, accuracy.reference_chunks(op, inputs, chunk), dtype)


# Ragged shapes (no block size divides them) beside round ones, as the suites run them.
SHAPES = {
    "vector_add": [(1 << 16,), (100_003,)],
    "relu": [(1 << 16,), (100_003,)],
    "softmax": [(64, 1024), (37, 4097)],
    "row_sum": [(64, 1024), (37, 4097)],
    "matmul": [(64, 64, 64), (100, 101, 99)],
}


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("op", list(SHAPES))
def test_correct_outputs_stay_under_the_precision_bound(op: str, dtype: str) -> None:
    for shape in SHAPES[op]:
        inputs = inputs_for(op, shape, dtype)
        s = stats(correct(op, inputs, dtype), op, inputs, dtype)
        assert s.nonfinite == 0 and s.elements == impls.spec(op).output_elements(shape)
        assert s.max_rel_elem < CORRECT_BOUND[dtype], (op, dtype, shape, s)
        assert s.rel_l2 < CORRECT_BOUND[dtype] and s.max_abs >= 0


def test_fp16_softmax_underflow_is_not_an_error() -> None:
    """Softmax values below fp16's smallest normal (6.1e-5) lose precision or flush to zero
    in a correct kernel too: the magnitude floor keeps them at the unit roundoff, not 1."""
    inputs = inputs_for("softmax", (16, 4097), "fp16")
    out = correct("softmax", inputs, "fp16")
    assert (out == 0).any() and ((out > 0) & (out < 2.0**-14)).any()  # flushed and subnormal elements
    assert stats(out, "softmax", inputs, "fp16").max_rel_elem <= 2.0**-11 * 1.01


# --------------------------------------------------------------------------- planted bugs


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_a_few_sign_flipped_matmul_outputs_show(dtype: str) -> None:
    inputs = inputs_for("matmul", (256, 256, 1024), dtype, seed=3)
    good = correct("matmul", inputs, dtype)
    bad = good.clone()
    gen = torch.Generator().manual_seed(5)
    rows = torch.randint(0, 256, (4,), generator=gen)
    cols = torch.randint(0, 256, (4,), generator=gen)
    bad[rows, cols] = -bad[rows, cols]
    s = stats(bad, "matmul", inputs, dtype)
    assert s.max_rel_elem > BUG_BOUND
    # One relative L2 error over the whole output dilutes 4 wrong elements by the output's size
    # (sqrt(8 / 65536) here; at 4096^2 it passed schema 1's tolerance): the element-wise
    # statistic does not.
    assert s.max_rel_elem > 10 * s.rel_l2


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_a_zeroed_block_of_a_vector_add_shows(dtype: str) -> None:
    n = 1 << 20
    inputs = inputs_for("vector_add", (n,), dtype)
    bad = correct("vector_add", inputs, dtype)
    bad[500_000:502_000] = 0  # one 2000-element block a kernel skipped (a wrong grid)
    s = stats(bad, "vector_add", inputs, dtype)
    assert s.max_rel_elem > 0.5 and s.nonfinite == 0


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_softmax_without_max_subtraction_overflows_and_shows(dtype: str) -> None:
    """envcheck's softmax inputs sit at +100: exp overflows fp32 above 88.7."""
    inputs = inputs_for("softmax", (32, 1000), dtype)
    x = inputs["x"].float()
    naive = torch.exp(x) / torch.exp(x).sum(dim=-1, keepdim=True)
    s = stats(naive.to(DT[dtype]), "softmax", inputs, dtype)
    assert s.nonfinite > 0
    # The correct kernel on the same inputs subtracts the row max and is fine.
    assert stats(correct("softmax", inputs, dtype), "softmax", inputs, dtype).nonfinite == 0


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_matmul_dropping_its_last_k_tile_shows(dtype: str) -> None:
    m, n, k = 128, 130, 999  # K = 31 tiles of 32 and a ragged 7: the tile a wrong loop bound drops
    inputs = inputs_for("matmul", (m, n, k), dtype)
    a, b = inputs["a"].float(), inputs["b"].float()
    kept = k // 32 * 32
    bad = (a[:, :kept] @ b[:kept]).to(DT[dtype])
    assert stats(bad, "matmul", inputs, dtype).max_rel_elem > BUG_BOUND


def test_an_unwritten_tail_shows_as_nonfinite() -> None:
    inputs = inputs_for("relu", (100_003,), "fp32")
    out = torch.full((100_003,), math.nan)
    out[:-3] = correct("relu", inputs, "fp32")[:-3]  # a mask that drops the last partial block
    s = stats(out, "relu", inputs, "fp32")
    assert s.nonfinite == 3 and s.elements == 100_003


def test_a_row_sum_off_by_one_row_shows() -> None:
    inputs = inputs_for("row_sum", (1000, 4097), "fp32")
    good = correct("row_sum", inputs, "fp32")
    bad = torch.cat([good[1:], good[-1:]])  # every row gets its neighbour's sum
    assert stats(bad, "row_sum", inputs, "fp32").max_rel_elem > BUG_BOUND


def test_an_element_shifted_by_one_shows() -> None:
    inputs = inputs_for("vector_add", (4097,), "bf16")
    good = correct("vector_add", inputs, "bf16")
    bad = torch.cat([good[1:], good[-1:]])
    assert stats(bad, "vector_add", inputs, "bf16").max_rel_elem > BUG_BOUND


# --------------------------------------------------------------------------- the statistics themselves


def test_never_written_output_has_relative_error_one() -> None:
    inputs = inputs_for("vector_add", (512,), "fp32")
    s = stats(torch.full((512,), math.nan), "vector_add", inputs, "fp32")
    assert s.nonfinite == 512 and s.rel_l2 == pytest.approx(1.0) and s.max_rel_elem == pytest.approx(1.0, abs=1e-6)


def test_an_all_zero_reference_uses_the_absolute_norm_and_a_zero_magnitude_stays_finite() -> None:
    x = -torch.rand(64) - 0.5  # relu of all-negative input: reference all zero
    s = stats(torch.zeros(64), "relu", {"x": x}, "fp32")
    assert s.rel_l2 == 0.0 and s.max_rel_elem == 0.0
    x[0] = 0.0  # |x| = 0 there: an error at that element is divided by the magnitude floor
    wrong = torch.zeros(64)
    wrong[0] = 1e-3
    s = stats(wrong, "relu", {"x": x}, "fp32")
    assert s.rel_l2 == pytest.approx(1e-3) and math.isfinite(s.max_rel_elem) and s.max_rel_elem > 1e30
    assert accuracy.statistics(float("nan"), 1.0, 0.0, float("nan"), 0, 1).max_rel_elem == accuracy.LARGEST


def test_chunked_reference_equals_whole_reference() -> None:
    for op, shape in (("softmax", (50, 33)), ("row_sum", (50, 33)), ("matmul", (40, 30, 20)),
                      ("vector_add", (1000,))):
        inputs = inputs_for(op, shape, "fp32")
        out = correct(op, inputs, "fp32")
        whole = stats(out, op, inputs, "fp32", chunk=1 << 30)
        pieces = stats(out, op, inputs, "fp32", chunk=97)
        assert pieces.rel_l2 == pytest.approx(whole.rel_l2, rel=1e-9)
        assert pieces.max_abs == pytest.approx(whole.max_abs, rel=1e-12)
        assert pieces.max_rel_elem == pytest.approx(whole.max_rel_elem, rel=1e-12)  # float64 BLAS blocking
        assert pieces.elements == whole.elements


def test_magnitudes_are_the_op_on_absolute_inputs() -> None:
    x, y = torch.tensor([1.0, -2.0]), torch.tensor([-3.0, 0.5])
    (c,) = accuracy.reference_chunks("vector_add", {"x": x, "y": y})
    assert c.ref.tolist() == [-2.0, -1.5] and c.mag.tolist() == [4.0, 2.5]
    a, b = torch.tensor([[1.0, -1.0]]), torch.tensor([[2.0], [3.0]])
    (c,) = accuracy.reference_chunks("matmul", {"a": a, "b": b})
    assert c.ref.tolist() == [[-1.0]] and c.mag.tolist() == [[5.0]]
    (c,) = accuracy.reference_chunks("row_sum", {"x": torch.tensor([[1.0, -4.0]])})
    assert c.ref.tolist() == [-3.0] and c.mag.tolist() == [5.0]


# --------------------------------------------------------------------------- poisoned outputs


def test_an_implementation_writing_into_out_is_checked_on_poison() -> None:
    out = torch.zeros(100)

    def lazy():
        out[:99] = 1.0  # forgets the last element
        return out

    result, poisoned = accuracy.checked_call(lazy, out)
    assert poisoned and result is out and math.isnan(float(out[99]))


class Pool:
    """An allocator of one block size: a tensor it hands out goes back to the pool when its
    holder drops it, and the next request gets that block again (``reuse``), as the CUDA caching
    allocator does for a same-size request on the same stream; or always a fresh block."""

    def __init__(self, reuse: bool) -> None:
        self.reuse = reuse
        self.free: list = []

    def alloc(self, n: int):
        block = self.free.pop() if self.reuse and self.free else torch.zeros(n)
        handed = block[:]  # a new tensor object on the same memory
        weakref.finalize(handed, self.free.append, block)
        return handed


def test_an_allocating_implementation_is_checked_on_its_poisoned_block() -> None:
    """torch.compile returns a fresh output each call: its first output is poisoned and freed,
    the second call gets that block back and is the one checked, so an element it never writes
    stays NaN."""
    pool = Pool(reuse=True)

    def compiled_forgetting_one():
        out = pool.alloc(100)
        out[1:] = 2.0
        return out

    result, poisoned = accuracy.checked_call(compiled_forgetting_one, torch.zeros(100))
    assert poisoned and math.isnan(float(result[0])) and float(result[1]) == 2.0
    s = stats(result, "relu", {"x": torch.full((100,), 2.0)}, "fp32")
    assert s.nonfinite == 1


def test_an_allocator_that_does_not_reuse_the_block_is_reported() -> None:
    pool = Pool(reuse=False)
    result, poisoned = accuracy.checked_call(lambda: pool.alloc(100), torch.zeros(100))
    assert not poisoned and float(result[0]) == 0.0  # an unwritten element would pass unseen: said so


def test_several_allocated_outputs_are_each_poisoned_and_joined_after_the_call() -> None:
    """Autograd allocates softmax_fwbw's y and dx apart: each gets the two-call treatment, and the
    check joins them (y over dx, as the preallocated output lays them) outside the call."""
    pool = Pool(reuse=True)

    def forward_backward_forgetting_one_dx():
        y, dx = pool.alloc(6), pool.alloc(6)
        y[:] = 1.0
        dx[1:] = 2.0
        return y, dx

    result, poisoned = accuracy.checked_call(forward_backward_forgetting_one_dx, torch.zeros(12))
    assert poisoned and result.shape == (12,)
    assert float(result[0]) == 1.0 and math.isnan(float(result[6])) and float(result[7]) == 2.0
