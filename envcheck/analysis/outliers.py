"""GPUs of one node that fall behind their siblings, and the condition they were probed in."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.outside_json import Json

if TYPE_CHECKING:
    from envcheck.analysis.ceilings import Ceilings
    from envcheck.analysis.results import CaseResult
    from envcheck.model import Bench, Environment

# --------------------------------------------------------------------------- GPUs against their siblings

DEFAULT_OUTLIER_MARGIN = 0.05


@dataclass(frozen=True)
class GpuRates:
    """What one GPU's suite says of its speed: its measured bandwidth ceiling (the best of the
    copy, read, fill and triad kernels) and its best torch matmul rate, both as the analysis
    derives them (``analysis/ceilings.py``, ``analysis/results.py``). A suite run on the CPU
    measures no ceilings (``bandwidth_gbps`` None); its matmul rate is timed by the host clock."""

    index: int | None
    bandwidth_gbps: float | None
    matmul_tflops: float | None
    matmul_key: str | None  # which case the rate comes from, e.g. "bf16 4096x4096x4096"


def gpu_rates(bench: Bench) -> GpuRates:
    """The rates of one bench: the largest torch matmul with a GPU time, and the measured bandwidth."""
    from envcheck.analysis.ceilings import ceilings
    from envcheck.analysis.results import case_results
    from envcheck.model import Environment

    ceils = ceilings(Environment(), bench)  # measured limits need nothing from the environment
    return rates_from(bench, ceils, case_results(bench, ceils))


def rates_from(bench: Bench, ceils: Ceilings, results: Sequence[CaseResult]) -> GpuRates:
    """:func:`gpu_rates` from a bench's ceilings and case results already derived (``BenchAnalysis``)."""
    from envcheck.analysis.ceilings import BANDWIDTH, MEASURED

    best: tuple[int, float, str] | None = None
    # On a GPU only a GPU time counts; a suite run on the CPU has host-clock times only, and its rate is
    # the CPU's own (shown in GFLOP/s, never judged against a GPU's).
    on_gpu = getattr(bench.device, "backend", None) == "cuda"
    for r in results:
        c = r.case
        if c.op != "matmul" or c.impl != "torch" or (on_gpu and c.gpu is None) or r.status == "error" \
                or r.tflops is None:
            continue
        m, n, k = c.shape
        label = f"{c.dtype} {m}x{n}x{k}" + ("" if c.precision == c.dtype else f" {c.precision}")
        # The largest problem is the one closest to the GPU's peak; among equals, the fastest precision.
        cand = (r.traffic.flops, r.tflops, label)
        if best is None or (cand[0], cand[1]) > (best[0], best[1]):
            best = cand
    bw = ceils.get(BANDWIDTH, MEASURED)
    return GpuRates(getattr(bench.device, "index", None), bw.value if bw else None,
                    best[1] if best else None, best[2] if best else None)


@dataclass(frozen=True)
class Outlier:
    """A GPU more than ``margin`` below the median of its siblings on one metric."""

    gpu: int | None
    metric: str  # bandwidth_gbps | matmul_tflops
    value: float
    siblings_median: float
    shortfall: float  # fraction below the median


def outliers(benches: Sequence[Bench], margin: float = DEFAULT_OUTLIER_MARGIN) -> tuple[Outlier, ...]:
    """GPUs whose copy bandwidth or matmul rate falls more than ``margin`` below their siblings' median.

    Matmul rates are compared only between GPUs whose best case is the same problem, so a GPU that
    skipped a size for memory is not called slow for it.
    """
    return outliers_from_rates([gpu_rates(b) for b in benches], margin)


def outliers_from_rates(rates: Sequence[GpuRates], margin: float = DEFAULT_OUTLIER_MARGIN) -> tuple[Outlier, ...]:
    """:func:`outliers` from rates already derived."""
    out: list[Outlier] = []
    for metric in ("bandwidth_gbps", "matmul_tflops"):
        for i, r in enumerate(rates):
            value = getattr(r, metric)
            if value is None:
                continue
            sib = [getattr(s, metric) for j, s in enumerate(rates) if j != i and getattr(s, metric) is not None
                   and (metric != "matmul_tflops" or s.matmul_key == r.matmul_key)]
            if not sib:
                continue
            med = statistics.median(sib)
            if med > 0 and value < med * (1 - margin):
                out.append(Outlier(r.index, metric, value, med, 1 - value / med))
    return tuple(out)


@dataclass(frozen=True)
class GpuCondition:
    """What an outlier GPU looked like when probed: clocks, heat, power limit, PCIe link, error counters."""

    index: int
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    temperature_c: float | None = None
    power_limit_w: float | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    throttle_reasons: list[str] | None = None
    pcie_replay: int | None = None
    nvlink_errors: dict[str, int] | None = None  # totals per counter over the GPU's links


def gpu_condition(env: Environment, index: int) -> GpuCondition:
    """The facts shown beside an outlier, read from the environment (``gpus`` and the ``links`` section)."""
    gpu = next((g for g in env.gpus if g.index == index), None)

    def g(key: str) -> Json:
        return gpu.get(key) if gpu is not None else None

    links = env.get("links", f"gpu{index}.nvlink_errors")
    totals: dict[str, int] | None = None
    if isinstance(links, list):
        totals = {}
        for lk in links:
            for k, v in lk.items():
                if k != "link" and isinstance(v, int):
                    totals[k] = totals.get(k, 0) + v
    return GpuCondition(index, g("sm_clock_mhz"), g("sm_clock_max_mhz"), g("temperature_c"), g("power_limit_w"),
                        g("pcie_gen"), g("pcie_gen_max"), g("pcie_width"), g("pcie_width_max"), g("throttle_reasons"),
                        env.get("links", f"gpu{index}.pcie_replay"), totals)
