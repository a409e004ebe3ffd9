"""Choosing a matmul kernel and tile for one problem: the candidates and how they are raced.

A ``Tile`` names one candidate: which kernel (``pointer``: loads through pointer arithmetic,
any GPU; ``tma`` / ``tma_persistent``: loads through the Tensor Memory Accelerator, Hopper and
later) and its launch parameters. :func:`fastest` times every candidate that compiles on the
real problem and returns the quickest.

Candidates are timed the way envcheck times any implementation (bench/timer.py): a CUDA graph
of back-to-back calls per candidate, replayed in interleaved turns. So the race ranks GPU time,
the number a report quotes, with the host's launch cost left out, and every candidate sees the
same power and clock state. Timing them one after the other (as Triton's autotuner does)
would rank their order instead: a GPU at its power cap loses 10-20% of its clock within a
second of tensor-core load. Timing them with ``triton.testing.do_bench`` (eager calls, each
after an L2 flush) let host launch cost leak in: a TMA launch builds three tensor descriptors
on the host (60-100 us against 20-40 us for the pointer kernel), and on an H200 that race
chose a tile for bf16 1024^3 that ran at 0.41x of cuBLAS; the graph race chooses one at 0.90x.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from envcheck.model import Settings

POINTER = "pointer"
TMA = "tma"
TMA_PERSISTENT = "tma_persistent"
KINDS = (POINTER, TMA, TMA_PERSISTENT)

# Each candidate's share of the race: enough samples for a stable median of a few-us kernel,
# short enough that a suite racing dozens of problems spends seconds on it. Before it, all
# candidates run in turns for ``warmup_ms``: a large matmul then meets the GPU at its power cap,
# as the benchmark will. Raced on a cool GPU, bf16 4096^3 chose the pointer kernel (0.96x of
# cuBLAS once capped) over persistent TMA (0.995x), which draws fewer watts for the same work.
RACE_SETTINGS = Settings(warmup_ms=300.0, rep_ms=25.0, min_samples=10, max_samples=200)

# GPU time per call (us) of each callable, or the exception that stopped it.
Measure = Callable[[list[Callable[[], Any]]], list["float | BaseException"]]
# The candidates' first calls (each compiles its kernel) run this many at a time. Triton releases the
# GIL while LLVM optimises and ptxas assembles (the bulk of a compile: a thread spinning beside a
# compile was never held up more than ~20 ms), and its JIT caches take a kernel compiled in any
# thread (triton.AsyncCompileMode compiles in a thread pool for the same reason, triton PR 7306). A
# race of 7 new kernels took 5-10 s one after the other on an H200 (matmul 1000^3 fp16: 5.5 s, IEEE
# fp32: 9.6 s; evidence/2026-11-26_0456Z_vm_h200.json.gz, compile_s): 72 s of its 95 s of compiling.
COMPILE_THREADS = 8


@dataclass(frozen=True)
class Tile:
    """One kernel and its launch parameters."""

    kind: str
    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_warps: int
    group_m: int = 8

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown matmul kernel kind {self.kind!r} (known: {', '.join(KINDS)})")

    @property
    def blocks(self) -> dict[str, int]:
        """The block sizes as the kernels' constexpr arguments."""
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k, "GROUP_M": self.group_m}

    @property
    def label(self) -> str:
        """``tma_persistent 128x256x64 s4 w8``: kernel, tile (M x N x K), stages, warps."""
        return (f"{self.kind} {self.block_m}x{self.block_n}x{self.block_k} "
                f"s{self.num_stages} w{self.num_warps}")

    def describe(self) -> dict[str, Any]:
        """What a report shows of the chosen candidate."""
        return {"kernel": self.kind, **self.blocks, "num_stages": self.num_stages, "num_warps": self.num_warps}


def fastest(candidates: Mapping[Tile, Callable[[], Any]], measure: Measure | None = None) -> Tile:
    """The candidate whose call takes the least GPU time; each callable runs the whole problem.

    The candidates' first calls (their compiles) run side by side (``first_calls``). A candidate
    that fails on its first call (too much shared memory for this GPU, a feature this GPU lacks) or
    while timed drops out. When every one fails, the first failure (in candidate order) is raised.
    ``measure`` replaces the CUDA-graph timing (tests).
    """
    import torch

    alive: dict[Tile, Callable[[], Any]] = {}
    first_error: BaseException | None = None
    for (tile, fn), error in zip(candidates.items(), first_calls(list(candidates.values())), strict=True):
        if error is not None:  # out of resources, unsupported: this candidate only
            first_error = first_error or error
            continue
        alive[tile] = fn
    if not alive:
        raise first_error or ValueError("no matmul candidate to choose from")
    torch.cuda.synchronize()
    if len(alive) == 1:
        return next(iter(alive))
    times = dict(zip(alive, (measure or graph_times)(list(alive.values())), strict=True))
    timed = {tile: t for tile, t in times.items() if isinstance(t, float)}
    if not timed:
        failure = next(t for t in times.values() if isinstance(t, BaseException))
        raise failure
    return min(timed, key=timed.__getitem__)


def first_calls(fns: Sequence[Callable[[], Any]]) -> list[Exception | None]:
    """Call each of ``fns`` once, up to COMPILE_THREADS at a time, each on the caller's CUDA device
    and stream; what each raised (None: it ran). Returns once every call was made and its work queued."""
    run = _on_this_device()

    def first(fn: Callable[[], Any]) -> Exception | None:
        try:
            run(fn)
        except Exception as e:  # noqa: BLE001 - the candidate's own failure, handed back
            return e
        return None

    if len(fns) <= 1:
        return [first(fn) for fn in fns]
    with ThreadPoolExecutor(min(len(fns), COMPILE_THREADS), thread_name_prefix="envcheck-compile") as pool:
        return list(pool.map(first, fns))


def _on_this_device() -> Callable[[Callable[[], Any]], Any]:
    """How a pool thread calls a candidate: on the caller's CUDA device and stream (a new thread's
    current device is device 0, its stream the default one), or plainly where CUDA is not in use."""
    import torch

    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return lambda fn: fn()
    from triton.runtime.driver import driver

    driver.active.get_current_device()  # Triton's driver made here, once, not by several threads at a time
    device, stream = torch.cuda.current_device(), torch.cuda.current_stream()

    def on_device(fn: Callable[[], Any]) -> Any:
        with torch.cuda.device(device), torch.cuda.stream(stream):
            return fn()

    return on_device


def graph_times(fns: list[Callable[[], Any]]) -> list[float | BaseException]:
    """Median GPU time per call of each (compiled) callable: CUDA-graph replays, interleaved."""
    from envcheck.bench.graphs import graph_region
    from envcheck.bench.timer import Timer

    timer = Timer("cuda", RACE_SETTINGS)
    regions: list[Any] = []
    out: list[float | BaseException] = []
    for fn in fns:
        try:
            regions.append(graph_region(timer, fn))
            out.append(0.0)
        except Exception as e:  # noqa: BLE001 - this candidate cannot be captured: it drops out
            out.append(e)
    if regions:
        timer.warmup(lambda: [region.run() for region in regions])
    measured = iter(timer.measure_interleaved(regions))
    for i, got in enumerate(out):
        if not isinstance(got, BaseException):
            timing = next(measured)
            out[i] = timing if isinstance(timing, BaseException) else float(timing.median_us)
    return out
