"""Charts of a diff and a history as deterministic SVG text.

Same matplotlib settings and SVG writer as the report's charts
(``envcheck.render.charts``), so every chart envcheck draws looks and
serialises alike. Chart text stays English: DejaVu Sans, the font embedded as
outlines, has no CJK glyphs (see ``render.charts.CHART_LANG``).
"""

from __future__ import annotations

import math
from typing import Any

from envcheck.compare.diff import Comparison, GroupSummary
from envcheck.compare.history import History
from envcheck.render.charts import RC, WIDTH_IN, to_svg

FASTER = "#009E73"
SLOWER = "#D55E00"
SAME = "#888888"
OP_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")


def _color(g: GroupSummary) -> str:
    return {"faster": FASTER, "slower": SLOWER}.get(g.verdict, SAME)


def _symmetric_log_limits(ax: Any, values: list[float], axis: str) -> None:
    """Limits symmetric around 1.0 on a log axis, so 10% faster and 10% slower look equally far."""
    span = max([1.05, *(max(v, 1 / v) for v in values if v and v > 0)]) * 1.08
    (ax.set_xlim if axis == "x" else ax.set_ylim)(1 / span, span)
    _ratio_axis(ax.xaxis if axis == "x" else ax.yaxis, 1 / span, span)


NICE_TICKS = (0.25, 0.5, 0.67, 0.8, 0.9, 0.95, 0.98, 1.0, 1.02, 1.05, 1.1, 1.25, 1.5, 2.0, 4.0)


def _ratio_axis(axis: Any, lo: float, hi: float) -> None:
    """Readable ticks on a log ratio axis: log scale puts no labelled tick between 0.1 and 1, nor 1 and 10."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    # Ticks closer than ~1/12 of the axis (in log units) would overlap their labels: thin them from 1.0 outwards.
    min_gap = math.log(hi / lo) / 12
    ticks = [1.0]
    for v in sorted(v for v in NICE_TICKS if lo <= v <= hi and v > 1.0):
        if math.log(v / ticks[-1]) >= min_gap:
            ticks.append(v)
    for v in sorted((v for v in NICE_TICKS if lo <= v <= hi and v < 1.0), reverse=True):
        if math.log(ticks[0] / v) >= min_gap:
            ticks.insert(0, v)
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.3g}×"))


def ratio_chart(cmp: Comparison) -> str | None:
    """Per-op geometric-mean time ratio (other / baseline) as bars from 1.0, with 95% interval whiskers."""
    rows = [g for g in (*cmp.ops, cmp.overall) if g.geomean is not None]
    if not rows:
        return None
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(WIDTH_IN, 1.2 + 0.42 * len(rows)))
        ax = fig.subplots()
        ys = list(range(len(rows)))[::-1]
        values: list[float] = []
        for y, g in zip(ys, rows, strict=True):
            r = g.geomean or 1.0
            ax.barh(y, r - 1.0, left=1.0, height=0.55, color=_color(g), alpha=0.85, zorder=2)
            if g.low is not None and g.high is not None:
                ax.errorbar(r, y, xerr=[[r - g.low], [g.high - r]], fmt="none", ecolor="#222222", capsize=3,
                            linewidth=1.0, zorder=3)
                values += [g.low, g.high]
            values.append(r)
            # Outside the plot, right of it: a label can never cover a bar or a whisker.
            ax.annotate(f"{r:.3f}× (n={g.count})", xy=(1.0, y), xycoords=("axes fraction", "data"), xytext=(4, 0),
                        textcoords="offset points", ha="left", va="center", fontsize=8, color="#333333")
        ax.axvline(1.0, color="#222222", linewidth=1.0, zorder=1)
        ax.set_xscale("log")
        _symmetric_log_limits(ax, values, "x")
        ax.set_yticks(ys, [g.name for g in rows])
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("time ratio, other / baseline (log scale; < 1 is faster)")
        ax.set_title(f"{cmp.other.label} vs {cmp.base.label}")
        fig.tight_layout()
        return to_svg(fig)


def history_chart(h: History) -> str | None:
    """Per-op geometric-mean time ratio to the first report over the reports, steps marked."""
    if len(h.points) < 2 or not h.ops:
        return None
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(WIDTH_IN, 3.8))
        ax = fig.subplots()
        xs = list(range(len(h.points)))
        values: list[float] = []
        for i, op in enumerate(h.ops):
            pts = [(x, p.op(op)) for x, p in zip(xs, h.points, strict=True)]
            pts = [(x, o) for x, o in pts if o is not None and o.ratio is not None]
            if not pts:
                continue
            color = OP_COLORS[i % len(OP_COLORS)]
            px = [x for x, _ in pts]
            py = [o.ratio for _, o in pts]
            lo = [o.ratio - (o.low if o.low is not None else o.ratio) for _, o in pts]
            hi = [(o.high if o.high is not None else o.ratio) - o.ratio for _, o in pts]
            ax.errorbar(px, py, yerr=[lo, hi], color=color, marker="o", capsize=2.5, label=op)
            values += [v for v in py if v and math.isfinite(v)]
        for idx in sorted({s.index for s in h.steps}):
            ax.axvline(idx - 0.5, color="#999999", linestyle=":", linewidth=1.0)
        ax.axhline(1.0, color="#222222", linewidth=1.0)
        ax.set_yscale("log")
        _symmetric_log_limits(ax, values, "y")
        ax.set_xticks(xs, [p.info.created[:10] for p in h.points], rotation=30 if len(xs) > 6 else 0)
        ax.set_ylabel("time ratio to first report")
        ax.set_title("time ratio to the first report (dotted: a step change)")
        fig.tight_layout()
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(labels), 5))
        return to_svg(fig)
