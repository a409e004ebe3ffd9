"""Keeping L2 cold: a memory-bound case whose working set could stay in L2 between calls (1 MiB to 3x L2) gets
R = ceil(3 x L2 / working set) sets of inputs and outputs every implementation cycles through (``Rotation``), so
each call meets data evicted from L2 with no flush timed. Smaller cases stay hot, compute-bound ones unrotated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

SMALL_BYTES = 1 << 20
ROTATE_L2_MULTIPLE = 3  # below this multiple of L2, lines of the previous call can still serve the next
MAX_ROTATION_EXTRA_L2_MULTIPLE = 4  # a guard on the extra sets' size (never binding for R above)
MAX_ROTATION_SETS = 500  # a CUDA graph holds at least one whole cycle (graphs.MAX_GRAPH_CALLS)
DEFAULT_L2_BYTES = 50 * (1 << 20)  # where the L2 size is unknown (old torch): an H100's


def rotation_sets(working_set_bytes: int, l2_bytes: int | None, *, memory_bound: bool, enabled: bool = True,
                  spare_bytes: float | None = None, min_bytes: int = SMALL_BYTES) -> int:
    """How many sets a case rotates through to keep L2 cold (1: none); ``min_bytes`` and less stay hot. All or
    nothing: where the extra sets exceed 4x L2 or ``spare_bytes``, or R exceeds MAX_ROTATION_SETS, one set."""
    l2 = l2_bytes or DEFAULT_L2_BYTES
    if not (enabled and memory_bound and min_bytes < working_set_bytes < ROTATE_L2_MULTIPLE * l2):
        return 1
    sets = max(2, math.ceil(ROTATE_L2_MULTIPLE * l2 / working_set_bytes))
    limit = min(MAX_ROTATION_EXTRA_L2_MULTIPLE * l2, math.inf if spare_bytes is None else spare_bytes)
    return 1 if sets > MAX_ROTATION_SETS or (sets - 1) * working_set_bytes > limit else sets


class Rotation:
    """One call of the op per call, cycling through ``fns`` (one implementation bound to each set; ``fns[0]`` on
    the checked one). Each set's last result is kept until it is called again, so an implementation that
    allocates its output writes R buffers too, not the same L2-hot block from the allocator."""

    def __init__(self, fns: Sequence[Callable[[], object]]) -> None:
        if not fns:
            raise ValueError("a rotation needs at least one set")
        self.fns = tuple(fns)
        self._next = 0
        self._kept: list[object] = [None] * len(self.fns)

    @property
    def sets(self) -> int:
        return len(self.fns)

    def restart(self) -> None:
        """The next call is on set 0: every implementation's graph visits the shared sets in the same order."""
        self._next = 0

    def __call__(self) -> object:
        i = self._next
        self._next = (i + 1) % len(self.fns)
        result = self.fns[i]()
        self._kept[i] = result
        return result
