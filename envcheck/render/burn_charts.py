"""The burn-in's charts: clocks, power, temperature and throughput over time, a series per GPU, each a
``BurnChart`` spec drawn through ``charts.facet_chart``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from envcheck.analysis.burn import BurnAnalysis, GpuBurn
from envcheck.render import chart_spec as cs
from envcheck.render import chart_style as st
from envcheck.render import charts as ch
from envcheck.render import fmt
from envcheck.render.i18n import t

SECTION = "burn"
MAX_POINTS = 240  # per series: enough to see a trend; every sample stays in the JSON
SECONDS = ch.Quantity("chart.axis.burn_seconds", "linear")
PHASE_SECONDS = ch.Quantity("chart.axis.phase_seconds", "linear")

@dataclass(frozen=True)
class BurnChart:
    """One chart: its file name, title key, y axis and the series each GPU has: a telemetry ``field``, or with
    ``phase`` a phase's rates, x from the phase's start (a phase is a part of the burn, its chart shows that part)."""

    name: str
    title: str
    y: ch.Quantity
    field: str
    limit: Callable[[GpuBurn], float | None] | None = None  # a reference line (the power limit)
    phase: bool = False

    def points(self, g: GpuBurn) -> Sequence[tuple[float, float]]:
        if self.phase:
            r = g.rates.get(self.field)
            return list(zip(r.t_s, r.rates, strict=True)) if r is not None else []
        tel = g.gpu.telemetry
        ys = getattr(tel, self.field) if tel is not None else None
        return list(zip(tel.t_s, ys, strict=True)) if tel is not None and ys is not None else []


CHARTS = (
    BurnChart("clocks", "chart.title.burn_clocks", ch.Quantity("chart.axis.mhz", "linear"), "sm_mhz"),
    BurnChart("power", "chart.title.burn_power", ch.Quantity("chart.axis.watts", "linear"), "power_w",
              lambda g: g.power_limit_w),
    BurnChart("temperature", "chart.title.burn_temperature", ch.Quantity("chart.axis.celsius", "linear"),
              "temperature_c"),
    BurnChart("tflops", "chart.title.burn_tflops", ch.TFLOPS, "gemm", phase=True),
    BurnChart("gbps", "chart.title.burn_gbps", ch.GBPS, "bandwidth", phase=True),
)


def burn_charts(a: BurnAnalysis) -> list[ch.Drawn]:
    out: list[ch.Drawn] = []
    for spec in CHARTS:
        series, refs = [], []
        starts = [x for g in a.gpus for x, _ in spec.points(g)[:1]]
        t0 = min(starts) if spec.phase and starts else 0.0
        x_axis = PHASE_SECONDS if spec.phase else SECONDS
        for k, g in enumerate(a.gpus):
            # Colour, marker and dash per GPU: two GPUs running alike draw one over the other, and both still show.
            color, marker = st.PALETTE[k % len(st.PALETTE)], st.MARKERS[k % len(st.MARKERS)]
            name = t("burn.gpu", index=g.gpu.index)
            raw = spec.points(g)
            pts = tuple(cs.Point(x - t0, y, f"{name}: {fmt.num(x)} s, {fmt.num(y)}")
                        for x, y in raw[::max(1, -(-len(raw) // MAX_POINTS))])  # every k-th: at most MAX_POINTS
            if pts:
                series.append(cs.Series(name, pts, color, marker, dashed=k % 2 == 1))
            value = spec.limit(g) if spec.limit else None
            if value and not any(r.value == value for r in refs):
                refs.append(cs.RefLine(value, t("chart.ref.power_limit", value=fmt.num(value)), st.GREY,
                                       dashed=True))
        chart = ch.facet_chart(t(spec.title), t("chart.desc.burn", what=t(spec.title)),
                               [ch.Facet("", tuple(series), tuple(refs))], x_axis, spec.y)
        d = ch.draw(f"burn_{spec.name}", None, chart, x_axis, spec.y)
        if d is not None:
            out.append(replace(d, section=SECTION))
    return out
