"""A ``chart_spec.Chart`` drawn with matplotlib: SVG text for documents, PNG for pasting into an issue.
Deterministic SVG (no date, fixed hash salt, only referenced ids kept); text as text in a font list that reaches
CJK, mathtext off; points of ragged sizes drawn alone, never as a cliff of the line; axes that cannot exaggerate
(a log axis spans a decade, a linear one includes zero or ±10 %); ticks in ``fmt``'s notation; the legend below."""

from __future__ import annotations

import contextlib
import io
import math
import re
import unicodedata
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from envcheck.render import chart_style as st
from envcheck.render import fmt
from envcheck.render.chart_spec import (
    Chart,
    Key,
    MemoryRoof,
    Panel,
    Point,
    Series,
    clean,
    roof_segments,
    scales,
    y_values,
)
from envcheck.render.i18n import t

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INTERVAL = "interval"
MAX_MARKED = 60  # points of a line beyond which it is drawn without markers
RAGGED = 1.2  # x within this factor of a neighbour's: the same size, ragged, not a step along the line
MIN_LOG_RATIO = 10.0
MIN_REL_SPAN = 0.2
MAX_TICKS = 8
_LOG_PAD = 0.03
_LINEAR_PAD = 0.03
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_SI = "kMGTPE"

# Margins of a panel's cell, SVG units: room for tick labels and the axis label beside and below the plot.
_LEFT, _RIGHT, _TOP, _BOTTOM = 78.0, 16.0, 30.0, 58.0
_TITLE_ROOM = 30.0


# --------------------------------------------------------------------------- ragged sizes


def _power_of_two(x: float) -> bool:
    m, _ = math.frexp(x)
    return x > 0 and m == 0.5


def split_ragged(points: Sequence[Point], log: bool = True) -> tuple[list[list[Point]], list[Point]]:
    """(runs of the line, points drawn alone), by x: of points within ``RAGGED`` of each other, the one at a power of
    two stays on the line and the others stand alone (a line through them would be a cliff, not a trend)."""
    pts = sorted(points, key=lambda p: p.x)
    groups: list[list[Point]] = []
    for p in pts:
        if groups and (p.x <= groups[-1][-1].x * RAGGED if log else p.x == groups[-1][-1].x):
            groups[-1].append(p)
        else:
            groups.append([p])
    runs: list[list[Point]] = [[]]
    alone: list[Point] = []
    for g in groups:
        keep = g[0] if len(g) == 1 else next((p for p in g if _power_of_two(p.x)), None)
        alone += [p for p in g if p is not keep]
        if keep is not None:
            runs[-1].append(keep)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r], alone


# --------------------------------------------------------------------------- text


def _width(text: str, size: float) -> float:
    """A generous estimate of the drawn width (Latin ~0.62 em, CJK a full em): for layout, never for text."""
    return size * sum(1.0 if unicodedata.east_asian_width(c) in "WF" else 0.62 for c in text)


def _wrap(text: str, size: float, width: float, lines: int = 2) -> str:
    """``text`` broken at spaces (or between CJK characters) into at most ``lines`` lines of ``width``; "…" if cut."""
    out: list[str] = []
    cur = ""
    for token in re.findall(r"\s+|[\u2e80-\u9fff\uff00-\uffef]|[^\s\u2e80-\u9fff\uff00-\uffef]+", text):
        if cur and _width(cur + token, size) > width:
            out.append(cur.rstrip())
            cur = token.lstrip()
        else:
            cur += token
    out.append(cur.rstrip())
    if len(out) > lines:
        last = out[lines - 1]
        while last and _width(last + "…", size) > width:
            last = last[:-1]
        out = out[:lines - 1] + [last + "…"]
    return "\n".join(out)


# --------------------------------------------------------------------------- axes


def _binary(v: float) -> str:
    k = round(math.log2(v))
    return fmt.count(1 << k) if k >= 0 else f"2{str(k).translate(_SUPERSCRIPT)}"


def _decimal(v: float, si: bool) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    sign = "−" if v < 0 else ""
    if a < 1e-3 or a >= 1e18:
        k = round(math.log10(a))
        if math.isclose(a, 10.0**k, rel_tol=1e-9):
            return f"{sign}10{str(k).translate(_SUPERSCRIPT)}"
        return sign + fmt.exp(a, 2)
    if si and a >= 1000:
        e = min(int(math.log10(a) + 1e-9) // 3, len(_SI))
        return f"{sign}{float(f'{a / 10 ** (3 * e):.6g}'):g}{_SI[e - 1]}"
    return f"{sign}{float(f'{a:.6g}'):g}"


def _limits(values: Sequence[float], scale: str, zero: bool) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if scale == "linear":
        if zero:
            lo, hi = min(lo, 0.0), max(hi, 0.0)
        else:
            need = MIN_REL_SPAN * max(abs(lo), abs(hi))
            if hi - lo < need:
                mid = (lo + hi) / 2
                lo, hi = mid - need / 2, mid + need / 2
                if min(values) >= 0 > lo:  # a positive quantity gets no negative ticks
                    lo, hi = 0.0, hi - lo
        if hi == lo:
            hi = lo + 1.0
        pad = _LINEAR_PAD * (hi - lo)
        return (lo if lo == 0 and min(values) >= 0 else lo - pad), hi + pad
    if hi / lo < MIN_LOG_RATIO:
        mid = math.sqrt(lo * hi)
        lo, hi = mid / math.sqrt(MIN_LOG_RATIO), mid * math.sqrt(MIN_LOG_RATIO)
    pad = (hi / lo) ** _LOG_PAD
    return lo / pad, hi * pad


def _locator(scale: str, lo: float, hi: float) -> Any:
    """Nice linear steps, or powers of the base (with 2x/5x or 3x between on a base-10 axis of few decades)."""
    from matplotlib import ticker

    if scale == "linear":
        return ticker.MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10])
    base = 2 if scale == "log2" else 10
    decades = math.log10(hi / lo)
    subs: tuple[float, ...] = (1.0,)
    if base == 10 and decades < 2.2:
        subs = (1.0, 2.0, 5.0)
    elif base == 10 and decades < 4:
        subs = (1.0, 3.0)
    return ticker.LogLocator(base=base, subs=subs, numticks=MAX_TICKS)


def _axis(ax: Axes, which: str, scale: str, values: Sequence[float], zero: bool) -> list[tuple[float, str]]:
    """Set the axis' scale and limits; its ticks as (value, label). matplotlib's own tick artists are switched
    off and the ticks drawn by ``_ticks`` instead: five artists per tick were most of a chart's drawing time."""
    from matplotlib import ticker

    lo, hi = _limits(values, scale, zero)
    base = {} if scale == "linear" else {"base": 2 if scale == "log2" else 10}
    getattr(ax, f"set_{which}scale")("linear" if scale == "linear" else "log", **base)
    getattr(ax, f"set_{which}lim")(lo, hi)
    axis = getattr(ax, f"{which}axis")
    axis.set_major_locator(ticker.NullLocator())
    axis.set_minor_locator(ticker.NullLocator())
    ticks = [float(t) for t in _locator(scale, lo, hi).tick_values(lo, hi) if lo <= t <= hi]
    si = max(abs(lo), abs(hi)) >= 1e4  # tick values in ``fmt``'s notation, SI prefixes from 10^4
    return [(t, _binary(t) if scale == "log2" else _decimal(t, si)) for t in ticks]


def _ticks(ax: Axes, xt: Sequence[tuple[float, str]], yt: Sequence[tuple[float, str]], panel: Panel) -> None:
    """Grid lines, tick marks, tick labels and axis labels, as a few collections and texts."""
    from matplotlib import markers
    from matplotlib.transforms import offset_copy

    fig = ax.figure
    xs, ys = [t for t, _ in xt], [t for t, _ in yt]
    xa, ya = ax.get_xaxis_transform(), ax.get_yaxis_transform()
    ax.vlines(xs, 0, 1, transform=xa, colors=st.GRID, lw=0.8, zorder=0.4)
    ax.hlines(ys, 0, 1, transform=ya, colors=st.GRID, lw=0.8, zorder=0.4)
    ax.plot(xs, [0.0] * len(xs), ls="none", marker=markers.TICKDOWN, ms=4, mew=0.8, color=st.MUTED, transform=xa,
            clip_on=False)
    ax.plot([0.0] * len(ys), ys, ls="none", marker=markers.TICKLEFT, ms=4, mew=0.8, color=st.MUTED, transform=ya,
            clip_on=False)
    below = offset_copy(xa, fig=fig, y=-7, units="points")
    left = offset_copy(ya, fig=fig, x=-7, units="points")
    # Texts of the figure, not of the axes: the axes would give each a clip path, which costs more than the text.
    for x, text in xt:
        fig.text(x, 0, text, transform=below, ha="center", va="top", fontsize=st.TICK_SIZE, color=st.INK)
    for y, text in yt:
        fig.text(0, y, text, transform=left, ha="right", va="center", fontsize=st.TICK_SIZE, color=st.INK)
    fig.text(0.5, 0, _wrap(clean(panel.x.label), st.LABEL_SIZE, st.PANEL_W - _LEFT, 1),
            transform=offset_copy(ax.transAxes, fig=fig, y=-26, units="points"), ha="center", va="top",
            fontsize=st.LABEL_SIZE, color=st.INK)
    fig.text(0, 0.5, _wrap(clean(panel.y.label), st.LABEL_SIZE, st.PANEL_H - _TOP - _BOTTOM, 1),
            transform=offset_copy(ax.transAxes, fig=fig, x=-(_LEFT - 4), units="points"), ha="left",
            va="center", rotation=90, fontsize=st.LABEL_SIZE, color=st.INK)


# --------------------------------------------------------------------------- drawing


def split_missing(runs: Sequence[Sequence[Point]], others: Sequence[float], log: bool = True) -> list[list[Point]]:
    """``runs`` broken where the panel shows a size (``others``: every x of its series) between two neighbours
    that this series was not measured at: a line drawn across it would claim a value nobody measured."""
    out: list[list[Point]] = []
    for run in runs:
        cur: list[Point] = []
        for p in run:
            if cur:
                a, b = cur[-1].x, p.x
                near = (lambda x, y: max(x, y) <= min(x, y) * RAGGED) if log else (lambda x, y: x == y)
                if any(a < o < b and not near(o, a) and not near(o, b) for o in others):
                    out.append(cur)
                    cur = []
            cur.append(p)
        out.append(cur)
    return [r for r in out if r]


def _series(ax: Axes, s: Series, log_x: bool, others: Sequence[float] = ()) -> None:
    code = st.MARKER_CODES[s.marker]
    ls = "--" if s.dashed else "-"
    fill, other = ("white", s.color) if s.hollow else (s.color, "white")
    runs, alone = split_ragged(s.points, log_x) if s.connect else ([], sorted(s.points, key=lambda p: p.x))
    runs = split_missing(runs, others, log_x)
    dense = len(s.points) > MAX_MARKED  # telemetry every second: the line says it all, markers would be a smear
    for run in runs:
        # A dense line keeps a few markers (every twelfth of it): lines of one colour family stay told apart.
        ax.plot([p.x for p in run], [p.y for p in run], color=s.color, ls=ls, lw=st.LINE_WIDTH, marker=code,
                markevery=max(1, len(run) // 12) if dense else None,
                ms=st.MARKER_SIZE, mfc=fill, mec=s.color, solid_joinstyle="round")
    if alone:
        # Markers of a scatter keep the series' fill; ragged points of a line take the opposite one.
        ax.plot([p.x for p in alone], [p.y for p in alone], ls="none", marker=code, ms=st.MARKER_SIZE,
                mfc=fill if not s.connect else other, mec=s.color)
    bars = [p for p in s.points if p.low is not None and p.high is not None]
    if bars:
        drawn = ax.errorbar([p.x for p in bars], [p.y for p in bars],
                            yerr=[[p.y - p.low for p in bars], [p.high - p.y for p in bars]],  # type: ignore[operator]
                            fmt="none", ecolor=s.color, elinewidth=1.2, capsize=3)
        for c in drawn.lines[2]:
            c.set_gid(INTERVAL)  # what tests find the intervals by (the SVG keeps no unreferenced id)


def _panel(ax: Axes, panel: Panel) -> None:
    sx, sy = scales(panel)
    xs = [p.x for s in panel.series for p in s.points] + list(panel.x.include)
    xt = _axis(ax, "x", sx, xs, panel.x.zero)
    yt = _axis(ax, "y", sy, y_values(panel), panel.y.zero)
    if panel.band is not None:
        ax.axhspan(panel.band.low, panel.band.high, color=st.BAND, lw=0, zorder=0.5)
    for ref in panel.refs:
        ax.axhline(ref.value, color=ref.color, ls="--" if ref.dashed else "-", lw=1.3, zorder=1.5)
    x_lo, x_hi = ax.get_xlim()
    for roof, a, b in roof_segments(panel.roofs, x_lo, x_hi):
        ys = (roof.value * a, roof.value * b) if isinstance(roof, MemoryRoof) else (roof.value, roof.value)
        ax.plot((a, b), ys, color=roof.color, ls="--" if roof.measured else "-", lw=1.5, zorder=1.5)
    ax.set_xlim(x_lo, x_hi)
    # Sizes a series ran at (a chart of run times): a compile series measured at fewer sizes breaks where it did not.
    sizes = sorted({p.x for s in panel.series if s.connect for p in s.points}) if sx != "linear" else []
    for s in panel.series:
        _series(ax, s, sx != "linear", sizes)
    _ticks(ax, xt, yt, panel)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def legend_keys(chart: Chart) -> list[Key]:
    """The legend: the chart's own keys or one per series name, then one per ceiling, roof and band label, and
    what a marker off the line means where the chart has one."""
    keys = list(chart.legend) if chart.legend is not None else [
        Key(s.name, s.color, s.marker, s.dashed, s.connect, s.hollow) for p in chart.panels for s in p.series]
    for p in chart.panels:
        keys += [Key(r.label, r.color, None, r.dashed) for r in p.refs]
        keys += [Key(r.label, r.color, None, r.measured) for r in p.roofs]
    # Points of a ragged size stand alone in the opposite fill (``_series``): the legend says what they are.
    if any(split_ragged(s.points, scales(p)[0] != "linear")[1] for p in chart.panels for s in p.series if s.connect):
        keys.append(Key(t("chart.key.off_grid"), st.INK, "circle", line=False, hollow=True))
    first: dict[str, Key] = {}
    for k in keys:
        first.setdefault(k.label, k)  # one entry per label, where and as it first appears
    return list(first.values())


def _bands(chart: Chart) -> list[str]:
    return list(dict.fromkeys(p.band.label for p in chart.panels if p.band is not None))


_HANDLE = 48.0  # a legend entry's handle and the space after it, SVG units (handlelength 2.2 + spacing 1.4 em)


def legend_layout(labels: Sequence[str], width: float) -> list[list[tuple[int, str]]]:
    """The legend's rows: entries (index, text) packed left to right, each row within ``width`` by a generous
    estimate of its text (``_width``), a text too long for one row wrapped over lines: no entry is ever cut."""
    room = width - 24
    rows: list[list[tuple[int, str]]] = []
    used = room
    for i, label in enumerate(labels):
        text = _wrap(clean(label), st.LABEL_SIZE, room - _HANDLE, lines=4)
        w = max(_width(line, st.LABEL_SIZE) for line in text.split("\n")) + _HANDLE
        if used + w > room:
            rows.append([])
            used = 0.0
        rows[-1].append((i, text))
        used += w
    return rows


def figure(chart: Chart) -> Figure:
    """The chart as a matplotlib Figure (no pyplot, no GUI): panels in a grid of at most ``MAX_COLUMNS``."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    n = len(chart.panels)
    cols = min(n, st.MAX_COLUMNS)
    rows = math.ceil(n / cols)
    width = cols * st.PANEL_W
    keys = legend_keys(chart)
    bands = _bands(chart)
    labels = [k.label for k in keys] + bands
    layout = legend_layout(labels, width)
    legend_rows = sum(max(x.count("\n") + 1 for _, x in r) for r in layout)
    title = _wrap(clean(chart.title), st.TITLE_SIZE, width - 20)
    title_h = _TITLE_ROOM * (title.count("\n") + 1)
    height = title_h + rows * st.PANEL_H + legend_rows * st.LEGEND_ROW + (10 if legend_rows else 0)
    fig = Figure(figsize=(width / 72, height / 72), dpi=72)
    # Title and legend start at the left edge: a phone scrolling a wide chart sideways starts there.
    fig.suptitle(title, x=12 / width, y=1 - 8 / height, ha="left", va="top", fontsize=st.TITLE_SIZE, color=st.INK)
    for i, panel in enumerate(chart.panels):
        r, c = divmod(i, cols)
        left = c * st.PANEL_W + _LEFT
        top = title_h + r * st.PANEL_H + _TOP
        w, h = st.PANEL_W - _LEFT - _RIGHT, st.PANEL_H - _TOP - _BOTTOM
        ax = fig.add_axes((left / width, 1 - (top + h) / height, w / width, h / height))
        _panel(ax, panel)
        if panel.title:  # placed by hand: matplotlib's own title placement measures every tick label again
            fig.text((left + w / 2) / width, 1 - (top - 8) / height, clean(panel.title), ha="center",
                     va="bottom", fontsize=st.PANEL_TITLE_SIZE, color=st.INK)
    if labels:
        handles: list[Any] = [
            Line2D([], [], color=k.color, ls=("--" if k.dashed else "-") if k.line else "none", lw=st.LINE_WIDTH,
                   marker=st.MARKER_CODES[k.marker] if k.marker else None, ms=st.MARKER_SIZE,
                   mfc="white" if k.hollow else k.color, mec=k.color) for k in keys]
        handles += [Patch(facecolor=st.BAND, edgecolor="none") for _ in bands]
        # One legend per row, rows from the bottom up: each row as wide as its own entries, never a grid's columns.
        below = 0.0
        for row in reversed(layout):
            fig.legend([handles[i] for i, _ in row], [t for _, t in row], loc="lower left", ncol=len(row),
                       bbox_to_anchor=(12 / width, (4 + below) / height), handlelength=2.2, columnspacing=1.4,
                       borderaxespad=0, borderpad=0.2)
            below += max(x.count("\n") + 1 for _, x in row) * st.LEGEND_ROW
    return fig


_ID = re.compile(r' id="([^"]+)"')
_REF = re.compile(r'(?:url\(#|href="#)([^)"]+)')


def _tidy(svg: str, chart: Chart) -> str:
    """matplotlib's SVG made fit to inline: no prolog, metadata, page-wide style or unused id; named for readers."""
    svg = svg[svg.index("<svg"):]
    # Natural size in px (matplotlib writes pt): the page shows a chart at the size its text was set for.
    svg = re.sub(r'(<svg[^>]*? width=")([\d.]+)pt(" height=")([\d.]+)pt"', r'\1\2\3\4"', svg, count=1)
    svg = re.sub(r"(?<!\s)\s*<metadata>.*?</metadata>", "", svg, flags=re.S)  # (?<!\s): a blank run scanned once
    svg = re.sub(r'(?<!\s)\s*<defs>\s*<style type="text/css">[^<]*</style>\s*</defs>', "", svg)
    svg = re.sub(r' transform="rotate\(-0 [^"]*\)"', "", svg)  # level text: no rotation to write
    svg = re.sub(r' d="([^"]*)"', lambda m: ' d="' + " ".join(m.group(1).split()) + '"', svg)  # path data on one line
    svg = re.sub(r"\n +<", "\n<", svg)  # no indentation: a report inlines dozens of charts
    used = set(_REF.findall(svg))
    svg = _ID.sub(lambda m: m.group(0) if m.group(1) in used else "", svg)
    head_end = svg.index(">") + 1
    from xml.sax.saxutils import escape, quoteattr

    name, desc = clean(chart.title), clean(chart.description)
    head = svg[:head_end - 1] + f' role="img" aria-label={quoteattr(f"{name}. {desc}")}' \
        f' style="stroke-linejoin:round;stroke-linecap:butt;{_FONT_CSS}">'
    return (head + f"<title>{escape(name)}</title><desc>{escape(desc)}</desc>"
            + svg[head_end:]).rstrip() + "\n"


def _texts(chart: Chart) -> str:
    parts = [chart.title, *(k.label for k in legend_keys(chart)), *_bands(chart)]
    for p in chart.panels:
        parts += [p.title, p.x.label, p.y.label]
    return "".join(parts)


def _rc(chart: Chart, **more: Any) -> dict[str, Any]:
    """The style's settings, the font list cut to this machine's fonts (and to the first where no CJK character is
    drawn): matplotlib looks each font up again for every text. The SVG names the whole list."""
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    fonts = [f for f in st.FONTS if f in installed] or ["DejaVu Sans"]
    if not any(unicodedata.east_asian_width(c) in "WF" for c in _texts(chart)):
        fonts = fonts[:1]
    return st.rc() | {"font.family": fonts} | more


# The font list once, on the root (every text inherits it), not matplotlib's list of this machine's fonts on each.
_FONT_CSS = "font-family:" + ",".join(f"'{f}'" if " " in f else f for f in st.FONTS)
_FONT_FAMILY = re.compile(r"(?:; )?font-family: [^;\"]*")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Without the warning for a glyph no installed font has: the SVG keeps it as text for the browser's fonts."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font", category=UserWarning)
        yield


def _save(chart: Chart, buf: io.StringIO | io.BytesIO, rc: dict[str, Any], **savefig: Any) -> None:
    import matplotlib

    with matplotlib.rc_context(_rc(chart, **rc)), _quiet():
        figure(chart).savefig(buf, **savefig)


def to_svg(chart: Chart, name: str = "chart") -> str:
    """The chart as SVG text, the same bytes for the same chart and ``name`` on every run."""
    salt = f"{st.SALT}-{re.sub(r'[^A-Za-z0-9_]', '', name)}-{len(chart.title)}"
    buf = io.StringIO()
    _save(chart, buf, {"svg.hashsalt": salt}, format="svg",
          metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return _tidy(_FONT_FAMILY.sub("", buf.getvalue()), chart)


def to_png(chart: Chart, dpi: int = 144) -> bytes:
    """The chart as PNG (twice its natural size by default: sharp when pasted into an issue)."""
    buf = io.BytesIO()
    _save(chart, buf, {}, format="png", dpi=dpi, metadata={"Software": None}, facecolor="white")
    return buf.getvalue()


def to_svgs(jobs: Sequence[tuple[Chart, str]]) -> list[str]:
    """``to_svg`` of each (chart, name), the same bytes: in worker processes where the machine forks and has cores
    to spare; a failed worker makes the batch fall back to this process (time lost, never a chart)."""
    import os
    import sys
    import threading

    workers = min(os.cpu_count() or 1, 4, len(jobs) // 3)
    # Forking a process with other threads can copy a held lock into the child: draw here then.
    if workers < 2 or not sys.platform.startswith("linux") or threading.active_count() > 1:
        return [to_svg(*j) for j in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import matplotlib.figure  # noqa: F401 -- imported once here, inherited by every forked worker
    from matplotlib import font_manager

    font_manager.fontManager.ttflist  # noqa: B018 -- the font list loaded before the fork, not in each worker
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(to_svg, [c for c, _ in jobs], [n for _, n in jobs], chunksize=1))
    except Exception:  # noqa: BLE001 -- a pool that cannot start or lost a worker: draw here instead
        return [to_svg(*j) for j in jobs]
