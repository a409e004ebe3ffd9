"""Flags a measured case carries, and its size category: pure functions of its raw results.

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
  slowdown) while the case ran.
* ``l2_resident``: the working set fits in the L2 cache AND it was not kept cold (one set of
  buffers, no rotation), so part of the traffic may have been served from L2 and the
  bandwidth can exceed DRAM's. Memory-bound cases above 1 MiB and below 3x L2 are kept cold
  by rotating buffers and so never carry it; small ones (<= 1 MiB) are left hot on purpose
  (keeping a 12 KiB call cold would take thousands of buffer sets, and such a call is launch
  and latency bound either way), and matmuls are never rotated (their time is arithmetic).
* ``above_ceiling``: the throughput exceeds a ceiling it is held against (the measured one,
  or even the theoretical one). Either the case was served from a cache (then it is also
  ``l2_resident``), or it beat every kernel that measured the ceiling; the flag makes sure
  a number above a "ceiling" is never shown without saying so.

Size categories, by working-set bytes and relative to this GPU's L2 so that they mean the
same thing on every GPU: ``small`` <= 1 MiB (latency and launch dominate), ``medium`` fits in
L2, ``large`` up to 16x L2 (streams from DRAM), ``xlarge`` beyond.
"""

from __future__ import annotations

from envcheck.model import Timing

LAUNCH_BOUND = "launch_bound"
L2_RESIDENT = "l2_resident"
THROTTLED = "throttled"
NOISY = "noisy"
ABOVE_CEILING = "above_ceiling"
FLAGS = (LAUNCH_BOUND, L2_RESIDENT, THROTTLED, NOISY, ABOVE_CEILING)  # the order rows show them in

NOISY_CV = 0.05
NOISY_IQR_RATIO = 0.10
LAUNCH_BOUND_RATIO = 1.5
SMALL_BYTES = 1 << 20
LARGE_L2_MULTIPLE = 16
# Used when the L2 size is unknown (CPU backend, old torch): an H100's 50 MiB.
DEFAULT_L2_BYTES = 50 * (1 << 20)

CATEGORIES = ("small", "medium", "large", "xlarge")


def is_noisy(timing: Timing | None) -> bool:
    if timing is None or timing.median_us <= 0:
        return False
    return timing.cv > NOISY_CV or timing.iqr_us / timing.median_us > NOISY_IQR_RATIO


def is_launch_bound(gpu: Timing | None, launch: Timing | None) -> bool:
    if gpu is None or launch is None or gpu.median_us <= 0:
        return False
    return launch.median_us > LAUNCH_BOUND_RATIO * gpu.median_us


def is_l2_resident(working_set_bytes: int, l2_bytes: int | None, rotation_sets: int) -> bool:
    return rotation_sets <= 1 and working_set_bytes <= (l2_bytes or DEFAULT_L2_BYTES)


def category(working_set_bytes: int, l2_bytes: int | None) -> str:
    l2 = l2_bytes or DEFAULT_L2_BYTES
    if working_set_bytes <= SMALL_BYTES:
        return "small"
    if working_set_bytes <= l2:
        return "medium"
    if working_set_bytes <= LARGE_L2_MULTIPLE * l2:
        return "large"
    return "xlarge"
