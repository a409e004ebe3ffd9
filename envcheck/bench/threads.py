"""How many threads the CPU baseline runs on: read by the planner and the worker alike."""

from __future__ import annotations

from collections.abc import Callable

# On a machine this small the worker's own Python and the parent need a core: torch's pool fighting them for the
# cores made the CPU baseline swing 100x between runs on a 2-core VM.
SMALL_MACHINE_CORES = 4


def cpu_threads(physical: Callable[[], int | None] | None = None,
                logical: Callable[[], int | None] | None = None) -> int:
    """Threads torch uses for the CPU baseline: the physical cores (hyper-threads only add contention), less one
    on small machines. ``physical`` / ``logical``: psutil's counts, the test seam."""
    import psutil

    cores = (physical or (lambda: psutil.cpu_count(logical=False)))()
    if not cores:
        cores = (logical or (lambda: psutil.cpu_count(logical=True)))() or 1
    return max(1, cores - 1) if cores <= SMALL_MACHINE_CORES else cores
