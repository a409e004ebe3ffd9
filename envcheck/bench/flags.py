"""Flags a measured case carries, and its size category: pure functions of the measurements.

Definitions (the report's readers rely on them meaning exactly this):

* ``noisy``: the quoted timing (GPU time, or launch time where no GPU time exists) has a
  coefficient of variation above 5% or an IQR above 10% of its median. Either means the
  median is less certain than the differences a comparison usually cares about; CV catches
  outliers, IQR/median catches a bimodal spread (clock changes, another process).
* ``launch_bound``: the launch time (eager calls, what a Python caller pays) is more than
  1.5x the GPU time (graph replay). The GPU finishes before Python can launch the next call,
  so the eager number measures the host launch path, not the kernel: a Triton kernel that
  "looks slow" here has a slower Python launcher, not a slower kernel.
* ``throttled``: NVML reported an active clock-slowing reason (power cap, thermal, hardware
  slowdown) while the case ran; the monitor only reports reasons that slow the GPU.
* ``l2_resident``: the working set fits in the L2 cache AND it was not kept cold, so part of
  the traffic may have been served from L2 and the bandwidth can exceed DRAM's. Memory-bound
  cases above 1 MiB and below 3x L2 are kept cold by default with rotating buffers (see
  ``rotation_sets``) and so never carry the flag. Two kinds do: ``small`` memory-bound cases
  (<= 1 MiB), and compute-bound cases (matmul), which are never rotated (their time is
  arithmetic, and operands that fit in L2 are re-read from it within the call anyway).
  Small cases are left hot on purpose: keeping a 12 KiB vector_add cold would take 3x L2 /
  12 KiB = 15,360 sets (a graph of as many kernels) on an H200, and the answer would hardly
  move: such a call is launch and latency bound (about 1-2 us, of which moving 12 KiB at DRAM
  speed is a few ns), so its bandwidth is no DRAM measurement either way; the flag says so.

Size categories, by working-set bytes and relative to this GPU's L2 so that they mean the
same thing on every GPU: ``small`` <= 1 MiB (latency and launch dominate), ``medium`` fits
in L2, ``large`` up to 16x L2 (streams from DRAM), ``xlarge`` beyond.
"""

from __future__ import annotations

import math

from envcheck.model import L2_RESIDENT, LAUNCH_BOUND, NOISY, THROTTLED, MonitorSummary, Timing

NOISY_CV = 0.05
NOISY_IQR_RATIO = 0.10
LAUNCH_BOUND_RATIO = 1.5
SMALL_BYTES = 1 << 20
LARGE_L2_MULTIPLE = 16
# Working sets below this multiple of L2 can still be partly served from L2 across calls (the
# cache keeps lines of the previous call), so memory-bound ones get rotating buffers: sets of
# inputs and outputs covering this multiple of L2, used in turn.
ROTATE_L2_MULTIPLE = 3
# The extra sets may take at most this multiple of L2 (never binding for R = ceil(3 L2 / ws),
# whose R - 1 extra sets stay under 3x L2; a guard against a changed formula) ...
MAX_ROTATION_EXTRA_L2_MULTIPLE = 4
# ... and a rotation is at most this many sets: the graph holds at least one whole cycle
# (timer.MAX_GRAPH_CALLS calls of the op at most, capture time and memory).
MAX_ROTATION_SETS = 500
# Used when the L2 size is unknown (CPU backend, old torch): an H100's 50 MiB.
DEFAULT_L2_BYTES = 50 * (1 << 20)


def is_noisy(timing: Timing | None) -> bool:
    if timing is None or timing.median_us <= 0:
        return False
    return timing.cv > NOISY_CV or timing.iqr_us / timing.median_us > NOISY_IQR_RATIO


def is_launch_bound(gpu: Timing | None, launch: Timing | None) -> bool:
    if gpu is None or launch is None or gpu.median_us <= 0:
        return False
    return launch.median_us > LAUNCH_BOUND_RATIO * gpu.median_us


def is_throttled(monitor: MonitorSummary | None) -> bool:
    return monitor is not None and monitor.throttled


def rotation_sets(working_set_bytes: int, l2_bytes: int | None, *, memory_bound: bool, enabled: bool = True,
                  spare_bytes: float | None = None) -> int:
    """How many sets of inputs and outputs a case rotates through to keep L2 cold; 1 = none.

    Memory-bound cases above 1 MiB (``small`` ones are left hot: see ``l2_resident``) and
    below 3x L2 get R = ceil(3 x L2 / working set) sets, at least 2: one cycle moves 3x L2,
    so between two uses of a set the other sets move 3x L2 minus the set itself: at least
    2x L2 for a set that fits in L2, at least 1.5x L2 for the larger ones (R = 2 or 3). An H200 (60 MiB L2) gives a 12 MiB
    vector_add (fp32, 2^20 elements) 15 sets. All or nothing: when the R - 1 extra sets
    would exceed 4x L2 or ``spare_bytes`` (free device memory the worker can give them), or
    R exceeds MAX_ROTATION_SETS, the case is measured on one set instead (flagged
    ``l2_resident`` if it fits in L2), never on a rotation too short to evict.
    """
    l2 = l2_bytes or DEFAULT_L2_BYTES
    if not (enabled and memory_bound and SMALL_BYTES < working_set_bytes < ROTATE_L2_MULTIPLE * l2):
        return 1
    sets = max(2, math.ceil(ROTATE_L2_MULTIPLE * l2 / working_set_bytes))
    extra = (sets - 1) * working_set_bytes
    limit = MAX_ROTATION_EXTRA_L2_MULTIPLE * l2
    if spare_bytes is not None:
        limit = min(limit, spare_bytes)
    if sets > MAX_ROTATION_SETS or extra > limit:
        return 1
    return sets


def is_l2_resident(working_set_bytes: int, l2_bytes: int | None, cold: bool) -> bool:
    """Fits in L2 and was not kept cold (see ``l2_resident`` above)."""
    l2 = l2_bytes or DEFAULT_L2_BYTES
    return not cold and working_set_bytes <= l2


def category(working_set_bytes: int, l2_bytes: int | None) -> str:
    l2 = l2_bytes or DEFAULT_L2_BYTES
    if working_set_bytes <= SMALL_BYTES:
        return "small"
    if working_set_bytes <= l2:
        return "medium"
    if working_set_bytes <= LARGE_L2_MULTIPLE * l2:
        return "large"
    return "xlarge"


def case_flags(*, gpu: Timing | None, launch: Timing | None, monitor: MonitorSummary | None,
               working_set_bytes: int, l2_bytes: int | None, cold: bool, backend: str = "cuda") -> tuple[str, ...]:
    """All flags of one case, in the model's order. On the CPU backend only ``noisy`` applies."""
    flags: list[str] = []
    if backend == "cuda" and is_launch_bound(gpu, launch):
        flags.append(LAUNCH_BOUND)
    if backend == "cuda" and is_l2_resident(working_set_bytes, l2_bytes, cold):
        flags.append(L2_RESIDENT)
    if is_throttled(monitor):
        flags.append(THROTTLED)
    if is_noisy(gpu or launch):
        flags.append(NOISY)
    return tuple(flags)
