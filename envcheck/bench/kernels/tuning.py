"""Choosing a matmul kernel and tile for one problem: the candidates (``Tile``) and their race.

``fastest`` times every candidate that compiles as envcheck times any implementation (CUDA-graph replays in
interleaved turns after a warm-up to the power cap), so it ranks the GPU time a report quotes.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.model import Settings

if TYPE_CHECKING:
    from envcheck.bench.timer import Region

POINTER = "pointer"
TMA = "tma"
TMA_PERSISTENT = "tma_persistent"
KINDS = (POINTER, TMA, TMA_PERSISTENT)

# Each candidate's share of the race, after all ran in turns for ``warmup_ms`` (the GPU then at its power cap).
RACE_SETTINGS = Settings(warmup_ms=300.0, rep_ms=25.0, min_samples=10, max_samples=200)

# GPU time per call (us) of each callable, or the exception that stopped it.
Measure = Callable[[list[Callable[[], object]]], list["float | BaseException"]]
# The candidates' first calls (compiles) at a time: Triton releases the GIL in LLVM and ptxas.
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

    def describe(self) -> dict[str, str | int]:
        """What a report shows of the chosen candidate."""
        return {"kernel": self.kind, **self.blocks, "num_stages": self.num_stages, "num_warps": self.num_warps}


def fastest(candidates: Mapping[Tile, Callable[[], object]], measure: Measure | None = None) -> Tile:
    """The candidate whose call takes the least GPU time; first calls (compiles) run side by side, one that
    fails drops out, all failing raise the first failure. ``measure`` replaces the CUDA-graph timing (tests)."""
    import torch

    alive: dict[Tile, Callable[[], object]] = {}
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
        raise next(t for t in times.values() if isinstance(t, BaseException))
    return min(timed, key=timed.__getitem__)


def first_calls(fns: Sequence[Callable[[], object]]) -> list[Exception | None]:
    """Each of ``fns`` called once, COMPILE_THREADS at a time, on the caller's device and stream: what each raised."""
    run = _on_this_device()

    def first(fn: Callable[[], object]) -> Exception | None:
        try:
            run(fn)
        except Exception as e:  # noqa: BLE001 - the candidate's own failure, handed back
            return e
        return None

    if len(fns) <= 1:
        return [first(fn) for fn in fns]
    with ThreadPoolExecutor(min(len(fns), COMPILE_THREADS), thread_name_prefix="envcheck-compile") as pool:
        return list(pool.map(first, fns))


def _on_this_device() -> Callable[[Callable[[], object]], object]:
    """How a pool thread calls a candidate: on the caller's CUDA device and stream (a new thread's are device 0
    and the default stream), or plainly where CUDA is not in use."""
    import torch

    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return lambda fn: fn()
    from triton.runtime.driver import driver

    driver.active.get_current_device()  # Triton's driver made here, once, not by several threads at a time
    device, stream = torch.cuda.current_device(), torch.cuda.current_stream()

    def on_device(fn: Callable[[], object]) -> object:
        with torch.cuda.device(device), torch.cuda.stream(stream):
            return fn()

    return on_device


def graph_times(fns: list[Callable[[], object]]) -> list[float | BaseException]:
    """Median GPU time per call of each (compiled) callable: CUDA-graph replays, interleaved."""
    from envcheck.bench.graphs import graph_region
    from envcheck.bench.timer import Timer

    timer = Timer("cuda", RACE_SETTINGS)
    regions: list[Region] = []
    out: list[float | BaseException] = []
    for fn in fns:
        try:
            regions.append(graph_region(timer, fn))
            out.append(0.0)
        except Exception as e:  # noqa: BLE001 - this candidate cannot be captured: it drops out
            out.append(e.with_traceback(None))  # its frames (and a half-captured graph) go now, not at a GC
    if regions:
        timer.warmup(lambda: [region.run() for region in regions])
    measured = iter(timer.measure_interleaved(regions))
    for i, got in enumerate(out):
        if not isinstance(got, BaseException):
            timing = next(measured)
            out[i] = timing if isinstance(timing, BaseException) else float(timing.median_us)
    return out
