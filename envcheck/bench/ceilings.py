"""The measured ceilings, raw samples the analysis takes the best of (no case may beat a ceiling): bandwidth
(``copy``, ``read``, ``fill``, ``triad`` far past L2) and cuBLAS matmuls (``MATMUL_SHAPES`` per precision the suite
measures). Timed as cases are, first, in two windows warmed ``WARMUP_MS`` each: the matmuls at the power cap, the
memory-bound kernels never beside tensor-core load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from envcheck.bench import impls
from envcheck.bench.graphs import graph_region
from envcheck.bench.l2 import DEFAULT_L2_BYTES
from envcheck.bench.timer import Region, Timer
from envcheck.model import CeilingRun, Note, Timing
from envcheck.ops import ITEMSIZE

BANDWIDTH_BUFFER_BYTES = 1 << 30
MIN_L2_MULTIPLE = 8
MATMUL_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 16384))
WARMUP_MS = 500.0
MEMORY_FRACTION = 0.5  # of free memory: the CUDA context, cuBLAS workspaces and the graphs' pools need the rest
TRIAD_SCALAR = 0.5


@dataclass(frozen=True)
class Kernel:
    """One ceiling kernel bound to its buffers, and what its CeilingRun records."""

    kernel: str
    dtype: str
    shape: tuple[int, ...]
    fn: Callable[[], object]
    precision: str | None = None


def bandwidth_kernels(free_bytes: int, l2_bytes: int | None) -> list[Kernel]:
    """copy, read, fill and triad over three fp32 buffers from free memory; [] where they cannot be far past L2."""
    import torch

    per_buffer = min(BANDWIDTH_BUFFER_BYTES, int(MEMORY_FRACTION * free_bytes) // 3)
    if per_buffer < MIN_L2_MULTIPLE * (l2_bytes or DEFAULT_L2_BYTES):
        return []
    n = per_buffer // (1 << 20) * (1 << 20) // 4
    a = torch.empty(n, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a).normal_()
    c = torch.empty_like(a).normal_()
    total = torch.empty((), dtype=torch.float32, device="cuda")
    shape = (n,)
    return [
        Kernel("copy", "fp32", shape, lambda: a.copy_(b)),
        Kernel("read", "fp32", shape, lambda: torch.sum(b, dim=0, out=total)),
        Kernel("fill", "fp32", shape, lambda: a.fill_(1.0)),
        Kernel("triad", "fp32", shape, lambda: torch.add(b, c, alpha=TRIAD_SCALAR, out=a)),
    ]


def matmul_kernels(precisions: tuple[str, ...], free_bytes: int, seed: int) -> list[Kernel]:
    """cuBLAS at each of MATMUL_SHAPES for each precision while they all fit, smaller shapes first."""
    kernels: list[Kernel] = []
    budget = MEMORY_FRACTION * free_bytes
    for m, n, k in MATMUL_SHAPES:
        for precision in precisions:
            need = (m * k + k * n + m * n) * ITEMSIZE[_dtype(precision)]
            if need <= budget:
                kernels.append(matmul_kernel(precision, (m, n, k), seed))
                budget -= need
    return kernels


def _dtype(precision: str) -> str:
    return "fp32" if precision in ("fp32", "tf32") else precision


def matmul_kernel(precision: str, shape: tuple[int, int, int], seed: int) -> Kernel:
    import torch

    dtype = _dtype(precision)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    inputs = impls.make_inputs("matmul", shape, dtype, "cuda", gen)
    out = impls.make_output("matmul", shape, dtype, "cuda")
    return Kernel("matmul", dtype, shape, impls.torch_impl("matmul", inputs, out), precision)


def measure(timer: Timer, kernels: list[Kernel], capture: Callable[[Timer, Kernel], Region] | None = None
            ) -> Iterator[CeilingRun | tuple[Kernel, BaseException]]:
    """Each kernel's CeilingRun, or the kernel and what stopped it, from one interleaved window (``capture``: the
    graph Region seam, under the TF32 switch cuBLAS reads at capture)."""
    capture = capture or _capture
    regions: list[tuple[Kernel, Region]] = []
    for k in kernels:
        try:
            regions.append((k, capture(timer, k)))
        except Exception as e:  # noqa: BLE001 - one kernel's failure; the others are still measured
            yield k, e
    if not regions:
        return
    timer.warmup(lambda: [r.run() for _, r in regions], budget_ms=WARMUP_MS)
    for (k, _), got in zip(regions, timer.measure_interleaved([r for _, r in regions]), strict=True):
        if isinstance(got, Timing):
            yield CeilingRun(k.kernel, k.dtype, k.shape, got, k.precision)
        else:
            yield k, got


def _capture(timer: Timer, k: Kernel) -> Region:
    with impls.tf32_matmul(k.precision or k.dtype):
        k.fn()  # cuBLAS handle and workspace, before the capture
        timer.clock.synchronize()
        return graph_region(timer, k.fn)


def failure_note(k: Kernel, detail: str) -> Note:
    """What the report says of a ceiling kernel that could not be measured."""
    precision = {"precision": k.precision} if k.precision else {}
    return Note("ceiling.failed", {"kernel": k.kernel, "dtype": k.dtype, "shape": k.shape, "detail": detail,
                                   **precision})
