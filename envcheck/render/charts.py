"""Charts of a benchmark run as SVG text: matplotlib (Agg), headless and byte-for-byte deterministic.

What makes the output identical on every machine:

* ``svg.fonttype = "path"``: glyphs are written as outlines taken from the DejaVu Sans
  that ships inside matplotlib, so the SVG depends neither on the fonts installed
  where it is rendered nor where it is viewed (with ``"none"`` a phone without
  DejaVu Sans would substitute a font whose widths break the layout);
* ``svg.hashsalt`` fixes the element ids matplotlib would otherwise draw at random;
* ``metadata={"Date": None, "Creator": None}`` drops the timestamp and version.

Chart text goes through the message catalogue, but DejaVu Sans has no CJK glyphs, so
for ``zh-CN`` the charts keep English labels (``CHART_LANG``) rather than show empty
boxes; the surrounding document is fully translated.

Colours are the Okabe-Ito colourblind-safe palette, one fixed colour per
implementation in every chart.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.model import Case, Report
from envcheck.render import findings
from envcheck.render.i18n import translate

IMPL_COLORS = {"torch": "#0072B2", "triton": "#D55E00", "compile": "#009E73"}
IMPL_MARKERS = {"torch": "o", "triton": "s", "compile": "^"}
OP_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
CEILING_COLOR = "#555555"
MEASURED_COLOR = "#CC79A7"
PEAK_COLORS = {"fp32": "#E69F00", "tf32": "#56B4E9", "fp16": "#009E73", "bf16": "#F0E442"}

# Chart languages: a language whose script DejaVu Sans cannot draw falls back to English.
CHART_LANG = {"en": "en", "zh-CN": "en"}

RC = {
    "svg.fonttype": "path",
    "svg.hashsalt": "envcheck",
    "font.family": "DejaVu Sans",
    "font.size": 9.5,
    "axes.titlesize": 10.5,
    "axes.labelsize": 9.5,
    "axes.grid": True,
    "axes.grid.which": "both",
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "axes.edgecolor": "#888888",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 4.5,
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "path.simplify": False,
}
WIDTH_IN = 7.4


@dataclass(frozen=True)
class ChartPlan:
    """One chart a report will show: ``name`` is its file stem, ``op`` the op it belongs to (None: whole run)."""

    name: str
    kind: str  # time | speedup | bandwidth | tflops | roofline
    op: str | None
    wide: bool = False  # several panels (one per dtype/precision): deserves a full row in the HTML


@dataclass(frozen=True)
class Chart:
    plan: ChartPlan
    title: str
    svg: str


def is_matmul(cases: Sequence[Case]) -> bool:
    return all(len(c.shape) == 3 for c in cases)


def _measured(cases: Sequence[Case]) -> list[Case]:
    return [c for c in cases if c.best_time is not None]


def _op_cases(report: Report, op: str) -> list[Case]:
    assert report.bench is not None
    return _measured([c for c in report.bench.cases if c.op == op])


def plan(report: Report) -> list[ChartPlan]:
    """The charts ``report`` supports, in reading order; cheap (draws nothing)."""
    if report.bench is None:
        return []
    from envcheck.summary import ops

    plans: list[ChartPlan] = []
    any_flops = False
    for op in ops(report.bench):
        cases = _op_cases(report, op)
        if not cases:
            continue
        wide = len(_facets(cases)) > 1
        plans.append(ChartPlan(f"{op}_time", "time", op, wide))
        if any(c.speedup is not None for c in cases):
            plans.append(ChartPlan(f"{op}_speedup", "speedup", op, wide))
        # Matmul is compute-bound: its pct_theoretical is a share of the FLOP/s peak, and its
        # GB/s would be drawn against a bandwidth ceiling it never approaches.
        if not is_matmul(cases) and any(c.gbps is not None for c in cases):
            plans.append(ChartPlan(f"{op}_bandwidth", "bandwidth", op, wide))
        if is_matmul(cases) and any(c.tflops for c in cases):
            plans.append(ChartPlan(f"{op}_tflops", "tflops", op, wide))
        any_flops = any_flops or any(c.flops and c.bytes for c in cases)
    if any_flops:
        plans.append(ChartPlan("roofline", "roofline", None, True))
    return plans


# --------------------------------------------------------------------------- helpers


def _x(case: Case) -> float:
    """The size axis: elements for vector / 2-D ops, the matrix side for square matmuls, else FLOPs."""
    if len(case.shape) == 3:
        m, n, k = case.shape
        return float(m) if m == n == k else float(case.flops or m * n * k)
    return float(math.prod(case.shape))


def _x_label(cases: Sequence[Case], t: Callable[..., str]) -> str:
    if is_matmul(cases):
        square = all(c.shape[0] == c.shape[1] == c.shape[2] for c in cases)
        return t("chart.axis.matrix_side") if square else t("chart.axis.flop")
    return t("chart.axis.elements")


def _facets(cases: Sequence[Case]) -> list[tuple[str, list[Case]]]:
    """Cases split by dtype/precision, in first-seen order: one subplot each."""
    groups: dict[str, list[Case]] = {}
    for c in cases:
        groups.setdefault(findings.variant(c), []).append(c)
    return list(groups.items())


def _series(cases: Sequence[Case]) -> list[tuple[str, list[Case]]]:
    """Cases of one facet split by implementation (torch first), each sorted by size."""
    from envcheck.model import IMPLS

    out = []
    for impl in IMPLS:
        cs = sorted((c for c in cases if c.impl == impl), key=_x)
        if cs:
            out.append((impl, cs))
    return out


def _figure(n_facets: int, height_per_row: float = 3.3) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    cols = 1 if n_facets == 1 else 2
    rows = math.ceil(n_facets / cols)
    fig = Figure(figsize=(WIDTH_IN, 0.9 + height_per_row * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n_facets:]:
        ax.set_visible(False)
    return fig, flat[:n_facets]


def _legend_below(fig: Any, axes: Sequence[Any]) -> None:
    """One legend for the figure, under the plots: it can never cover data or a label."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if not label.startswith("_"):
                handles.setdefault(label, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(len(handles), 3))


def to_svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.08, metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    # The XML prolog and DOCTYPE are invalid inside HTML; the <svg> element alone works in both.
    # The RDF <metadata> block only names namespaces by URL: dropped so a document holds no URLs.
    svg = svg[svg.index("<svg"):]
    start, end = svg.find(" <metadata>"), svg.find("</metadata>\n")
    if start != -1 and end != -1:
        svg = svg[:start] + svg[end + len("</metadata>\n"):]
    return svg


def _hline(ax: Any, y: float, label: str, color: str, style: str = "--", below: bool = False) -> None:
    """A labelled horizontal limit, its label at the left (where sizes are small and values low).

    ``below`` puts the label under the line: two close limits (theoretical and measured
    bandwidth) then label outwards and never overlap.
    """
    ax.axhline(y, color=color, linestyle=style, linewidth=1.1, zorder=1)
    ax.annotate(label, xy=(0.01, y), xycoords=("axes fraction", "data"), xytext=(0, -3 if below else 2),
                textcoords="offset points", fontsize=8, color=color, va="top" if below else "bottom", ha="left")


def _log_axes(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")


# --------------------------------------------------------------------------- the charts


def _time(report: Report, op: str, t: Callable[..., str]) -> Any:
    cases = _op_cases(report, op)
    facets = _facets(cases)
    fig, axes = _figure(len(facets))
    for ax, (variant, fcs) in zip(axes, facets, strict=True):
        for impl, cs in _series(fcs):
            color = IMPL_COLORS[impl]
            gpu = [(_x(c), c.gpu.median_us) for c in cs if c.gpu]
            if gpu:
                ax.plot(*zip(*gpu, strict=True), color=color, marker=IMPL_MARKERS[impl],
                        label=t("chart.series.gpu_time", impl=impl))
            launch = [(_x(c), c.launch.median_us) for c in cs if c.launch]
            if launch:
                ax.plot(*zip(*launch, strict=True), color=color, marker=IMPL_MARKERS[impl], linestyle=":",
                        markerfacecolor="white", label=t("chart.series.launch_time", impl=impl))
        _log_axes(ax)
        ax.set_title(variant if len(facets) > 1 else t("chart.title.time", op=op))
        ax.set_xlabel(_x_label(fcs, t))
        ax.set_ylabel(t("chart.axis.time_us"))
    if len(facets) > 1:
        fig.suptitle(t("chart.title.time", op=op))
    fig.tight_layout()
    _legend_below(fig, axes)
    return fig


def _speedup(report: Report, op: str, t: Callable[..., str]) -> Any:
    cases = _op_cases(report, op)
    facets = [(v, cs) for v, cs in _facets(cases) if any(c.speedup is not None for c in cs)]
    fig, axes = _figure(len(facets), height_per_row=2.9)
    for ax, (variant, fcs) in zip(axes, facets, strict=True):
        ys: list[float] = [1.0]
        for impl, cs in _series(fcs):
            pts = [(_x(c), c.speedup) for c in cs if c.speedup is not None]
            if impl == "torch" or not pts:
                continue
            ys += [y for _, y in pts]
            ax.plot(*zip(*pts, strict=True), color=IMPL_COLORS[impl], marker=IMPL_MARKERS[impl],
                    label=t("chart.series.speedup", impl=impl))
        ax.axhline(1.0, color=IMPL_COLORS["torch"], linestyle="--", linewidth=1.1,
                   label=t("chart.series.parity"))
        ax.set_xscale("log", base=2)
        # Linear, always showing 0.8x..1.2x: small differences stay small instead of filling the plot.
        ax.set_ylim(min(0.8, min(ys) * 0.95), max(1.2, max(ys) * 1.05))
        ax.yaxis.set_major_formatter(_speedup_formatter())
        ax.set_title(variant if len(facets) > 1 else t("chart.title.speedup", op=op))
        ax.set_xlabel(_x_label(fcs, t))
        ax.set_ylabel(t("chart.axis.speedup"))
    if len(facets) > 1:
        fig.suptitle(t("chart.title.speedup", op=op))
    fig.tight_layout()
    _legend_below(fig, axes)
    return fig


def _speedup_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    # round first: 1.05 and 1.1 must not both print as "1.1x"
    return FuncFormatter(lambda y, _pos: f"{round(y, 3):g}×")


def _bandwidth(report: Report, op: str, t: Callable[..., str]) -> Any:
    assert report.bench is not None
    cases = [c for c in _op_cases(report, op) if c.gbps is not None]
    facets = _facets(cases)
    fig, axes = _figure(len(facets))
    theo = report.bench.ceiling("bandwidth", "theoretical")
    meas = report.bench.ceiling("bandwidth", "measured")
    for ax, (variant, fcs) in zip(axes, facets, strict=True):
        top = max(c.gbps or 0 for c in fcs)
        for impl, cs in _series(fcs):
            pts = [(_x(c), c.gbps) for c in cs]
            ax.plot(*zip(*pts, strict=True), color=IMPL_COLORS[impl], marker=IMPL_MARKERS[impl],
                    label=t("chart.series.achieved", impl=impl))
        if theo:
            _hline(ax, theo.value, t("chart.ceiling.theoretical_bw", value=f"{theo.value:.0f}"), CEILING_COLOR)
            top = max(top, theo.value)
        if meas:
            _hline(ax, meas.value, t("chart.ceiling.measured_bw", value=f"{meas.value:.0f}"), MEASURED_COLOR, ":",
                   below=bool(theo) and meas.value <= theo.value)
            top = max(top, meas.value)
        ax.set_xscale("log", base=2)
        # Linear GB/s: the ceilings are what this chart is about, and on a log axis two ceilings
        # 10% apart (theoretical vs measured) collapse onto each other.
        ax.set_ylim(0, top * 1.12)
        ax.set_title(variant if len(facets) > 1 else t("chart.title.bandwidth", op=op))
        ax.set_xlabel(_x_label(fcs, t))
        ax.set_ylabel(t("chart.axis.gbps"))
    if len(facets) > 1:
        fig.suptitle(t("chart.title.bandwidth", op=op))
    fig.tight_layout()
    _legend_below(fig, axes)
    return fig


def _tflops(report: Report, op: str, t: Callable[..., str]) -> Any:
    assert report.bench is not None
    cases = [c for c in _op_cases(report, op) if c.tflops]
    facets = _facets(cases)
    fig, axes = _figure(len(facets), height_per_row=2.9)
    for ax, (variant, fcs) in zip(axes, facets, strict=True):
        top = max(c.tflops or 0 for c in fcs)
        for impl, cs in _series(fcs):
            pts = [(_x(c), c.tflops) for c in cs]
            ax.plot(*zip(*pts, strict=True), color=IMPL_COLORS[impl], marker=IMPL_MARKERS[impl],
                    label=t("chart.series.achieved", impl=impl))
        peak = report.bench.ceiling(fcs[0].precision, "theoretical")
        if peak:
            _hline(ax, peak.value, t("chart.ceiling.peak", precision=peak.name, value=f"{peak.value:.0f}"),
                   CEILING_COLOR)
            top = max(top, peak.value)
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, top * 1.18)
        ax.set_title(variant)
        ax.set_xlabel(_x_label(fcs, t))
        ax.set_ylabel(t("chart.axis.tflops"))
    fig.suptitle(t("chart.title.tflops", op=op))
    fig.tight_layout()
    _legend_below(fig, axes)
    return fig


@dataclass(frozen=True)
class _Peak:
    name: str  # precisions sharing this peak, "fp16/bf16"
    value: float


def _peaks(ceilings: Sequence[Any]) -> list[_Peak]:
    """Theoretical FLOP/s roofs, highest first; precisions with the same peak share one line and label."""
    by_value: dict[float, list[str]] = {}
    for c in ceilings:
        if c.unit == "TFLOP/s" and c.kind == "theoretical":
            by_value.setdefault(round(c.value, 1), []).append(c.name)
    return [_Peak("/".join(names), v) for v, names in sorted(by_value.items(), reverse=True)]


def _roofline(report: Report, t: Callable[..., str]) -> Any:
    """Arithmetic intensity against achieved FLOP/s, with the bandwidth slope and the compute roofs."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from envcheck.summary import ops

    assert report.bench is not None
    bench = report.bench
    fig = Figure(figsize=(WIDTH_IN, 4.6))
    ax = fig.subplots()
    op_list = ops(bench)
    points = [c for c in _measured(list(bench.cases)) if c.flops and c.bytes and c.best_time]
    xs = [c.flops / c.bytes for c in points]
    ys = [c.flops / (c.best_time.median_us * 1e-6) / 1e12 for c in points]  # type: ignore[union-attr]
    x_lo, x_hi = min(xs) / 4, max(xs) * 4
    peaks = _peaks(bench.ceilings)
    y_hi = max([*ys, *(p.value for p in peaks)]) * 2.5
    for impl in dict.fromkeys(c.impl for c in points):
        for i, op in enumerate(op_list):
            sel = [(x, y) for c, x, y in zip(points, xs, ys, strict=True) if c.impl == impl and c.op == op]
            if sel:
                ax.scatter(*zip(*sel, strict=True), s=22, color=IMPL_COLORS[impl],
                           marker=OP_MARKERS[i % len(OP_MARKERS)], alpha=0.85, linewidths=0, zorder=3)
    bw = bench.ceiling("bandwidth", "theoretical")
    ridge_xs = []
    if bw:
        gb = bw.value / 1e3  # GB/s -> TB/s: TFLOP/s = AI (FLOP/B) x TB/s
        roof = peaks[0].value if peaks else y_hi
        x_ridge = roof / gb
        ridge_xs.append(x_ridge)
        ax.plot([x_lo, min(x_ridge, x_hi * 100)], [x_lo * gb, min(x_ridge, x_hi * 100) * gb], color=CEILING_COLOR,
                linewidth=1.2, zorder=2)
        ax.annotate(t("chart.ceiling.slope", value=f"{bw.value:.0f}"), xy=(x_lo * 1.3, x_lo * 1.3 * gb),
                    xytext=(4, 6), textcoords="offset points", fontsize=8, color=CEILING_COLOR, rotation=0)
        for p in peaks:
            start = p.value / gb
            ax.plot([start, x_hi * 100], [p.value, p.value], color=PEAK_COLORS.get(p.name.split("/")[0], CEILING_COLOR),
                    linestyle="--", linewidth=1.1, zorder=2)
    for p in peaks:
        ax.annotate(t("chart.ceiling.peak", precision=p.name, value=f"{p.value:.0f}"), xy=(1.0, p.value),
                    xycoords=("axes fraction", "data"), xytext=(-2, 2), textcoords="offset points", ha="right",
                    va="bottom", fontsize=8, color=CEILING_COLOR)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(min(ys) / 3, y_hi)
    ax.set_xlabel(t("chart.axis.intensity"))
    ax.set_ylabel(t("chart.axis.tflops"))
    ax.set_title(t("chart.title.roofline"))
    handles = [Line2D([], [], color=IMPL_COLORS[i], marker="o", linestyle="", label=i)
               for i in dict.fromkeys(c.impl for c in points)]
    handles += [Line2D([], [], color="#444444", marker=OP_MARKERS[i % len(OP_MARKERS)], linestyle="", label=op)
                for i, op in enumerate(op_list) if any(c.op == op for c in points)]
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(handles), 5))
    return fig


def draw(report: Report, chart: ChartPlan, lang: str = "en") -> Chart:
    """One chart as standalone SVG text (no XML prolog), identical bytes for identical input."""
    # Figure objects without pyplot: no global figure registry, no GUI backend, nothing to close.
    import matplotlib

    chart_lang = CHART_LANG.get(lang, "en")

    def t(key: str, **kw: Any) -> str:
        return translate(chart_lang, key, **kw)

    with matplotlib.rc_context(RC):
        if chart.kind == "roofline":
            fig = _roofline(report, t)
        else:
            assert chart.op is not None
            fig = {"time": _time, "speedup": _speedup, "bandwidth": _bandwidth, "tflops": _tflops}[chart.kind](
                report, chart.op, t)
        svg = to_svg(fig)
    title_key = f"chart.title.{chart.kind}"
    return Chart(chart, translate(lang, title_key, op=chart.op or ""), svg)


def draw_all(report: Report, lang: str = "en") -> list[Chart]:
    return [draw(report, p, lang) for p in plan(report)]
