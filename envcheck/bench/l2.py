"""Keeping L2 cold: how many sets of inputs and outputs a case rotates through, and the rotation.

A memory-bound case whose working set could stay in L2 between calls (above 1 MiB, below 3x
L2) would report L2 bandwidth, not DRAM's. Such a case gets R = ceil(3 x L2 / working set)
independent sets of inputs and outputs (at least 2), and every implementation cycles through
them (``Rotation``) in its warm-up, its CUDA graph and its eager calls: between two uses of a
set the other sets move 3x L2 minus the set itself (at least 2x L2 for a set that fits in L2,
at least 1.5x L2 for the larger ones), so every call meets data evicted from L2, as a caller
with fresh data would, with no flush inside the timed region. An H200 (60 MiB L2) gives a
12 MiB vector_add (fp32, 2^20 elements) 15 sets.

Cases of 1 MiB and less are left in L2 on purpose: keeping a 12 KiB vector_add cold would take
3x L2 / 12 KiB = 15,360 sets (a graph of as many kernels) on an H200, and the answer would
hardly move: such a call is launch and latency bound (1-2 us, of which moving 12 KiB at DRAM
speed is a few ns). Compute-bound cases (matmul) are never rotated: their time is arithmetic,
and operands that fit in L2 are re-read from it within the call anyway. Which cases rotated
is recorded (``Case.rotation_sets``); the analysis flags the rest whose working set fits in L2.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

SMALL_BYTES = 1 << 20
# Working sets below this multiple of L2 can still be partly served from L2 across calls (the
# cache keeps lines of the previous call), so memory-bound ones rotate through sets covering it.
ROTATE_L2_MULTIPLE = 3
# The extra sets may take at most this multiple of L2 (never binding for R = ceil(3 L2 / ws),
# whose R - 1 extra sets stay under 3x L2; a guard against a changed formula) ...
MAX_ROTATION_EXTRA_L2_MULTIPLE = 4
# ... and a rotation is at most this many sets: a CUDA graph holds at least one whole cycle
# (graphs.MAX_GRAPH_CALLS calls of the op at most: capture time and memory).
MAX_ROTATION_SETS = 500
# Used when the L2 size is unknown (old torch): an H100's 50 MiB.
DEFAULT_L2_BYTES = 50 * (1 << 20)


def rotation_sets(working_set_bytes: int, l2_bytes: int | None, *, memory_bound: bool, enabled: bool = True,
                  spare_bytes: float | None = None, min_bytes: int = SMALL_BYTES) -> int:
    """How many sets of inputs and outputs a case rotates through to keep L2 cold; 1 = none.
    Working sets of ``min_bytes`` and less are left hot (collectives pass 0: MAX_ROTATION_SETS
    alone bounds them).

    All or nothing: when the R - 1 extra sets would exceed 4x L2 or ``spare_bytes`` (free
    device memory the worker can give them), or R exceeds MAX_ROTATION_SETS, the case is
    measured on one set, never on a rotation too short to evict.
    """
    l2 = l2_bytes or DEFAULT_L2_BYTES
    if not (enabled and memory_bound and min_bytes < working_set_bytes < ROTATE_L2_MULTIPLE * l2):
        return 1
    sets = max(2, math.ceil(ROTATE_L2_MULTIPLE * l2 / working_set_bytes))
    extra = (sets - 1) * working_set_bytes
    limit = MAX_ROTATION_EXTRA_L2_MULTIPLE * l2
    if spare_bytes is not None:
        limit = min(limit, spare_bytes)
    if sets > MAX_ROTATION_SETS or extra > limit:
        return 1
    return sets


class Rotation:
    """One call of the op per call, cycling through ``fns``: the same implementation bound to
    R independent sets of inputs and outputs (``fns[0]`` on the set that was checked).

    Each set's last result is kept until that set is called again: an implementation that
    allocates its output (torch.compile) then writes R distinct buffers, as the others do into
    their R outputs, instead of getting the same (L2-hot) block back from the allocator.
    The cycling costs the host one index step per call (well under 1 us, in the launch time).
    """

    def __init__(self, fns: Sequence[Callable[[], Any]]) -> None:
        if not fns:
            raise ValueError("a rotation needs at least one set")
        self.fns = tuple(fns)
        self._next = 0
        self._kept: list[Any] = [None] * len(self.fns)

    @property
    def sets(self) -> int:
        return len(self.fns)

    def restart(self) -> None:
        """The next call is on set 0: the graphs of a group's implementations then visit the
        shared sets in the same order, and one's graph never starts on the set the other's
        just touched."""
        self._next = 0

    def __call__(self) -> Any:
        i = self._next
        self._next = (i + 1) % len(self.fns)
        result = self.fns[i]()
        self._kept[i] = result
        return result
