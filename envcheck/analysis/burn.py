"""The burn-in's derived numbers and verdicts, computed once: each GPU's findings (any fails it) and its margin
on every rule (``THRESHOLDS``). Not a fault: the SW power cap, and clocks settling in a phase's first third.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from envcheck.model import StopCause
from envcheck.model.bench import ParamValue, Samples
from envcheck.model.burn import PHASES, Burn, BurnGpu, PhaseRun, Telemetry
from envcheck.model.node import XidEvent


@dataclass(frozen=True)
class Threshold:
    """A limit a verdict uses and the tool or practice it is anchored to (catalogue ``burn.anchor.<anchor>``)."""

    key: str
    value: float
    anchor: str


# Each limit's evidence (healthy burns' room, the positive controls caught) is in docs/burn.md.
THRESHOLDS: Mapping[str, Threshold] = {t.key: t for t in (
    # gpu-fryer's 10% below the best GPU, held against the siblings' median and closer (healthy: within 1.1%).
    Threshold("sibling_margin", 0.05, "siblings"),
    # DCGM r3 targeted_stress (>= 0.95 of a target), the target the GPU's own settled speed, never its cold start.
    Threshold("ceiling_margin", 0.05, "dcgm_r3_own"),
    # A GPU uniformly slow passes every rule comparing it with itself: its SKU's healthy figure (REFERENCES).
    Threshold("reference_margin", 0.10, "evidence"),
    Threshold("power_share", 0.75, "dcgm_r3"),  # targeted_power: >= 75% of the power limit
    Threshold("drift", 0.05, "dcgm_r3"),  # "no clock drop": a fitted fall larger than this share...
    Threshold("drift_t", 3.0, "statistics"),  # ...and this many standard errors from none
    Threshold("throttle_share", 0.02, "acceptance"),  # no throttling but the SW power cap (a stray sample)
    Threshold("pcie_replays", 160.0, "dcgm_r3"),
    # gpu-burn: equal results; DCGM r4 memtest: no bit errors; acceptance: no new Xid, uncorrectable ECC, remap.
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
         "power_share", "clock_drift", "throughput_drift", "ceiling_margin", "reference_margin", "sibling_margin")


@dataclass(frozen=True)
class Reference:
    """The settled GEMM rate healthy GPUs of one SKU (NVML's name) sustain in the default plan's GEMM."""

    sku: str
    dtype: str
    shape: tuple[int, ...]
    tflops: float


# The middle of the per-GPU medians of the committed healthy burns (docs/burn.md).
REFERENCES: Mapping[str, Reference] = {r.sku: r for r in (
    Reference("NVIDIA H100 80GB HBM3", "fp8", (8192, 8192, 16384), 1228.0),
    Reference("NVIDIA H200", "fp8", (8192, 8192, 16384), 1216.0),
)}


@dataclass(frozen=True)
class BurnFinding:
    key: str
    params: Mapping[str, ParamValue] = field(default_factory=dict)
    threshold: str | None = None  # the THRESHOLDS key it was judged by


@dataclass(frozen=True)
class Drift:
    """A least-squares line over a phase: its change as a share of the mean (negative: a fall) and its t."""

    change: float
    t: float
    points: int

    @property
    def falling(self) -> bool:
        return (self.points >= MIN_POINTS and self.change < -THRESHOLDS["drift"].value
                and abs(self.t) >= THRESHOLDS["drift_t"].value)


@dataclass(frozen=True)
class Margin:
    """How far one GPU stood from one rule: ``value`` against ``limit``, ``room`` negative when it fired."""

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
    reference: Reference | None = None  # its SKU's healthy figure, when it ran that GEMM

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
        return _on_cpu(self.gpu)

    @property
    def memtest_coverage(self) -> float | None:
        """The share of its free memory the memory test covered, 0..1."""
        m = self.gpu.memtest
        return m.bytes_tested / m.free_bytes if m is not None and m.free_bytes else None

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
        """``fail`` when any GPU failed or the host logged an Xid; else ``stopped`` when interrupted."""
        if self.findings or any(g.status == "fail" for g in self.gpus):
            return "fail"
        if self.interrupted or any(g.status != "pass" for g in self.gpus) or not self.gpus:
            return "stopped" if self.interrupted else "fail"
        return "pass"


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


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


def _late(t: Sequence[float], y: Sequence[float]) -> tuple[list[float], list[float]]:
    """The points after the first third of the span: a GPU settling at its power cap slows as it heats."""
    cut = min(t) + (max(t) - min(t)) / 3 if t else 0.0
    keep = [(a, b) for a, b in zip(t, y, strict=True) if a >= cut]
    return [a for a, _ in keep], [b for _, b in keep]


def settled(t: Sequence[float], y: Sequence[float]) -> Drift | None:
    """The drift after the GPU settled: a fall that goes on then is a fault."""
    return drift(*_late(t, y))


def settled_reference(t: Sequence[float], y: Sequence[float]) -> float | None:
    """The GPU's own settled speed (its cold start runs 10-15% above); None with fewer than MIN_POINTS."""
    late = sorted(_late(t, y)[1])
    return late[max(0, math.ceil(SETTLED_PERCENTILE * len(late)) - 1)] if len(late) >= MIN_POINTS else None


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


def _on_cpu(g: BurnGpu) -> bool:
    """A CPU burn tests the code path at tiny sizes on shared cores: its rates are figures of nothing."""
    return g.device is not None and g.device.backend == "cpu"


def reference_for(g: BurnGpu) -> Reference | None:
    ref = REFERENCES.get(g.device.name) if g.device is not None else None
    gemm = next((p for p in g.phases if p.phase == "gemm"), None)
    return ref if ref and gemm and (gemm.dtype, tuple(gemm.shape)) == (ref.dtype, ref.shape) else None


def analyse_gpu(g: BurnGpu, xids: tuple[XidEvent, ...]) -> GpuBurn:
    rates = {} if _on_cpu(g) else {p.phase: phase_rates(p) for p in g.phases}
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

    def over(rule: str, value: float | None, *, pct: bool = False) -> bool:
        """Whether ``value`` (a fraction when ``pct``) is above the rule's limit; records the margin."""
        if value is None:
            return False
        scale = 100.0 if pct else 1.0
        limit = THRESHOLDS[rule].value * scale
        margins.append(Margin(rule, rule, value * scale, limit, limit - value * scale))
        return margins[-1].fired

    sdc = g.sdc
    if over("sdc", sdc.mismatch_count if sdc is not None else None):
        assert sdc is not None
        first = sdc.mismatches[0] if sdc.mismatches else None
        found.append(BurnFinding("sdc", {"count": sdc.mismatch_count, "iteration": first.iteration if first else None,
                                         "t_s": first.t_s if first else None,
                                         "element": first.element if first else None}, "sdc"))
    if over("bit_errors", g.memtest.error_bits if g.memtest is not None else None):
        assert g.memtest is not None
        first_r = g.memtest.errors[0] if g.memtest.errors else None
        found.append(BurnFinding("bit_errors", {"bits": g.memtest.error_bits, "ranges": len(g.memtest.errors),
                                                "address": f"{first_r.start_address:#x}" if first_r else None,
                                                "pattern": first_r.pattern if first_r else None}, "bit_errors"))
    if over("xids", len(xids)):
        found.append(BurnFinding("xids", {"count": len(xids), "xid": xids[0].xid}, "xids"))
    if over("ecc_uncorrected", ecc_u):
        found.append(BurnFinding("ecc_uncorrected", {"count": ecc_u}, "ecc_uncorrected"))
    if over("remap_pending", int(pending) if tel is not None and tel.remap_pending is not None else None):
        found.append(BurnFinding("remap_pending", {}, "remap_pending"))
    if over("pcie_replays", replays):
        found.append(BurnFinding("pcie_replays", {"count": replays, "limit": THRESHOLDS["pcie_replays"].value},
                                 "pcie_replays"))
    if tshare is not None and over("throttle_share", tshare, pct=True):
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
    if clock is not None:
        margins.append(_drift_margin("clock_drift", clock))
        if clock.falling:
            found.append(BurnFinding("clock_falling", {"fall_pct": -100 * clock.change}, "drift"))
    gr = rates.get("gemm")
    if gr is not None and gr.drift is not None:
        margins.append(_drift_margin("throughput_drift", gr.drift))
        if gr.drift.falling:
            found.append(BurnFinding("throughput_falling", {"fall_pct": -100 * gr.drift.change}, "drift"))
    if finished_gemm and gr is not None and gr.median and gr.settled and \
            over("ceiling_margin", 1 - gr.median / gr.settled, pct=True):
        found.append(BurnFinding("below_settled", {"median": gr.median, "settled": gr.settled,
                                                   "below_pct": 100 * (1 - gr.median / gr.settled)},
                                 "ceiling_margin"))
    ref = reference_for(g)
    if ref and finished_gemm and gr is not None and gr.median and \
            over("reference_margin", 1 - gr.median / ref.tflops, pct=True):
        found.append(BurnFinding("below_reference", {"median": gr.median, "reference": ref.tflops, "sku": ref.sku,
                                                     "below_pct": 100 * (1 - gr.median / ref.tflops)},
                                 "reference_margin"))
    stop, lost_s = g.stop, tel.lost_s if tel is not None else None
    if stop is not None and stop.cause in (StopCause.USER, StopCause.SIGNAL):
        pass  # interrupted: nothing is known against the GPU
    elif lost_s is not None:
        found.append(BurnFinding("gpu_lost", {"t_s": lost_s}))
    elif stop is not None:
        found.append(BurnFinding("worker_" + stop.cause.value, {"finished": stop.finished, "planned": stop.planned,
                                                                "signal": stop.signal, "detail": stop.detail}))
    else:
        # A worker that said "done" without every phase (CUDA unusable on this GPU, say) proved nothing.
        missing = tuple(p for p in PHASES if not any(r.phase == p and r.finished for r in g.phases))
        if missing:
            found.append(BurnFinding("incomplete", {"phases": missing}))
    return GpuBurn(g, rates, power_max, limit, share, tmax, mtmax, sm_med, clock, tshare, reasons, ecc_u, ecc_c,
                   replays, pending, xids, tuple(found), tuple(margins), ref)


def _drift_margin(rule: str, d: Drift) -> Margin:
    """A drift's fall (percent) against the limit; past it without a significant slope: room 0."""
    limit = 100 * THRESHOLDS["drift"].value
    fall = -100 * d.change
    return Margin(rule, "drift", fall, limit, limit - fall if d.falling else max(limit - fall, 0.0))


def _siblings(gpus: list[GpuBurn]) -> list[GpuBurn]:
    """Each GPU's GEMM rate against the median of its siblings' (gpu-fryer's rule, held closer)."""
    rated = [g.rate("gemm") for g in gpus]
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
