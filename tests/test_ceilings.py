"""The measured ceilings: which kernels at which sizes, and their raw runs from one warmed,
interleaved window (a fake clock and fake graphs stand in for the GPU)."""

from __future__ import annotations

import pytest
from fake_clock import FakeClock

from envcheck.bench import worker as ceilings
from envcheck.bench.timer import GRAPH, Region, Timer
from envcheck.model import CeilingRun, Note, Settings


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    dev = FakeClock()
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: dev))
    return dev


def test_matmul_shapes_for_every_precision_smallest_first_within_free_memory(monkeypatch) -> None:
    made: list[tuple[str, tuple[int, ...]]] = []

    def fake(precision, shape, seed):
        made.append((precision, shape))
        return ceilings.Kernel("matmul", precision, shape, lambda: None, precision)

    monkeypatch.setattr(ceilings, "matmul_kernel", fake)
    kernels = ceilings.matmul_kernels(("fp16", "bf16", "tf32"), 80 << 30, seed=1)
    assert [k.shape for k in kernels[:3]] == [(4096, 4096, 4096)] * 3  # every precision's small shape first
    assert len(kernels) == 9 and {k.precision for k in kernels} == {"fp16", "bf16", "tf32"}
    # A small card: the operands of all of them must fit in half its free memory together.
    made.clear()
    small = ceilings.matmul_kernels(("fp16", "bf16", "tf32"), 2 << 30, seed=1)
    need = {"fp16": 2, "bf16": 2, "tf32": 4}
    total = sum((m * k + k * n + m * n) * need[p] for p, (m, n, k) in made)
    assert small and total <= ceilings.MEMORY_FRACTION * (2 << 30)
    assert made[0] == ("fp16", (4096, 4096, 4096))
    assert (8192, 8192, 16384) not in {shape for _, shape in made}


def test_no_bandwidth_kernels_when_no_buffer_far_past_l2_fits() -> None:
    # Three buffers in half of 300 MiB: 50 MiB each, under 8x a 50 MiB L2. Nothing is allocated.
    assert ceilings.bandwidth_kernels(300 << 20, 50 << 20) == []


def test_each_kernel_is_sampled_in_one_warmed_window_and_failures_stay_its_own(device: FakeClock) -> None:
    costs = {"copy": 500.0, "read": 260.0, "fill": 250.0, "triad": 760.0}
    kernels = [ceilings.Kernel(name, "fp32", (1 << 28,), lambda: None) for name in (*costs, "broken")]
    warm_at: list[float] = []

    def capture(timer: Timer, k: ceilings.Kernel) -> Region:
        if k.kernel == "broken":
            raise RuntimeError("operation not permitted when stream is capturing")
        cost = costs[k.kernel]

        def replay() -> None:
            if not warm_at:
                warm_at.append(device.t_us)
            device.t_us += 2 * cost + 3.0  # two calls per graph and the replay's own cost
        return Region(replay, GRAPH, 2)

    timer = Timer("cuda", Settings(warmup_ms=1, rep_ms=20, min_samples=10, max_samples=150))
    got = list(ceilings.measure(timer, kernels, capture))
    failed = [g for g in got if isinstance(g, tuple)]
    runs = [g for g in got if isinstance(g, CeilingRun)]
    assert [k.kernel for k, _ in failed] == ["broken"] and isinstance(failed[0][1], RuntimeError)
    assert [r.kernel for r in runs] == ["copy", "read", "fill", "triad"]
    for r in runs:
        assert r.timing.method == "cuda_graph" and r.timing.calls_per_sample == 2 and r.timing.n >= 10
        assert r.timing.median_us == pytest.approx(costs[r.kernel] + 1.5)
        assert r.shape == (1 << 28,) and r.precision is None
    # All of them ran back to back for WARMUP_MS before the first sample was taken.
    assert device.t_us - warm_at[0] >= ceilings.WARMUP_MS * 1e3


def test_a_kernel_that_cannot_be_measured_is_a_note_with_its_parameters() -> None:
    k = ceilings.Kernel("matmul", "fp32", (8192, 8192, 16384), lambda: None, "tf32")
    assert ceilings.failure_note(k, "OutOfMemoryError: CUDA out of memory") == Note(
        "ceiling.failed", {"kernel": "matmul", "dtype": "fp32", "shape": (8192, 8192, 16384),
                           "detail": "OutOfMemoryError: CUDA out of memory", "precision": "tf32"})
