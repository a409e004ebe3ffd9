"""What the GPU was doing while a case ran: NVML's samples of its window summarised, with the clock-slowing
reasons active and for what share, so a case measured power- or heat-limited can be flagged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from envcheck.model import Bench, Case, MonitorWindow

POWER_CAP = "sw_power_cap"  # the software power cap: how a GPU runs a full tensor-core load, not a fault


@dataclass(frozen=True)
class Conditions:
    samples: int
    sm_mhz_min: float | None = None
    sm_mhz_max: float | None = None
    sm_mhz_mean: float | None = None
    mem_mhz_min: float | None = None
    mem_mhz_max: float | None = None
    temperature_c_max: float | None = None
    power_w_max: float | None = None
    power_w_mean: float | None = None
    reasons: tuple[str, ...] = ()  # clock-slowing reasons active at any sample, first seen first
    throttled_share: float | None = None  # share of samples with any such reason (None: unknown)

    @property
    def throttled(self) -> bool:
        return bool(self.reasons)

    @property
    def power_capped_only(self) -> bool:
        """Slowed by the software power cap alone: a full load, not heat or a fault."""
        return set(self.reasons) == {POWER_CAP}


def _stats(xs: Iterable[float] | None) -> tuple[float | None, float | None, float | None]:
    vals = list(xs) if xs is not None else []
    if not vals:
        return None, None, None
    return min(vals), max(vals), sum(vals) / len(vals)


def of_window(w: MonitorWindow) -> Conditions:
    sm = _stats(w.sm_mhz)
    mem = _stats(w.mem_mhz)
    temp = _stats(w.temperature_c)
    power = _stats(w.power_w)
    seen: dict[str, None] = {}
    for rs in w.reasons:
        for r in rs:
            seen.setdefault(r, None)
    share = sum(1 for rs in w.reasons if rs) / len(w.reasons) if w.reasons else None
    return Conditions(len(w.t_s), sm[0], sm[1], sm[2], mem[0], mem[1], temp[1], power[1], power[2],
                      tuple(seen), share)


def of_case(bench: Bench, case: Case) -> Conditions | None:
    """The conditions of a case's sampling window; a schema-1 summary as it was recorded."""
    w = bench.window_of(case)
    if w is not None:
        return of_window(w)
    m = case.monitor
    if m is None:
        return None
    return Conditions(m.samples, m.sm_clock_mhz_min, m.sm_clock_mhz_max, None, m.mem_clock_mhz_min,
                      m.mem_clock_mhz_max, m.temperature_c_max, m.power_w_max, None, tuple(m.throttle_reasons))
