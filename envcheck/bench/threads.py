"""How many threads the CPU baseline runs on: read by the planner and the worker alike."""

from __future__ import annotations

from collections.abc import Callable

# On a machine this small the harness (the worker's own Python, the parent, NVML's thread) needs
# a core of its own: torch's thread pool fighting it for the cores made the CPU baseline swing
# 100x between runs on a 2-core VM (vector_add 102400: 16 ms, then 7,976 us).
SMALL_MACHINE_CORES = 4


def cpu_threads(physical: Callable[[], int | None] | None = None,
                logical: Callable[[], int | None] | None = None) -> int:
    """Threads torch uses for the CPU baseline: the physical cores, less one on small machines.

    Hyper-threads share a core's arithmetic units, so counting them (torch's default) only
    adds contention to element-wise and BLAS work. ``physical`` / ``logical`` are psutil's
    counts (the seam tests replace).
    """
    import psutil

    cores = (physical or (lambda: psutil.cpu_count(logical=False)))()
    if not cores:
        cores = (logical or (lambda: psutil.cpu_count(logical=True)))() or 1
    return max(1, cores - 1) if cores <= SMALL_MACHINE_CORES else cores
