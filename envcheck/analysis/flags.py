"""Flags a measured case carries, and its size category: pure functions of its raw results.

``noisy`` (CV or IQR too large), ``launch_bound`` (the launch time measures the host's launch path, not the
kernel), ``throttled``, ``l2_resident`` (its bandwidth can exceed DRAM's), ``above_ceiling``. Size categories are
relative to the GPU's L2: ``small`` <= 1 MiB, ``medium`` fits in L2, ``large`` up to 16x L2, ``xlarge`` beyond.
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
