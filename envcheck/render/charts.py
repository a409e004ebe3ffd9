"""Every chart envcheck draws (run, diff, history, node): what each shows, as ``chart_spec`` data. An axis's label
and the value its points sit at come from one ``Quantity``, so they cannot disagree; ``facet_chart`` leaves out
panels with fewer than two sizes and returns None when none is left. Numbers are the analysis's."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from envcheck.analysis import BenchAnalysis, CaseResult
from envcheck.analysis.ceilings import BANDWIDTH, MEASURED, THEORETICAL
from envcheck.analysis.collectives import CollectiveRow, SweepAnalysis
from envcheck.model import Timing
from envcheck.ops import IMPLS, OPS, OpSpec
from envcheck.render import chart_spec as cs
from envcheck.render import chart_style as st
from envcheck.render import fmt
from envcheck.render.i18n import t

if TYPE_CHECKING:
    from envcheck.compare.diff import Comparison
    from envcheck.compare.history import History

# --------------------------------------------------------------------------- the style

# One colour and marker per implementation in every chart; ops are told apart by marker on the roofline.
IMPL_COLORS = {"torch": st.BLUE, "triton": st.VERMILLION, "compile": st.BLUISH_GREEN, "jax": st.REDDISH_PURPLE}
IMPL_MARKERS = {"torch": "circle", "triton": "square", "compile": "triangle", "jax": "diamond"}
# The first five ops keep their markers; ops added later (issue 22) take the markers in turn.
_OP_MARKER_ORDER = ("circle", "square", "diamond", "triangle", "cross")
OP_MARKERS = {op: _OP_MARKER_ORDER[i % len(_OP_MARKER_ORDER)] for i, op in enumerate(OPS)}
MEASURED_COLOR = st.REDDISH_PURPLE  # ceilings measured in the run; theoretical ones are st.GREY
SERIES_COLORS = st.PALETTE


@dataclass(frozen=True)
class Quantity:
    """What one axis shows: its label (a catalogue key), its scale, and for x the value of each case."""

    label: str
    scale: str = "auto"
    zero: bool = True
    include: tuple[float, ...] = ()
    value: Callable[[CaseResult], float | None] | None = None

    def axis(self) -> cs.Axis:
        return cs.Axis(t(self.label), self.scale, self.zero, self.include)  # type: ignore[arg-type]


ELEMENTS = Quantity("chart.axis.elements", "log2", value=lambda r: float(math.prod(r.case.shape)))
FLOP = Quantity("chart.axis.flop", "log2", value=lambda r: float(r.traffic.flops))
# The roofline's x: FLOP per byte of the traffic the analysis counted for the case.
INTENSITY = Quantity("chart.axis.intensity", "log10",
                     value=lambda r: r.traffic.flops / r.traffic.bytes if r.traffic.bytes and r.traffic.flops else None)
TIME = Quantity("chart.axis.time_us", "log10")
SPEEDUP = Quantity("chart.axis.speedup", "linear", zero=False, include=(1.0,))
GBPS = Quantity("chart.axis.gbps", "linear")
TFLOPS = Quantity("chart.axis.tflops", "linear")
TFLOPS_LOG = Quantity("chart.axis.tflops", "log10")
RATIO = Quantity("chart.axis.ratio", "auto", zero=False, include=(1.0,))  # log only past 1.5 decades
BASE_TIME = Quantity("chart.axis.base_time_us", "log10")
DAYS = Quantity("chart.axis.days", "linear")
HOURS = Quantity("chart.axis.hours", "linear")


def size_quantity(op: OpSpec) -> Quantity:
    """The x of an op's charts: elements, or FLOP per call for a compute-bound op (a conv shape's product of
    dimensions would mean nothing)."""
    return FLOP if op.compute_bound else ELEMENTS


@dataclass(frozen=True)
class Facet:
    title: str
    series: tuple[cs.Series, ...]
    refs: tuple[cs.RefLine, ...] = ()
    roofs: tuple[cs.Roof, ...] = ()
    band: cs.Band | None = None


def facet_chart(title: str, description: str, facets: Sequence[Facet], x: Quantity, y: Quantity,
                legend: Sequence[cs.Key] | None = None) -> cs.Chart | None:
    """One chart of panels sharing both quantities; None when no panel has two distinct x to show."""
    panels = []
    for f in facets:
        series = tuple(s for s in f.series if s.points)
        panel = cs.Panel(f.title, x.axis(), y.axis(), series, f.refs, f.roofs, f.band)
        if cs.worth_drawing(panel):
            panels.append(panel)
    if not panels:
        return None
    if len(panels) == 1 and len(facets) == 1:
        panels[0] = replace(panels[0], title="")
    if len({p.refs for p in panels}) > 1:
        # Each panel its own ceilings (a precision's peaks): the one legend says which panel each belongs to.
        panels = [replace(p, refs=tuple(replace(r, label=t("chart.ref.panel", panel=p.title,
                                                                   label=r.label)) for r in p.refs))
                  for p in panels]
    return cs.Chart(title, tuple(panels), description, tuple(legend) if legend is not None else None)


@dataclass(frozen=True)
class Drawn:
    """A chart ready to place: ``name`` its file stem, ``op`` its op in ``section`` (None: the whole run); its SVG is
    drawn from ``spec`` when first asked for."""

    name: str
    op: str | None
    title: str
    spec: cs.Chart = field(repr=False)
    x: Quantity = field(repr=False)
    y: Quantity = field(repr=False)
    wide: bool = False
    section: str = ""  # which part of the document: "" (a single run), a GPU's bench, a sweep

    @cached_property
    def svg(self) -> str:
        from envcheck.render.chart_draw import to_svg

        return to_svg(self.spec, self.name)

    def png(self) -> bytes:
        from envcheck.render.chart_draw import to_png

        return to_png(self.spec)


def draw_all(charts: Sequence[Drawn]) -> None:
    """Draw the SVG of every chart not drawn yet, all at once (``chart_draw.to_svgs``: in parallel where it can)."""
    from envcheck.render.chart_draw import to_svgs

    todo = [d for d in charts if "svg" not in d.__dict__]
    for d, svg in zip(todo, to_svgs([(d.spec, d.name) for d in todo]), strict=True):
        d.__dict__["svg"] = svg  # the cached_property's own slot: as if ``d.svg`` had been read


def draw(name: str, op: str | None, chart: cs.Chart | None, x: Quantity, y: Quantity, section: str = "") -> Drawn | None:
    if chart is None:
        return None
    return Drawn(name, op, chart.title, chart, x, y, wide=len(chart.panels) > 1, section=section)


def _drawn(name: str, op: str | None, title: str, desc: str, facets: Sequence[Facet], x: Quantity, y: Quantity,
           legend: Sequence[cs.Key] | None = None, section: str = "") -> Drawn | None:
    return draw(name, op, facet_chart(title, desc, facets, x, y, legend), x, y, section)


# --------------------------------------------------------------------------- run charts


def _variants(rs: Sequence[CaseResult]) -> list[tuple[str, list[CaseResult]]]:
    groups: dict[str, list[CaseResult]] = {}
    for r in rs:
        groups.setdefault(fmt.precision_label(r.case.dtype, r.case.precision), []).append(r)
    return list(groups.items())


def _by_impl(rs: Sequence[CaseResult]) -> list[tuple[str, list[CaseResult]]]:
    return [(impl, [r for r in rs if r.case.impl == impl]) for impl in IMPLS if any(r.case.impl == impl for r in rs)]


def _impl_series(impl: str, points: tuple[cs.Point, ...], name: str | None = None, **kw: bool) -> cs.Series:
    return cs.Series(name or impl, points, IMPL_COLORS.get(impl, st.GREY), IMPL_MARKERS.get(impl, "diamond"), **kw)


def _tip(r: CaseResult, value: str) -> str:
    return f"{r.case.impl} {fmt.shape(r.case.shape)}: {value}"


def _points(rs: Sequence[CaseResult], x: Quantity, y: Callable[[CaseResult], float | None],
            show: Callable[[float], str]) -> tuple[cs.Point, ...]:
    out = []
    assert x.value is not None
    for r in rs:
        xv, yv = x.value(r), y(r)
        if xv is not None and yv is not None and xv > 0 and math.isfinite(yv):
            out.append(cs.Point(xv, yv, _tip(r, show(yv))))
    return tuple(out)


def _times(rs: Sequence[CaseResult], x: Quantity, timing: Callable[[CaseResult], Timing | None]
           ) -> tuple[cs.Point, ...]:
    """Each row's median time with its interquartile range as its interval: a noisy row shows how noisy it is."""
    pts = _points(rs, x, lambda r: tm.median_us if (tm := timing(r)) else None, fmt.duration_us)
    assert x.value is not None
    iqr = {}
    for r in rs:
        tm = timing(r)
        if tm is not None and x.value(r) is not None and tm.n > 1 and 0 < tm.q1_us <= tm.median_us <= tm.q3_us:
            iqr[(x.value(r), tm.median_us)] = (tm.q1_us, tm.q3_us)
    return tuple(replace(p, low=iqr[(p.x, p.y)][0], high=iqr[(p.x, p.y)][1]) if (p.x, p.y) in iqr else p for p in pts)


def _time_chart(op: str, rs: Sequence[CaseResult], backend: str) -> Drawn | None:
    x = size_quantity(rs[0].spec)
    facets = []
    for variant, vrs in _variants(rs):
        series = []
        for impl, irs in _by_impl(vrs):
            gpu, launch = _times(irs, x, lambda r: r.case.gpu), _times(irs, x, lambda r: r.case.launch)
            if gpu:
                series.append(_impl_series(impl, gpu, t("chart.series.gpu_time", impl=impl)))
            if launch:
                key = "chart.series.launch_time" if backend == "cuda" else "chart.series.host_time"
                series.append(_impl_series(impl, launch, t(key, impl=impl), dashed=bool(gpu), hollow=bool(gpu)))
        facets.append(Facet(variant, tuple(series)))
    desc = t("chart.desc.time", op=op) if backend == "cuda" else t("chart.desc.time_cpu", op=op)
    desc += " " + t("chart.series.iqr")
    return _drawn(f"{op}_time", op, t("chart.title.time", op=op), desc, facets, x, TIME)


def _speedup_chart(op: str, rs: Sequence[CaseResult]) -> Drawn | None:
    x = size_quantity(rs[0].spec)
    facets = []
    for variant, vrs in _variants(rs):
        series = [_impl_series(impl, _points(irs, x, lambda r: r.speedup, fmt.speedup)) for impl, irs in _by_impl(vrs)
                  if impl != rs[0].spec.baseline]
        parity = cs.RefLine(1.0, t("chart.ref.parity"), IMPL_COLORS["torch"], dashed=True)
        facets.append(Facet(variant, tuple(series), (parity,)))
    return _drawn(f"{op}_speedup", op, t("chart.title.speedup", op=op), t("chart.desc.speedup", op=op), facets, x,
                  SPEEDUP)


def _throughput_chart(op: str, rs: Sequence[CaseResult], ba: BenchAnalysis) -> Drawn | None:
    x = size_quantity(rs[0].spec)
    compute = rs[0].spec.compute_bound
    y = TFLOPS if compute else GBPS
    unit = "TFLOP/s" if compute else "GB/s"
    facets = []
    for variant, vrs in _variants(rs):
        series = [_impl_series(impl, _points(irs, x, lambda r: r.tflops if compute else r.gbps,
                                             lambda v: fmt.rate(v, unit))) for impl, irs in _by_impl(vrs)]
        name = vrs[0].case.precision if compute else BANDWIDTH
        refs = []
        for kind, color, dashed in ((THEORETICAL, st.GREY, False), (MEASURED, MEASURED_COLOR, True)):
            c = ba.ceilings.get(name, kind)
            if c is not None:
                refs.append(cs.RefLine(c.value, t(f"chart.ref.{kind}", value=fmt.num(c.value), unit=unit),
                                       color, dashed))
        facets.append(Facet(variant, tuple(series), tuple(refs)))
    # A CPU's bandwidth is its memory's (RAM), not a GPU's.
    cpu = "_cpu" if ba.bench.device.backend == "cpu" and not compute else ""
    title = t("chart.title.tflops" if compute else f"chart.title.bandwidth{cpu}", op=op)
    desc = t("chart.desc.tflops" if compute else f"chart.desc.bandwidth{cpu}", op=op)
    return _drawn(f"{op}_{'tflops' if compute else 'bandwidth'}", op, title, desc, facets, x, y)


def _roofline(ba: BenchAnalysis) -> Drawn | None:
    """Every measured case by arithmetic intensity and TFLOP/s under the memory and compute roofs,
    theoretical (solid) and measured in this run (dashed)."""
    roofs: list[cs.Roof] = []
    for kind, color in ((THEORETICAL, st.GREY), (MEASURED, MEASURED_COLOR)):
        bw = ba.ceilings.get(BANDWIDTH, kind)
        if bw is not None:
            roofs.append(cs.MemoryRoof(bw.value / 1e3, t(f"chart.roof.memory_{kind}",
                                                                value=fmt.num(bw.value)), color, kind == MEASURED))
        # Precisions sharing a peak share one roof and one label.
        peaks: dict[float, list[str]] = {}
        for c in ba.ceilings.found:
            if c.kind == kind and c.name != BANDWIDTH:
                peaks.setdefault(round(c.value, 1), []).append(c.name)
        for value, names in sorted(peaks.items(), reverse=True):
            roofs.append(cs.ComputeRoof(value, t(f"chart.roof.compute_{kind}", precision="/".join(names),
                                                         value=fmt.num(value)), color, kind == MEASURED))
    if not any(isinstance(r, cs.MemoryRoof) for r in roofs):
        return None  # without a memory roof the chart has nothing to hold the points against
    series = []
    rs = [r for r in ba.results if r.tflops]
    for impl, irs in _by_impl(rs):
        for op in dict.fromkeys(r.case.op for r in irs):
            pts = _points([r for r in irs if r.case.op == op], INTENSITY, lambda r: r.tflops,
                          lambda v: fmt.rate(v, "TFLOP/s"))
            series.append(cs.Series(f"{impl} {op}", tuple(cs.Point(p.x, p.y, f"{op} {p.label}") for p in pts),
                                    IMPL_COLORS.get(impl, st.GREY), OP_MARKERS.get(op, "cross"), connect=False))
    legend = [cs.Key(impl, IMPL_COLORS.get(impl, st.GREY), None, line=True) for impl, _ in _by_impl(rs)]
    legend += [cs.Key(op, st.GREY, OP_MARKERS.get(op, "cross"), line=False) for op in dict.fromkeys(r.case.op for r in rs)]
    return _drawn("roofline", None, t("chart.title.roofline"), t("chart.desc.roofline"),
                  [Facet("", tuple(series), roofs=tuple(roofs))], INTENSITY, TFLOPS_LOG, legend)


def run_charts(ba: BenchAnalysis, section: str = "") -> list[Drawn]:
    """The charts of one device's run, in the order the report shows them; with ``section`` (a GPU of a
    node run) their file names start with it, so the charts of several GPUs share a folder."""
    out: list[Drawn | None] = []
    backend = ba.bench.device.backend
    measured = [r for r in ba.results if r.time is not None]
    for op in dict.fromkeys(r.case.op for r in measured):
        rs = [r for r in measured if r.case.op == op]
        out.append(_time_chart(op, rs, backend))
        out.append(_speedup_chart(op, rs))
        out.append(_throughput_chart(op, rs, ba))
    if backend == "cuda":
        out.append(_roofline(ba))
    return [replace(d, name=f"{section}{d.name}", section=section) if section else d for d in out if d is not None]


# --------------------------------------------------------------------------- diff and history charts


def ratio_chart(cmp: Comparison, practical_pct: float | None = None) -> Drawn | None:
    """Each compared case's time ratio with its interval against its baseline time (launch-bound calls to long
    ones, where ratios usually differ), a panel per op, over the 1.0 line and the practical band."""
    band = None
    if practical_pct:
        p = practical_pct / 100
        band = cs.Band(1 / (1 + p), 1 + p, t("chart.band.practical", pct=fmt.general(practical_pct)))
    facets = []
    for op in dict.fromkeys(c.op for c in cmp.compared):
        cases = [c for c in cmp.compared if c.op == op and c.base_us and c.ratio]
        series = []
        for impl in dict.fromkeys(c.impl for c in cases):
            pts = tuple(cs.Point(c.base_us, c.ratio, f"{c.name}: {fmt.ratio(c.ratio)}",  # type: ignore[arg-type]
                                 *((c.low, c.high) if c.low is not None and c.high is not None else ()))
                        for c in cases if c.impl == impl)
            series.append(cs.Series(impl, pts, IMPL_COLORS.get(impl, st.BLACK), IMPL_MARKERS.get(impl, "diamond"),
                                    connect=False))
        same = cs.RefLine(1.0, t("chart.ref.same"), st.GREY, dashed=True)
        facets.append(Facet(op, tuple(series), (same,), band=band))
    title = t("chart.title.ratio", other=cmp.other.label, baseline=cmp.base.label)
    return _drawn("ratio", None, title, t("chart.desc.ratio"), facets, BASE_TIME, RATIO)


def _when(created: str) -> datetime | None:
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None


def history_chart(h: History) -> Drawn | None:
    """Per op, the geometric-mean time ratio to the first report over time (days since the first)."""
    times = [_when(p.info.created) for p in h.points]
    if any(w is None for w in times) or len(times) < 2:
        return None
    t0 = times[0]
    span_h = (max(times) - t0).total_seconds() / 3600  # type: ignore[operator,type-var]
    x, unit_s = (HOURS, 3600) if span_h < 48 else (DAYS, 86400)
    series = []
    for i, op in enumerate(h.ops):
        pts = []
        for p, when in zip(h.points, times, strict=True):
            o = p.op(op)
            if o is not None and o.ratio is not None and o.ratio > 0:
                since = (when - t0).total_seconds() / unit_s  # type: ignore[operator]
                pts.append(cs.Point(since, o.ratio, f"{op} {p.info.label}: {fmt.ratio(o.ratio)}"))
        series.append(cs.Series(op, tuple(pts), SERIES_COLORS[i % len(SERIES_COLORS)],
                                OP_MARKERS.get(op, st.MARKERS[i % len(st.MARKERS)])))
    same = cs.RefLine(1.0, t("chart.ref.first"), st.GREY, dashed=True)
    return _drawn("history", None, t("chart.title.history"), t("chart.desc.history"),
                  [Facet("", tuple(series), (same,))], x, RATIO)


# --------------------------------------------------------------------------- node charts

SIZE_BYTES = Quantity("chart.axis.size_bytes", "log2")
BUSBW = Quantity("chart.axis.busbw", "linear")
BUSBW_COLOR = st.BLUE
# One colour and marker per NCCL algorithm/protocol, in the order they first appear in a sweep.
ALGO_STYLES = tuple(zip((st.VERMILLION, st.BLUISH_GREEN, st.REDDISH_PURPLE, st.ORANGE, st.SKY_BLUE, st.BLACK),
                        ("square", "triangle", "diamond", "cross", "plus", "circle"), strict=True))


def busbw_chart(sweep: SweepAnalysis, op: str, section: str) -> Drawn | None:
    """An op's bus bandwidth against message size, each size marked by NCCL's algorithm and protocol (a change of
    marker: NCCL switched), and what the links allow when the topology is known."""
    rows = [r for r in sweep.rows if r.op == op and r.busbw_gbps is not None and r.size_bytes > 0]
    if len(rows) < 2:
        return None

    def tip(r: CollectiveRow) -> str:
        algo = f" ({r.algo_label})" if r.algo_label else ""
        return f"{fmt.size_bytes(r.size_bytes)}: {fmt.rate(r.busbw_gbps, 'GB/s')}{algo}"

    curve = cs.Series(t("chart.series.busbw"),
                      tuple(cs.Point(r.size_bytes, r.busbw_gbps, tip(r)) for r in rows), BUSBW_COLOR, "circle")
    series = [curve]
    algos = list(dict.fromkeys(r.algo_label for r in sweep.rows if r.algo_label))
    legend = [cs.Key(curve.name, BUSBW_COLOR, "circle")]
    for label, (color, marker) in zip(algos, ALGO_STYLES, strict=False):
        pts = tuple(cs.Point(r.size_bytes, r.busbw_gbps, tip(r)) for r in rows if r.algo_label == label)
        if pts:
            series.append(cs.Series(label, pts, color, marker, connect=False))
            legend.append(cs.Key(label, color, marker, line=False))
    refs = ()
    if sweep.expectation_gbps is not None:
        refs = (cs.RefLine(sweep.expectation_gbps, t("chart.ref.links",
                                                             value=fmt.num(sweep.expectation_gbps)), st.GREY),)
    changes = [c for c in sweep.changes if c[0] == op]
    desc = t("chart.desc.busbw", op=op)
    if changes:
        desc += " " + t("list.sep").join(
            t("chart.desc.algo_change", size=fmt.size_bytes(s), before=b or "", after=a or "")
            for _, s, b, a in changes)
    return _drawn(f"{section}_{op}_busbw", op, t("chart.title.busbw", op=op), desc, [Facet("", tuple(series), refs)],
                  SIZE_BYTES, BUSBW, legend, section)
