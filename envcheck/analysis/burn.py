"""The burn-in's derived numbers and verdicts, computed once: rates per interval, power against
the limit, drifts, throttling, counter deltas, Xids per GPU, and each GPU's findings.

Every threshold is a named ``Threshold`` with the tool it comes from (``THRESHOLDS``), and the
report shows them. A finding is a key plus parameters (catalogue ``burn.finding.<key>`` for the
cause, ``burn.fix.<key>`` for the fix); any finding fails its GPU: a burn-in passes only what held.

What is not a fault: the SW power cap (how a GPU runs at full load) and a GPU's clocks settling
while it heats up (the first third of the phase); only thermal and hardware slowdowns count as
throttling, and a fall counts only as a fitted slope over the rest of the phase, larger than the
margin and well outside its noise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from envcheck.model import Stop, StopCause
from envcheck.model.bench import ParamValue, Samples
from envcheck.model.burn import PHASES, Burn, BurnGpu, PhaseRun, Telemetry
from envcheck.model.node import XidEvent


@dataclass(frozen=True)
class Threshold:
    """A limit a verdict uses: ``value`` and the tool or practice it is anchored to (``anchor``:
    catalogue ``burn.anchor.<anchor>``)."""

    key: str
    value: float
    anchor: str


THRESHOLDS: Mapping[str, Threshold] = {t.key: t for t in (
    # gpu-fryer fails a GPU more than 10% below the best one. Here a GPU is held against the median of
    # its siblings (one fast GPU does not make the others slow), and closer: healthy siblings of one node
    # at one power limit sat within 1.1% below their siblings' median (2 x H100, 2 x H200, 4 x H200:
    # docs/burn.md), so 5% keeps 3.9 points or more of room and still catches the 10% positive control
    # (read 9.2-10.4% below) with 4 to spare.
    Threshold("sibling_margin", 0.05, "siblings"),
    # DCGM diag r3 targeted_stress sustains >= 0.95 of a per-model target. Here the target is the GPU's
    # own settled speed, a high percentile (SETTLED_PERCENTILE) of its intervals after the first third of
    # the phase: never the cold first intervals, which run 10-15% above what the power cap then holds.
    Threshold("ceiling_margin", 0.05, "dcgm_r3_own"),
    # DCGM diag r3 targeted_power: >= 75% of the power limit.
    Threshold("power_share", 0.75, "dcgm_r3"),
    # DCGM diag r3 "no clock drop": a fitted fall across the phase larger than this share...
    Threshold("drift", 0.05, "dcgm_r3"),
    # ...and this many standard errors from no change (a slope, not noise).
    Threshold("drift_t", 3.0, "statistics"),
    # Common acceptance: no throttling but the SW power cap (a share of samples, for a stray one).
    Threshold("throttle_share", 0.02, "acceptance"),
    # DCGM diag r3 PCIe: at most 160 replays.
    Threshold("pcie_replays", 160.0, "dcgm_r3"),
    # gpu-burn: results equal between iterations; DCGM r4 memtest: no bit errors; acceptance: no new
    # Xid, no uncorrectable ECC, no pending row remap.
    Threshold("sdc", 0.0, "gpu_burn"),
    Threshold("bit_errors", 0.0, "dcgm_r4"),
    Threshold("xids", 0.0, "acceptance"),
    Threshold("ecc_uncorrected", 0.0, "acceptance"),
    Threshold("remap_pending", 0.0, "acceptance"),
)}
# Reasons that mean heat or a hardware signal slowed the GPU (the SW power cap is not one).
FAULT_REASONS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})
SCALE = {"flop": 1e12, "byte": 1e9}  # TFLOP/s, GB/s
MIN_POINTS = 5  # a slope from fewer points says nothing
SETTLED_PERCENTILE = 0.95  # the GPU's own reference: this percentile of its settled GEMM intervals
# Every rule a device can be judged by (catalogue ``burn.rule.<rule>``), in the order they are judged.
RULES = ("sdc", "bit_errors", "xids", "ecc_uncorrected", "remap_pending", "pcie_replays", "throttle_share",
         "power_share", "clock_drift", "throughput_drift", "ceiling_margin", "sibling_margin")


@dataclass(frozen=True)
class BurnFinding:
    key: str
    params: Mapping[str, ParamValue] = field(default_factory=dict)
    threshold: str | None = None  # the THRESHOLDS key it was judged by


@dataclass(frozen=True)
class Drift:
    """A least-squares line through a quantity over a phase: its fall over the phase as a share of
    the mean (negative: it fell), and that slope in standard errors."""

    change: float
    t: float
    points: int

    @property
    def falling(self) -> bool:
        return (self.points >= MIN_POINTS and self.change < -THRESHOLDS["drift"].value
                and abs(self.t) >= THRESHOLDS["drift_t"].value)


@dataclass(frozen=True)
class Margin:
    """How far one GPU stood from one rule: ``value`` against ``limit`` (percent for shares and
    falls, a count otherwise); ``room``: the distance to firing in the same unit, negative when it
    fired. ``rule``: catalogue ``burn.rule.<rule>``; ``threshold``: the THRESHOLDS key it reads."""

    rule: str
    threshold: str
    value: float
    limit: float
    room: float

    @property
    def fired(self) -> bool:
        return self.room < 0


@dataclass(frozen=True)
class PhaseRates:
    """One phase's rate per interval (TFLOP/s or GB/s) and its summary."""

    phase: PhaseRun
    t_s: tuple[float, ...]
    rates: tuple[float, ...]
    median: float | None
    best: float | None
    drift: Drift | None
    settled: float | None = None  # SETTLED_PERCENTILE of the settled intervals (the GEMM's own reference)


@dataclass(frozen=True)
class GpuBurn:
    gpu: BurnGpu
    rates: Mapping[str, PhaseRates]
    power_max_w: float | None
    power_limit_w: float | None
    power_share: float | None
    temperature_max_c: float | None
    mem_temperature_max_c: float | None
    sm_mhz_median: float | None
    clock_drift: Drift | None
    throttle_share: float | None
    throttle_reasons: tuple[str, ...]
    ecc_uncorrected: int | None
    ecc_corrected: int | None
    pcie_replays: int | None
    remap_pending: bool
    xids: tuple[XidEvent, ...]
    findings: tuple[BurnFinding, ...]
    margins: tuple[Margin, ...] = ()  # every rule judged on this GPU, with its room

    @property
    def status(self) -> str:
        if self.findings:
            return "fail"
        return "stopped" if self.gpu.stop is not None else "pass"

    def rate(self, phase: str) -> float | None:
        r = self.rates.get(phase)
        return r.median if r else None

    @property
    def on_cpu(self) -> bool:
        """A CPU burn (``burn --cpu``): no NVML counters, and its speed, shared with whatever else runs
        on its cores, is never judged."""
        return self.gpu.device is not None and self.gpu.device.backend == "cpu"

    @property
    def not_applied(self) -> tuple[str, ...]:
        """The rules (``RULES``) this device was not judged by: nothing measured them here."""
        judged = {m.rule for m in self.margins}
        return tuple(r for r in RULES if r not in judged)


@dataclass(frozen=True)
class BurnAnalysis:
    burn: Burn
    gpus: tuple[GpuBurn, ...]
    findings: tuple[BurnFinding, ...]  # of the host: Xids on no GPU of the burn
    thresholds: Mapping[str, Threshold] = field(default_factory=lambda: THRESHOLDS)

    @property
    def interrupted(self) -> bool:
        return self.burn.stopped is not None

    @property
    def verdict(self) -> str:
        """``fail`` when any GPU failed or the host logged an Xid; ``stopped`` when interrupted before
        that; else ``pass``."""
        if self.findings or any(g.status == "fail" for g in self.gpus):
            return "fail"
        if self.interrupted or any(g.status != "pass" for g in self.gpus) or not self.gpus:
            return "stopped" if self.interrupted else "fail"
        return "pass"


# --------------------------------------------------------------------------- numbers


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def drift(t: Sequence[float], y: Sequence[float]) -> Drift | None:
    """The fitted change of ``y`` over the span of ``t`` as a share of its mean, with its t-statistic."""
    n = len(t)
    if n < 3:
        return None
    mt, my = sum(t) / n, sum(y) / n
    sxx = sum((a - mt) ** 2 for a in t)
    if sxx <= 0 or my == 0:
        return None
    slope = sum((a - mt) * (b - my) for a, b in zip(t, y, strict=True)) / sxx
    resid = sum((b - (my + slope * (a - mt))) ** 2 for a, b in zip(t, y, strict=True))
    se = math.sqrt(resid / (n - 2) / sxx) if n > 2 else 0.0
    tstat = slope / se if se > 0 else (math.copysign(math.inf, slope) if slope else 0.0)
    return Drift(slope * (max(t) - min(t)) / my, tstat, n)


def settled(t: Sequence[float], y: Sequence[float]) -> Drift | None:
    """The drift after the first third of the span: a GPU reaching its temperature at the power cap
    lowers its clocks for a minute or so (leakage grows with heat), which is how it settles, not a
    fault; a fall that goes on after that is one."""
    if not t:
        return None
    cut = min(t) + (max(t) - min(t)) / 3
    keep = [(a, b) for a, b in zip(t, y, strict=True) if a >= cut]
    return drift([a for a, _ in keep], [b for _, b in keep])


def _percentile(xs: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``xs``."""
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def settled_reference(t: Sequence[float], y: Sequence[float]) -> float | None:
    """The GPU's own settled speed: SETTLED_PERCENTILE of the values after the first third of the
    span (None with fewer than MIN_POINTS of them). The first intervals run cold, before the power
    cap and the heat settle in, 10-15% above what a healthy GPU then holds: never a reference."""
    if not t:
        return None
    cut = min(t) + (max(t) - min(t)) / 3
    late = [b for a, b in zip(t, y, strict=True) if a >= cut]
    return _percentile(late, SETTLED_PERCENTILE) if len(late) >= MIN_POINTS else None


def phase_rates(p: PhaseRun) -> PhaseRates:
    rates = tuple(w / dt / SCALE[p.unit] for w, dt in zip(p.work, p.dt_s, strict=True))
    ts = tuple(p.t_s)
    # The first interval holds the warm-up (clocks ramping, allocator): not part of the median.
    body_r = rates[1:] if len(rates) > 2 else rates
    gemm = p.phase == "gemm"
    return PhaseRates(p, ts, rates, _median(body_r), max(rates) if rates else None,
                      settled(ts, rates) if gemm else None, settled_reference(ts, rates) if gemm else None)


def _window(tel: Telemetry, phase: PhaseRun | None) -> list[int]:
    """Indices of the samples taken during ``phase`` (all samples when there is no phase)."""
    if phase is None or not len(phase.t_s):
        return list(range(len(tel.t_s)))
    lo, hi = phase.started_s, max(phase.t_s)
    return [i for i, t in enumerate(tel.t_s) if lo <= t <= hi]


def _delta(s: Samples | None) -> int | None:
    return int(max(s) - s[0]) if s is not None and len(s) else None


_PCI = re.compile(r"(?<![0-9a-fA-F])([0-9a-fA-F]+):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})")


def _pci(text: str | None) -> tuple[int, int, int] | None:
    m = _PCI.search(text or "")
    return (int(m[1], 16), int(m[2], 16), int(m[3], 16)) if m else None


# --------------------------------------------------------------------------- verdicts


def _stop_finding(stop: Stop, lost_s: float | None) -> BurnFinding | None:
    if stop.cause in (StopCause.USER, StopCause.SIGNAL):
        return None  # interrupted: nothing is known against the GPU
    if lost_s is not None:
        return BurnFinding("gpu_lost", {"t_s": lost_s})
    return BurnFinding("worker_" + stop.cause.value, {"finished": stop.finished, "planned": stop.planned,
                                                      "signal": stop.signal, "detail": stop.detail})


def analyse_gpu(g: BurnGpu, xids: tuple[XidEvent, ...]) -> GpuBurn:
    rates = {p.phase: phase_rates(p) for p in g.phases}
    gemm = next((p for p in g.phases if p.phase == "gemm"), None)
    tel = g.telemetry
    found: list[BurnFinding] = []
    power_max = limit = share = tmax = mtmax = sm_med = tshare = None
    clock = None
    reasons: tuple[str, ...] = ()
    ecc_u = ecc_c = replays = None
    pending = False
    if tel is not None and len(tel.t_s):
        idx = _window(tel, gemm)
        if tel.power_w is not None and idx:
            power_max = max(tel.power_w[i] for i in idx)
            if tel.power_limit_w is not None:
                limit = max(tel.power_limit_w[i] for i in idx)
                share = power_max / limit if limit > 0 else None
        tmax = max(tel.temperature_c) if tel.temperature_c is not None else None
        mtmax = max(tel.mem_temperature_c) if tel.mem_temperature_c is not None else None
        if tel.sm_mhz is not None and idx:
            sm = [tel.sm_mhz[i] for i in idx]
            sm_med = _median(sm)
            clock = settled([tel.t_s[i] for i in idx], sm)
        if tel.reasons:
            hit = [set(r) & FAULT_REASONS for r in tel.reasons]
            tshare = sum(1 for h in hit if h) / len(hit)
            reasons = tuple(sorted(set().union(*hit)))
        ecc_u, ecc_c, replays = _delta(tel.ecc_uncorrected), _delta(tel.ecc_corrected), _delta(tel.pcie_replays)
        pending = tel.remap_pending is not None and any(x > 0 for x in tel.remap_pending)
    margins: list[Margin] = []

    def over(rule: str, threshold: str, value: float | None, *, pct: bool = False) -> bool:
        """Judges ``value`` (a count, or a share/fall as a fraction when ``pct``) against the
        threshold's limit, fired above it; records the margin."""
        if value is None:
            return False
        scale = 100.0 if pct else 1.0
        limit = THRESHOLDS[threshold].value * scale
        margins.append(Margin(rule, threshold, value * scale, limit, limit - value * scale))
        return margins[-1].fired

    sdc = g.sdc
    if over("sdc", "sdc", sdc.mismatch_count if sdc is not None else None):
        assert sdc is not None
        first = sdc.mismatches[0] if sdc.mismatches else None
        found.append(BurnFinding("sdc", {"count": sdc.mismatch_count, "iteration": first.iteration if first else None,
                                         "t_s": first.t_s if first else None,
                                         "element": first.element if first else None}, "sdc"))
    if over("bit_errors", "bit_errors", g.memtest.error_bits if g.memtest is not None else None):
        assert g.memtest is not None
        first_r = g.memtest.errors[0] if g.memtest.errors else None
        found.append(BurnFinding("bit_errors", {"bits": g.memtest.error_bits, "ranges": len(g.memtest.errors),
                                                "address": f"{first_r.start_address:#x}" if first_r else None,
                                                "pattern": first_r.pattern if first_r else None}, "bit_errors"))
    if over("xids", "xids", len(xids)):
        found.append(BurnFinding("xids", {"count": len(xids), "xid": xids[0].xid}, "xids"))
    if over("ecc_uncorrected", "ecc_uncorrected", ecc_u):
        found.append(BurnFinding("ecc_uncorrected", {"count": ecc_u}, "ecc_uncorrected"))
    if over("remap_pending", "remap_pending", int(pending) if tel is not None and tel.remap_pending is not None
            else None):
        found.append(BurnFinding("remap_pending", {}, "remap_pending"))
    if over("pcie_replays", "pcie_replays", replays):
        found.append(BurnFinding("pcie_replays", {"count": replays, "limit": THRESHOLDS["pcie_replays"].value},
                                 "pcie_replays"))
    if tshare is not None and over("throttle_share", "throttle_share", tshare, pct=True):
        found.append(BurnFinding("throttled", {"share_pct": 100 * tshare, "reasons": reasons},
                                 "throttle_share"))
    finished_gemm = gemm is not None and gemm.finished
    if finished_gemm and share is not None:
        # Power is judged from below: the share must reach the limit.
        need = 100 * THRESHOLDS["power_share"].value
        margins.append(Margin("power_share", "power_share", 100 * share, need, 100 * share - need))
        if margins[-1].fired:
            found.append(BurnFinding("power_short", {"power_w": power_max, "limit_w": limit, "share_pct": 100 * share,
                                                     "need_pct": need}, "power_share"))
    # Speed verdicts judge GPUs: a CPU burn (CI) shares its cores with whatever else runs.
    judged = g.device is not None and g.device.backend == "cuda"
    if clock is not None:
        margins.append(_drift_margin("clock_drift", clock))
        if clock.falling:
            found.append(BurnFinding("clock_falling", {"fall_pct": -100 * clock.change}, "drift"))
    gr = rates.get("gemm")
    if judged and gr is not None and gr.drift is not None:
        margins.append(_drift_margin("throughput_drift", gr.drift))
        if gr.drift.falling:
            found.append(BurnFinding("throughput_falling", {"fall_pct": -100 * gr.drift.change}, "drift"))
    if judged and finished_gemm and gr is not None and gr.median and gr.settled and \
            over("ceiling_margin", "ceiling_margin", 1 - gr.median / gr.settled, pct=True):
        found.append(BurnFinding("below_settled", {"median": gr.median, "settled": gr.settled,
                                                   "below_pct": 100 * (1 - gr.median / gr.settled)},
                                 "ceiling_margin"))
    if g.stop is not None:
        f = _stop_finding(g.stop, tel.lost_s if tel is not None else None)
        if f is not None:
            found.append(f)
    elif tel is not None and tel.lost_s is not None:
        found.append(BurnFinding("gpu_lost", {"t_s": tel.lost_s}))
    else:
        # A worker that said "done" without every phase (CUDA unusable on this GPU, say) proved nothing.
        missing = tuple(p for p in PHASES if not any(r.phase == p and r.finished for r in g.phases))
        if missing:
            found.append(BurnFinding("incomplete", {"phases": missing}))
    return GpuBurn(g, rates, power_max, limit, share, tmax, mtmax, sm_med, clock, tshare, reasons, ecc_u, ecc_c,
                   replays, pending, xids, tuple(found), tuple(margins))


def _drift_margin(rule: str, d: Drift) -> Margin:
    """A drift's margin: its fall (percent) against the limit. A fall past the limit that is not a
    slope (fewer than ``drift_t`` standard errors from none, or too few points) does not fire: its
    room reads 0, at the edge."""
    limit = 100 * THRESHOLDS["drift"].value
    fall = -100 * d.change
    return Margin(rule, "drift", fall, limit, limit - fall if d.falling else max(limit - fall, 0.0))


def _siblings(gpus: list[GpuBurn]) -> list[GpuBurn]:
    """Each GPU's GEMM rate against the median of its siblings' (gpu-fryer's rule, held closer)."""
    rated = [g.rate("gemm") if g.gpu.device is not None and g.gpu.device.backend == "cuda" else None for g in gpus]
    if sum(1 for r in rated if r) < 2:
        return gpus
    limit = 100 * THRESHOLDS["sibling_margin"].value
    out = []
    for k, (g, r) in enumerate(zip(gpus, rated, strict=True)):
        others = _median([x for j, x in enumerate(rated) if x and j != k])
        if r and others:
            below = 100 * (1 - r / others)
            m = Margin("sibling_margin", "sibling_margin", below, limit, limit - below)
            found = (BurnFinding("below_siblings", {"rate": r, "siblings": others, "below_pct": below},
                                 "sibling_margin"),) if m.fired else ()
            g = replace(g, findings=(*g.findings, *found), margins=(*g.margins, m))
        out.append(g)
    return out


def analyse_burn(burn: Burn) -> BurnAnalysis:
    """Every GPU's numbers and findings, the siblings compared, Xids given to the GPU they name."""
    bus_of = {_pci(g.device.pci_bus_id): g.index for g in burn.gpus if g.device and _pci(g.device.pci_bus_id)}
    by_gpu: dict[int, list[XidEvent]] = {}
    stray: list[XidEvent] = []
    for x in burn.new_xids:
        gpu = bus_of.get(_pci(x.pci_bus_id))
        (by_gpu.setdefault(gpu, []) if gpu is not None else stray).append(x)
    gpus = [analyse_gpu(g, tuple(by_gpu.get(g.index, ()))) for g in burn.gpus]
    host = (BurnFinding("xids_host", {"count": len(stray), "xid": stray[0].xid}, "xids"),) if stray else ()
    return BurnAnalysis(burn, tuple(_siblings(gpus)), host)
