"""Every number derived from one case's raw results, computed here once: its quoted time (GPU time where it has
one, else launch time), bandwidth and FLOP/s with their shares of the ceilings, the speedup over PyTorch in the
same group (only when both were timed the same way), the numeric verdict, the flags and the GPU's conditions
while it ran (NVML's samples of its window).
"""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.analysis import flags as fl
from envcheck.analysis.ceilings import BANDWIDTH, MEASURED, THEORETICAL, Ceilings
from envcheck.analysis.tolerance import Tolerance, Verdict, judge, judge_outputs, tolerance
from envcheck.model import Bench, Case, CaseKey, MonitorWindow, Timing
from envcheck.model.bench import compute_stats
from envcheck.ops import OpSpec, Traffic, interpreted

GroupKey = tuple[str, str, str, tuple[int, ...]]


def group_key(case: Case) -> GroupKey:
    """The cases that compare with one another: same op, dtype, precision and shape."""
    return (case.op, case.dtype, case.precision, case.shape)


POWER_CAP = "sw_power_cap"  # the software power cap: how a GPU runs a full tensor-core load, not a fault


@dataclass(frozen=True)
class Conditions:
    """What the GPU was doing while a case ran, so a case measured power- or heat-limited can be flagged."""

    samples: int
    sm_mhz_min: float | None = None
    temperature_c_max: float | None = None
    power_w_max: float | None = None
    reasons: tuple[str, ...] = ()  # clock-slowing reasons active at any sample, first seen first
    throttled_share: float | None = None  # share of samples with any such reason (None: unknown)

    @property
    def throttled(self) -> bool:
        return bool(self.reasons)

    @property
    def power_capped_only(self) -> bool:
        """Slowed by the software power cap alone: a full load, not heat or a fault."""
        return set(self.reasons) == {POWER_CAP}


def of_window(w: MonitorWindow) -> Conditions:
    share = sum(1 for rs in w.reasons if rs) / len(w.reasons) if w.reasons else None
    sm, temp, power = w.sm_mhz, w.temperature_c, w.power_w
    return Conditions(len(w.t_s), min(sm) if sm else None, max(temp) if temp else None, max(power) if power else None,
                      tuple(dict.fromkeys(r for rs in w.reasons for r in rs)), share)


def of_case(case: Case) -> Conditions | None:
    """A schema-1 case's NVML summary as it was recorded (no window)."""
    m = case.monitor
    return None if m is None else Conditions(m.samples, m.sm_clock_mhz_min, m.temperature_c_max, m.power_w_max,
                                             tuple(m.throttle_reasons))


@dataclass(frozen=True)
class CaseResult:
    """One case with everything derived from it; ``status``: ``pass``, ``fail`` (a bound broken) or ``error``."""

    case: Case
    spec: OpSpec  # what its op is (built-in, or declared by the user in ``Bench.ops``)
    status: str
    traffic: Traffic
    working_set_bytes: int
    category: str
    time: Timing | None
    gbps: float | None
    tflops: float | None
    ceiling_name: str  # what the shares are of: ``bandwidth`` or the precision's FLOP/s
    pct_theoretical: float | None
    pct_measured: float | None
    speedup: float | None
    tolerance: Tolerance
    verdict: Verdict | None
    flags: tuple[str, ...]
    conditions: Conditions | None
    # Run by Triton's interpreter on the CPU (``interpreted``): its time is no speed, and it has no speedup.
    interpreted: bool = False

    @property
    def key(self) -> CaseKey:
        return self.case.key

    @property
    def rate(self) -> float | None:
        """The throughput the case is judged on: TFLOP/s if compute-bound, else GB/s."""
        return self.tflops if self.spec.compute_bound else self.gbps


def _pct(value: float | None, ceils: Ceilings, name: str, kind: str) -> float | None:
    c = ceils.get(name, kind)
    return None if value is None or c is None or c.value <= 0 else 100.0 * value / c.value


def _flags(case: Case, backend: str, time: Timing | None, ws: int, l2: int | None,
           conditions: Conditions | None, pct_t: float | None, pct_m: float | None) -> tuple[str, ...]:
    out = []
    if backend == "cuda":
        if fl.is_launch_bound(case.gpu, case.launch):
            out.append(fl.LAUNCH_BOUND)
        if fl.is_l2_resident(ws, l2, case.rotation_sets):
            out.append(fl.L2_RESIDENT)
    if conditions is not None and conditions.throttled:
        out.append(fl.THROTTLED)
    if fl.is_noisy(time):
        out.append(fl.NOISY)
    if (pct_m is not None and pct_m > 100.0) or (pct_t is not None and pct_t > 100.0):
        out.append(fl.ABOVE_CEILING)
    return tuple(out)


def _verdict(c: Case, op: OpSpec, whole: Tolerance, baseline: Case | None) -> Verdict:
    """Each output of an op with several judged on its own (before schema 4: the whole output)."""
    assert c.accuracy is not None
    if not c.outputs:
        return judge(c.accuracy, whole, baseline.accuracy if baseline is not None else None, c.exact)
    tols = {o.name: tolerance(op, c.dtype, c.precision, c.shape, o.name, o.accuracy.elements) for o in c.outputs}
    bases = {o.name: o.accuracy for o in baseline.outputs} if baseline is not None else None
    return judge_outputs({o.name: o.accuracy for o in c.outputs}, tols, bases, {o.name: o.exact for o in c.outputs})


def case_results(bench: Bench, ceils: Ceilings) -> tuple[CaseResult, ...]:
    """The results of every case of ``bench``, in its order."""
    backend = bench.device.backend
    l2 = bench.device.l2_bytes
    compute_stats(t for c in bench.cases for t in (c.gpu, c.launch) if t is not None)  # all at once: fast
    torch_time: dict[GroupKey, Timing] = {}
    base_accuracy: dict[GroupKey, Case] = {}  # the baseline, whose error is shown beside (information)
    for c in bench.cases:
        if c.impl == bench.spec(c.op).baseline and c.measured:
            if c.best_time is not None:
                torch_time[group_key(c)] = c.best_time
            if c.accuracy is not None:
                base_accuracy[group_key(c)] = c
    windows: dict[int, Conditions] = {}  # a group's cases share one window: summarised once
    out = []
    for c in bench.cases:
        op = bench.spec(c.op)
        traffic = op.traffic(c.shape, c.dtype)
        ws = traffic.bytes  # every byte a call touches is moved once: the working set is the traffic
        tol = tolerance(op, c.dtype, c.precision, c.shape,
                        elements=c.accuracy.elements if c.accuracy is not None else None)
        time = c.best_time if c.measured else None
        gbps = tflops = None
        if time is not None:
            seconds = time.median_us * 1e-6
            gbps = traffic.bytes / seconds / 1e9
            tflops = traffic.flops / seconds / 1e12
        name = c.precision if op.compute_bound else BANDWIDTH
        rate = tflops if op.compute_bound else gbps
        pct_t = _pct(rate, ceils, name, THEORETICAL)
        pct_m = _pct(rate, ceils, name, MEASURED)
        speedup = None
        base = torch_time.get(group_key(c))
        interp = interpreted(bench.settings.interpret, backend, c.impl, op.baseline)
        if c.impl != op.baseline and time is not None and base is not None and base.method == time.method \
                and not interp:  # an interpreter's time against a native one's is no speedup
            speedup = base.median_us / time.median_us
        baseline = base_accuracy.get(group_key(c)) if c.impl != op.baseline else None
        verdict = _verdict(c, op, tol, baseline) if c.measured and c.accuracy is not None else None
        # Measured but never checked is not a pass.
        status = "error" if not c.measured else "pass" if verdict is not None and verdict.passed else "fail"
        if backend == "cuda" and c.window is not None and c.window not in windows:
            windows[c.window] = of_window(bench.windows[c.window])
        conditions = None if backend != "cuda" else windows[c.window] if c.window is not None else of_case(c)
        out.append(CaseResult(
            case=c, spec=op, status=status, traffic=traffic, working_set_bytes=ws, category=fl.category(ws, l2),
            time=time, gbps=gbps, tflops=tflops, ceiling_name=name, pct_theoretical=pct_t, pct_measured=pct_m,
            speedup=speedup, tolerance=tol, verdict=verdict,
            flags=_flags(c, backend, time, ws, l2, conditions, pct_t, pct_m) if time is not None else (),
            conditions=conditions, interpreted=interp,
        ))
    return tuple(out)
