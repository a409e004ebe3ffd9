"""How a burn of M minutes per GPU is spent, and each GPU's worker plan: most to the GEMM (it heats the GPU and
draws its power limit), a quarter to the memory test (several passes over an 80 GB GPU), the rest to streaming."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envcheck.burn.protocol import BurnPlan

SHARES = {"gemm": 0.60, "bandwidth": 0.15, "memtest": 0.25}
# A CPU burn (CI and tests, no GPU needed) runs tiny sizes: the point is the pipeline.
CPU_OPTIONS = {"gemm_n": 128, "max_bytes": 1 << 20, "interval_s": 0.25}


def phase_seconds(minutes: float) -> dict[str, float]:
    """Seconds per phase for ``minutes`` of load per GPU."""
    total = minutes * 60.0
    return {phase: total * share for phase, share in SHARES.items()}


def plans(gpus: Sequence[int], minutes: float, backend: str = "cuda", seed: int = 0, *,
          control: str | None = None, control_gpu: int | None = None, **options: Any) -> tuple[BurnPlan, ...]:
    """One plan per GPU (``options``: BurnPlan's other fields); ``control`` runs on ``control_gpu`` (None: the
    first) alone."""
    s = phase_seconds(minutes)
    target = gpus[0] if control_gpu is None and gpus else control_gpu
    return tuple(BurnPlan(backend, g, s["gemm"], s["bandwidth"], s["memtest"], seed=seed,
                          control=control if g == target else None, **options) for g in gpus)
