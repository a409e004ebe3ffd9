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
* ``l2_resident``: the working set fits in the L2 cache AND the samples were not preceded by
  an L2 flush, so part of the traffic may have been served from L2 and the bandwidth can
  exceed DRAM's. Memory-bound cases from 1 MiB up to 3x L2 are flushed before every sample
  by default and so never carry the flag. Two kinds do: ``small`` memory-bound cases (<= 1
  MiB), which are not flushed because a flushed sample must hold a single call, and a
  single call that short times the graph launch and event overhead (about 4 us on an
  H100/H200) rather than the kernel; and compute-bound cases (matmul), never flushed, whose
  operands fit in L2.

Size categories, by working-set bytes and relative to this GPU's L2 so that they mean the
same thing on every GPU: ``small`` <= 1 MiB (latency and launch dominate), ``medium`` fits
in L2, ``large`` up to 16x L2 (streams from DRAM), ``xlarge`` beyond.
"""

from __future__ import annotations

from envcheck.model import L2_RESIDENT, LAUNCH_BOUND, NOISY, THROTTLED, MonitorSummary, Timing

NOISY_CV = 0.05
NOISY_IQR_RATIO = 0.10
LAUNCH_BOUND_RATIO = 1.5
SMALL_BYTES = 1 << 20
LARGE_L2_MULTIPLE = 16
# Working sets below this multiple of L2 can still be partly served from L2 across samples
# (the cache keeps lines from the previous sample), so memory-bound ones are flushed.
FLUSH_L2_MULTIPLE = 3
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


def should_flush(memory_bound: bool, working_set_bytes: int, l2_bytes: int | None, enabled: bool = True) -> bool:
    """Flush L2 before each sample: memory-bound cases from 1 MiB up to 3x L2 (see ``l2_resident``)."""
    l2 = l2_bytes or DEFAULT_L2_BYTES
    return enabled and memory_bound and SMALL_BYTES < working_set_bytes < FLUSH_L2_MULTIPLE * l2


def is_l2_resident(working_set_bytes: int, l2_bytes: int | None, flushed: bool) -> bool:
    l2 = l2_bytes or DEFAULT_L2_BYTES
    return not flushed and working_set_bytes <= l2


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
               working_set_bytes: int, l2_bytes: int | None, flushed: bool, backend: str = "cuda") -> tuple[str, ...]:
    """All flags of one case, in the model's order. On the CPU backend only ``noisy`` applies."""
    flags: list[str] = []
    if backend == "cuda" and is_launch_bound(gpu, launch):
        flags.append(LAUNCH_BOUND)
    if backend == "cuda" and is_l2_resident(working_set_bytes, l2_bytes, flushed):
        flags.append(L2_RESIDENT)
    if is_throttled(monitor):
        flags.append(THROTTLED)
    if is_noisy(gpu or launch):
        flags.append(NOISY)
    return tuple(flags)
