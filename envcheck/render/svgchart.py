"""Charts drawn from a spec as small, deterministic SVG, text kept as text.

A chart is data: a ``Chart`` of ``Panel``s (one per dtype or precision, drawn in a grid), each with
``Series`` of ``Point``s, horizontal ``RefLine``s (ceilings) and roofline roofs (``MemoryRoof``,
``ComputeRoof``). ``to_svg`` lays it out and writes it; nothing else is involved (no matplotlib, no
fonts read, no clock, no randomness), so the same spec gives the same bytes on every machine.

What the layout guarantees, and why:

* **Text is ``<text>``**, in a font stack that reaches CJK fonts, so Chinese labels show in any
  browser and a file stays small. Layout widths come from ``text_width``: DejaVu Sans advances
  (Verdana's are within a few percent; the other fonts of the stack are narrower) times 1.06, CJK at
  a full em. An estimate that fits, fits.
* **Nothing overlaps**: tick labels are thinned until they clear each other; the legend sits outside
  the plots (below them, or in the empty cell of an odd grid), never over data. Ceiling and roof
  labels are drawn over everything with a white halo, at the first place that covers no marker, no
  other label and no line: beside their own line (above, below; at its ends or between; on one line
  or two), else stacked in the room the y axis keeps above the highest ceiling, where nothing is
  measured. When one still finds no such place, every horizontal label of the chart moves to a
  column right of its plot, spread apart and tied to its line by a leader (the roofline's many close
  roofs). The memory roof's label runs along its slope, above it.
* **Axes that cannot exaggerate**: see ``axes`` for the domain and tick rules.
* **Several points of one series at one x** (two shapes with the same element count) are not joined
  by a vertical line that would read as a jump: the line breaks around them, and every point after
  the first at that x is drawn with the opposite fill (hollow on a filled series). To keep a line
  through them, split the series (one per row length, say) before building the chart.
* **Every string is escaped**, control, bidi and invisible format characters removed, so a label such as
  ``<script>``, ``$\\x$`` or a right-to-left override is shown as itself and cannot change the document.
* **No ids**: several charts inlined in one HTML page would repeat them. The accessible name is on
  the root (``role="img"``, ``aria-label``), with ``<title>`` and ``<desc>``; each marker carries a
  ``<title>`` tooltip.

Units of a roofline are the caller's, but must agree: with x in FLOP/byte and y in TFLOP/s, a
``MemoryRoof.bandwidth`` is in TB/s (TFLOP/s per FLOP/byte), and roofs meet at x = peak / bandwidth.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envcheck.render.axes import AxisPlan, Scale, plan_axis, resolve_scale
from envcheck.render.escape import BIDI, INVISIBLE

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour-vision deficiency.
BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
BLUISH_GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
REDDISH_PURPLE = "#CC79A7"
GREY = "#666666"  # theoretical ceilings: neutral, outside the palette so it never means an implementation
# Yellow last: it is the only one hard to see as a thin line on white.
PALETTE = (BLUE, VERMILLION, BLUISH_GREEN, REDDISH_PURPLE, ORANGE, SKY_BLUE, BLACK, YELLOW)

MARKERS = ("circle", "square", "triangle", "diamond", "cross", "plus")

FONT_FAMILY = "DejaVu Sans, Verdana, Noto Sans CJK SC, Microsoft YaHei, sans-serif"
TITLE_SIZE = 15.0
PANEL_TITLE_SIZE = 13.0
LABEL_SIZE = 12.0  # axis labels, legend
TICK_SIZE = 11.5
REF_SIZE = 11.5
ASCENT, DESCENT = 0.86, 0.24  # of the em, generous: CJK glyphs fill more of it than Latin ones

INK, MUTED, FRAME, GRID = "#222222", "#555555", "#8a8a8a", "#e6e6e6"

_PAD, _GUTTER, _ROW_GAP = 10.0, 18.0, 12.0
_MIN_CELL = 260.0
_TICK_GAP = 7.0  # least space between two tick labels
_MARKER_R = 3.6
_LEGEND_ROW = 20.0
_SWATCH = 26.0
_STACK = REF_SIZE * (ASCENT + DESCENT) + 3  # baseline to baseline of two labels stacked clear of each other

_COLOR = re.compile(r"#[0-9A-Fa-f]{3}(?:[0-9A-Fa-f]{3})?")


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str | None = None  # the tooltip, e.g. "4096×4096×4096: 683 TFLOP/s"; default "series: x, y"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.x) and math.isfinite(self.y)):
            raise ValueError(f"point ({self.x}, {self.y}) is not finite: leave it out and say why elsewhere")


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[Point, ...]
    color: str
    marker: str = "circle"
    dashed: bool = False
    connect: bool = True  # False: markers only (a scatter)
    hollow: bool = False  # white-filled markers: a second series of the same colour (launch vs GPU time)

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", tuple(self.points))
        _check_color(self.color, self.name)
        if self.marker not in MARKERS:
            raise ValueError(f"series {self.name!r}: unknown marker {self.marker!r}, expected one of {MARKERS}")


@dataclass(frozen=True)
class RefLine:
    """A horizontal ceiling across the plot, labelled on the plot (e.g. "theoretical 4814 GB/s")."""

    value: float
    label: str
    color: str = GREY
    dashed: bool = False

    def __post_init__(self) -> None:
        _check_color(self.color, self.label)
        if not math.isfinite(self.value):
            raise ValueError(f"reference line {self.label!r}: value {self.value} is not finite")


@dataclass(frozen=True)
class MemoryRoof:
    """The roofline's slope: y = bandwidth × x (bandwidth in y units per x unit). Measured: dashed."""

    bandwidth: float
    label: str
    color: str = GREY
    measured: bool = False

    def __post_init__(self) -> None:
        _check_color(self.color, self.label)
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ValueError(f"memory roof {self.label!r}: bandwidth must be positive, got {self.bandwidth}")


@dataclass(frozen=True)
class ComputeRoof:
    """A horizontal compute roof at ``peak``, starting where it meets the memory roof. Measured: dashed."""

    peak: float
    label: str
    color: str = GREY
    measured: bool = False

    def __post_init__(self) -> None:
        _check_color(self.color, self.label)
        if not (math.isfinite(self.peak) and self.peak > 0):
            raise ValueError(f"compute roof {self.label!r}: peak must be positive, got {self.peak}")


Roof = MemoryRoof | ComputeRoof


@dataclass(frozen=True)
class Axis:
    label: str
    scale: Scale = "auto"
    zero: bool = True  # linear: include 0; False: at least ±10% around the data, axis marked as broken
    include: tuple[float, ...] = ()  # values the domain must show (a parity line at 1.0, a shared range)

    def __post_init__(self) -> None:
        object.__setattr__(self, "include", tuple(self.include))
        resolve_scale(self.scale, ())


@dataclass(frozen=True)
class Panel:
    title: str
    x: Axis
    y: Axis
    series: tuple[Series, ...]
    refs: tuple[RefLine, ...] = ()
    roofs: tuple[Roof, ...] = ()

    def __post_init__(self) -> None:
        for name in ("series", "refs", "roofs"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        _scales(self)  # refuse, where the panel is built, what no axis could show


@dataclass(frozen=True)
class Key:
    """One legend entry. By default the legend has one per series name, in first-seen order."""

    label: str
    color: str
    marker: str | None = "circle"
    dashed: bool = False
    line: bool = True
    hollow: bool = False

    def __post_init__(self) -> None:
        _check_color(self.color, self.label)
        if self.marker is not None and self.marker not in MARKERS:
            raise ValueError(f"legend entry {self.label!r}: unknown marker {self.marker!r}")


@dataclass(frozen=True)
class Chart:
    title: str
    panels: tuple[Panel, ...]
    description: str  # what the chart shows, for screen readers (<desc>, aria-label)
    legend: tuple[Key, ...] | None = None  # None: one entry per series name

    def __post_init__(self) -> None:
        object.__setattr__(self, "panels", tuple(self.panels))
        if self.legend is not None:
            object.__setattr__(self, "legend", tuple(self.legend))
        if not self.panels:
            raise ValueError(f"chart {self.title!r} has no panels: check worth_drawing() before building it")


def _check_color(color: str, owner: str) -> None:
    if not _COLOR.fullmatch(color):
        raise ValueError(f"{owner!r}: colour must be #rgb or #rrggbb, got {color!r}")


def worth_drawing(panel: Panel) -> bool:
    """False when the panel has nothing a chart shows better than a table: no points, or all at one x."""
    xs = {p.x for s in panel.series for p in s.points}
    return len(xs) >= 2


def ridge(memory: MemoryRoof, compute: ComputeRoof) -> float:
    """The x where the memory roof meets a compute roof: peak / bandwidth."""
    return compute.peak / memory.bandwidth


def _partner(compute: ComputeRoof, roofs: Sequence[Roof]) -> MemoryRoof | None:
    """The memory roof a compute roof starts from: the first of the same kind (measured or not), else the first."""
    mems = [r for r in roofs if isinstance(r, MemoryRoof)]
    return next((m for m in mems if m.measured == compute.measured), mems[0] if mems else None)


def roof_segments(roofs: Sequence[Roof], x_lo: float, x_hi: float) -> tuple[tuple[Roof, float, float], ...]:
    """Each roof's extent in x: a memory roof up to the ridge of its highest compute roof, a compute roof
    from its ridge on (``x_lo`` where it has no memory roof). Extents end at [x_lo, x_hi]."""
    out: list[tuple[Roof, float, float]] = []
    for roof in roofs:
        if isinstance(roof, MemoryRoof):
            peaks = [ridge(roof, c) for c in roofs if isinstance(c, ComputeRoof) and _partner(c, roofs) is roof]
            out.append((roof, x_lo, max(peaks) if peaks else x_hi))
        else:
            mem = _partner(roof, roofs)
            out.append((roof, ridge(mem, roof) if mem else x_lo, x_hi))
    return tuple(out)


def _scales(panel: Panel) -> tuple[str, str]:
    xs = [p.x for s in panel.series for p in s.points] + list(panel.x.include)
    ys = [p.y for s in panel.series for p in s.points] + list(panel.y.include) + [r.value for r in panel.refs]
    ys += [r.peak for r in panel.roofs if isinstance(r, ComputeRoof)]
    # A roofline is log-log by definition; "auto" must not turn it linear for a narrow set of cases.
    sx = "log10" if panel.roofs and panel.x.scale == "auto" else resolve_scale(panel.x.scale, xs)
    sy = "log10" if panel.roofs and panel.y.scale == "auto" else resolve_scale(panel.y.scale, ys)
    if panel.roofs and "linear" in (sx, sy):
        raise ValueError(f"panel {panel.title!r}: a roofline needs log axes, got x {sx}, y {sy}")
    for axis, scale, values in (("x", sx, xs), ("y", sy, ys)):
        if scale != "linear" and values and min(values) <= 0:
            raise ValueError(f"panel {panel.title!r}: the {scale} {axis} axis cannot show {min(values)}; "
                             "use a linear axis or leave non-positive values out")
    return sx, sy


# --------------------------------------------------------------------------- text


_ADVANCE = (  # DejaVu Sans advance widths, 1/100 em, for " " to "~"
    32, 40, 46, 84, 64, 95, 78, 27, 39, 39, 50, 84, 32, 36, 32, 34, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 34, 34,
    84, 84, 84, 53, 100, 68, 69, 70, 77, 63, 58, 77, 75, 29, 29, 66, 56, 86, 75, 79, 60, 79, 69, 63, 61, 73, 68, 99,
    69, 61, 69, 39, 34, 39, 84, 50, 50, 61, 63, 55, 63, 62, 35, 63, 63, 28, 28, 58, 28, 97, 63, 61, 63, 63, 41, 52,
    39, 63, 59, 82, 59, 59, 52, 64, 34, 64, 84)
_ADVANCE_BOLD = (
    35, 46, 52, 84, 70, 100, 87, 31, 46, 46, 52, 84, 38, 42, 38, 37, 70, 70, 70, 70, 70, 70, 70, 70, 70, 70, 40, 40,
    84, 84, 84, 58, 100, 77, 76, 73, 83, 68, 68, 82, 84, 37, 37, 77, 64, 100, 84, 85, 73, 85, 77, 72, 68, 81, 77, 110,
    77, 72, 73, 46, 37, 46, 84, 50, 50, 67, 72, 59, 72, 68, 44, 72, 71, 34, 34, 67, 34, 104, 71, 69, 72, 72, 49, 60,
    48, 71, 65, 92, 65, 65, 58, 71, 37, 71, 84)
_ADVANCE_OTHER = {"µ": 74, "×": 84, "−": 84, "–": 50, "—": 100, "…": 100, "·": 38, "≥": 84, "≤": 84, "±": 84,
                  "°": 50, "⁻": 53, "→": 84, "←": 84, "%": 100, "²": 44, "³": 44, "¹": 44, "⁰": 44, "⁴": 44,
                  "⁵": 44, "⁶": 44, "⁷": 44, "⁸": 44, "⁹": 44}
_UNKNOWN = 80  # wider than any Latin lowercase: an unknown glyph must not be underestimated
_SAFETY = 1.06


@functools.lru_cache(maxsize=8192)
def text_width(text: str, size: float, bold: bool = False) -> float:
    """Estimated width in px of ``text`` at ``size`` px: never less than a browser draws it (see module doc)."""
    table = _ADVANCE_BOLD if bold else _ADVANCE
    total = 0
    for ch in text:
        o = ord(ch)
        if 32 <= o < 127:
            total += table[o - 32]
        elif ch in _ADVANCE_OTHER:
            total += _ADVANCE_OTHER[ch]
        elif unicodedata.east_asian_width(ch) in "WF":
            total += 100
        elif not unicodedata.combining(ch):
            total += _UNKNOWN
    return total * size * _SAFETY / 100


# Control characters (tab and newline kept), the bidi controls, invisible format characters and line/paragraph
# separators the escape module names, lone surrogates and the two non-characters XML refuses: removed, so a label
# cannot break the document, reorder what follows or hide a character unseen.
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI}{INVISIBLE}\u2028\u2029\ud800-\udfff\ufffe\uffff]")
_TEXT_ESC = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_ATTR_ESC = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;",
                           "\n": "&#10;", "\t": "&#9;"})


def clean(text: str) -> str:
    """``text`` without the characters that could break or reorder the SVG (what the chart shows)."""
    return _UNSAFE.sub("", text)


def _esc(text: str) -> str:
    return clean(text).translate(_TEXT_ESC)


def _attr(text: str) -> str:
    return clean(text).translate(_ATTR_ESC)


_CJK = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_TOKENS = re.compile(rf"\s+|[{_CJK}]|[^\s{_CJK}]+")


def fit(text: str, size: float, max_width: float, bold: bool = False) -> str:
    """``text``, cut and ended with "…" where it would be wider than ``max_width``."""
    if text_width(text, size, bold) <= max_width:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if text_width(text[:mid].rstrip() + "…", size, bold) <= max_width:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + "…"


def wrap(text: str, size: float, max_width: float, bold: bool = False, max_lines: int = 3) -> list[str]:
    """Lines of at most ``max_width``, broken at spaces or between CJK characters; the last cut with "…"."""
    lines: list[str] = []
    line = ""
    for tok in _TOKENS.findall(text):
        if not line.strip() or text_width((line + tok).rstrip(), size, bold) <= max_width:
            line += tok
        else:
            lines.append(line.strip())
            line = tok.lstrip()
    if line.strip() or not lines:
        lines.append(line.strip())
    if len(lines) > max_lines:
        lines = lines[:max_lines - 1] + [" ".join(lines[max_lines - 1:])]
    return [fit(t, size, max_width, bold) for t in lines]


@dataclass(frozen=True)
class Label:
    """A placed piece of text: ``(x, y)`` is the anchor on the baseline, ``angle`` a clockwise rotation
    about it in degrees. ``full``: the untruncated text, shown as a tooltip."""

    text: str
    x: float
    y: float
    size: float
    anchor: str = "start"  # start | middle | end
    angle: float = 0.0
    bold: bool = False
    color: str = INK
    halo: bool = False
    role: str = ""  # title | panel | axis | tick | legend | ref
    full: str | None = None

    def frame(self) -> tuple[float, float, float, float]:
        """The text's box relative to the anchor, before rotation: x0, y0, x1, y1."""
        w = text_width(self.text, self.size, self.bold)
        x0 = 0.0 if self.anchor == "start" else -w / 2 if self.anchor == "middle" else -w
        return x0, -ASCENT * self.size, x0 + w, DESCENT * self.size

    def corners(self) -> tuple[tuple[float, float], ...]:
        x0, y0, x1, y1 = self.frame()
        c, s = _cos_sin(self.angle)
        return tuple((self.x + px * c - py * s, self.y + px * s + py * c)
                     for px, py in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)))

    def box(self) -> tuple[float, float, float, float]:
        """Axis-aligned bounds in chart coordinates."""
        pts = self.corners()
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        return min(xs), min(ys), max(xs), max(ys)


def overlap(a: Label, b: Label, gap: float = 0.0) -> bool:
    """True when the two labels' boxes (rotated or not) come closer than ``gap``: separating-axis test."""
    ca, cb = a.corners(), b.corners()
    for corners in (ca, cb):
        for i in (0, 1):
            (x0, y0), (x1, y1) = corners[i], corners[i + 1]
            ax, ay = y0 - y1, x1 - x0
            n = math.hypot(ax, ay) or 1.0
            ax, ay = ax / n, ay / n
            pa = [x * ax + y * ay for x, y in ca]
            pb = [x * ax + y * ay for x, y in cb]
            if max(pa) + gap <= min(pb) or max(pb) + gap <= min(pa):
                return False
    return True


@functools.lru_cache(maxsize=64)
def _cos_sin(angle: float) -> tuple[float, float]:
    r = math.radians(angle)
    return math.cos(r), math.sin(r)


# --------------------------------------------------------------------------- geometry


def _clip(x0: float, y0: float, x1: float, y1: float,
          box: tuple[float, float, float, float]) -> tuple[float, float, float, float] | None:
    """The part of a segment inside ``box`` (xmin, ymin, xmax, ymax), Liang-Barsky; None when outside."""
    dx, dy = x1 - x0, y1 - y0
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, x0 - box[0]), (dx, box[2] - x0), (-dy, y0 - box[1]), (dy, box[3] - y0)):
        if p == 0:
            if q < 0:
                return None
            continue
        t = q / p
        if p < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return None
    return x0 + t0 * dx, y0 + t0 * dy, x0 + t1 * dx, y0 + t1 * dy


def _n(v: float) -> str:
    """A coordinate with one decimal, no trailing ".0": short, and the same string on every machine."""
    s = f"{v:.1f}"
    if s.endswith(".0"):
        s = s[:-2]
    return "0" if s == "-0" else s


def _num(v: float) -> str:
    return f"{v:.4g}"


@dataclass
class _Obstacles:
    """What a ceiling label should not cover, in chart pixels."""

    markers: list[tuple[float, float]]
    data: list[tuple[float, float, float, float]]
    lines: list[tuple[float, float, float, float]]


def _cost(lab: Label, obs: _Obstacles, placed: Sequence[Label], rect: tuple[float, float, float, float]) -> float | None:
    """How much ``lab`` covers (markers 10, other ceilings 4, data lines 3, labels 100); None outside ``rect``."""
    corners = lab.corners()
    if any(not (rect[0] <= x <= rect[2] and rect[1] <= y <= rect[3]) for x, y in corners):
        return None
    x0, y0, x1, y1 = lab.frame()
    r = _MARKER_R + 1.5
    fx0, fy0, fx1, fy1 = x0 - 2, y0 - 1, x1 + 2, y1 + 1  # the halo
    c, s = _cos_sin(lab.angle)
    bx0 = min(p[0] for p in corners) - r
    bx1 = max(p[0] for p in corners) + r
    by0 = min(p[1] for p in corners) - r
    by1 = max(p[1] for p in corners) + r

    def local(px: float, py: float) -> tuple[float, float]:
        dx, dy = px - lab.x, py - lab.y
        return dx * c + dy * s, -dx * s + dy * c

    cost = 0.0
    for mx, my in obs.markers:
        if bx0 <= mx <= bx1 and by0 <= my <= by1:
            lx, ly = local(mx, my)
            if fx0 - r <= lx <= fx1 + r and fy0 - r <= ly <= fy1 + r:
                cost += 10
    for weight, segs in ((3, obs.data), (4, obs.lines)):
        for sx0, sy0, sx1, sy1 in segs:
            if max(sx0, sx1) < bx0 or min(sx0, sx1) > bx1 or max(sy0, sy1) < by0 or min(sy0, sy1) > by1:
                continue
            if _clip(*local(sx0, sy0), *local(sx1, sy1), (fx0, fy0, fx1, fy1)) is not None:
                cost += weight
    cost += 100 * sum(overlap(lab, p, 2.0) for p in placed)
    return cost


def _spread(targets: Sequence[float], heights: Sequence[float], lo: float, hi: float, gap: float = 2.0) -> list[float]:
    """Tops of blocks as close as possible to centring each on its target, in order, none overlapping,
    within [lo, hi] where they fit: neighbours that collide are merged and centred together."""
    clusters: list[list[int]] = []  # [first, last] indices

    def size(cl: list[int]) -> float:
        return sum(heights[cl[0]:cl[1] + 1]) + gap * (cl[1] - cl[0])

    def top(cl: list[int]) -> float:
        offs, acc = [], 0.0
        for i in range(cl[0], cl[1] + 1):
            offs.append(targets[i] - heights[i] / 2 - acc)
            acc += heights[i] + gap
        return min(max(sum(offs) / len(offs), lo), max(lo, hi - size(cl)))

    tops: dict[int, float] = {}
    for i in range(len(targets)):
        clusters.append([i, i])
        while len(clusters) > 1:
            prev, cur = clusters[-2], clusters[-1]
            if top(prev) + size(prev) + gap <= top(cur):
                break
            clusters[-2:] = [[prev[0], cur[1]]]
    for cl in clusters:
        t = top(cl)
        for i in range(cl[0], cl[1] + 1):
            tops[i] = t
            t += heights[i] + gap
    return [tops[i] for i in range(len(targets))]


# --------------------------------------------------------------------------- drawing


def _marker(shape: str, x: float, y: float) -> str:
    """The element for one marker, without its closing part: the caller adds a <title> and closes it."""
    X, Y = _n(x), _n(y)
    if shape == "circle":
        return f'<circle cx="{X}" cy="{Y}" r="{_MARKER_R}"'
    if shape == "square":
        return f'<path d="M{_n(x - 3.3)} {_n(y - 3.3)}h6.6v6.6h-6.6z"'
    if shape == "triangle":
        return f'<path d="M{X} {_n(y - 4.4)}l4.2 7.2h-8.4z"'
    if shape == "diamond":
        return f'<path d="M{X} {_n(y - 4.6)}l4.6 4.6-4.6 4.6-4.6-4.6z"'
    if shape == "cross":
        return f'<path d="M{_n(x - 3.6)} {_n(y - 3.6)}l7.2 7.2m0-7.2l-7.2 7.2"'
    return f'<path d="M{_n(x - 4.2)} {Y}h8.4m-4.2-4.2v8.4"'  # plus


def _marker_group(color: str, shape: str, hollow: bool) -> str:
    if shape in ("cross", "plus"):
        return f'<g fill="none" stroke="{color}" stroke-width="2">'
    if hollow:
        return f'<g fill="#fff" stroke="{color}" stroke-width="1.6">'
    # A thin white edge keeps two overlapping markers of one colour apart.
    return f'<g fill="{color}" stroke="#fff" stroke-width=".8">'


def _dash(dashed: bool) -> str:
    return ' stroke-dasharray="6 3.5"' if dashed else ""


def _text(lab: Label) -> str:
    attrs = f'x="{_n(lab.x)}" y="{_n(lab.y)}"'
    if lab.anchor != "start":
        attrs += f' text-anchor="{lab.anchor}"'
    if lab.angle:
        attrs += f' transform="rotate({_n(lab.angle)} {_n(lab.x)} {_n(lab.y)})"'
    if lab.color != INK:
        attrs += f' fill="{lab.color}"'
    tip = f"<title>{_esc(lab.full)}</title>" if lab.full else ""
    return f"<text {attrs}>{tip}{_esc(lab.text)}</text>"


@dataclass
class _Cell:
    panel: Panel
    xs: str
    ys: str
    yplan: AxisPlan
    x: float = 0.0  # the cell's left edge
    top: float = 0.0
    px: float = 0.0  # the plot rectangle
    py: float = 0.0
    pw: float = 0.0
    ph: float = 0.0
    xplan: AxisPlan | None = None

    def at_x(self, v: float) -> float:
        assert self.xplan is not None
        return self.px + self.xplan.frac(v) * self.pw

    def at_y(self, v: float) -> float:
        return self.py + self.ph - self.yplan.frac(v) * self.ph


@dataclass
class _Drawing:
    svg: str
    labels: list[Label]
    crowded: bool  # some ceiling label found no free place inside its plot


def to_svg(chart: Chart, *, width: int = 740) -> str:
    """The chart as one ``<svg>`` element (no XML prolog, valid inside HTML), ``width`` px wide at most."""
    return _render(chart, width).svg


def placed_labels(chart: Chart, *, width: int = 740) -> tuple[Label, ...]:
    """Every piece of text ``to_svg`` writes, where it writes it: for checking a layout."""
    return tuple(_render(chart, width).labels)


def _render(chart: Chart, width: int) -> _Drawing:
    drawing = _draw(chart, float(width), margin=False)
    return _draw(chart, float(width), margin=True) if drawing.crowded else drawing


def _legend_keys(chart: Chart) -> list[Key]:
    if chart.legend is not None:
        return list(chart.legend)
    keys: dict[str, Key] = {}
    for panel in chart.panels:
        for s in panel.series:
            if s.points and s.name not in keys:
                keys[s.name] = Key(s.name, s.color, s.marker, s.dashed, s.connect, s.hollow)
    return list(keys.values())


def _ceilings(panel: Panel) -> list[tuple[str, str]]:
    """(label, colour) of every horizontal ceiling of a panel, in drawing order."""
    return [(r.label, r.color) for r in panel.refs] + [(r.label, r.color) for r in panel.roofs
                                                       if isinstance(r, ComputeRoof)]


def _draw(chart: Chart, width: float, margin: bool) -> _Drawing:
    n = len(chart.panels)
    cols = 1 if n == 1 or width < 2 * _MIN_CELL + _GUTTER + 2 * _PAD else 2
    rows = math.ceil(n / cols)
    cell_w = (width - 2 * _PAD - (cols - 1) * _GUTTER) / cols
    ph = min(max(cell_w * 0.56, 190.0), 290.0)
    labels: list[Label] = []
    out: list[str] = []

    # Title
    y = _PAD
    for line in wrap(chart.title, TITLE_SIZE, width - 2 * _PAD, bold=True):
        y += TITLE_SIZE * 1.25
        labels.append(Label(line, _PAD, y - TITLE_SIZE * 0.3, TITLE_SIZE, bold=True, role="title"))
    y += 8

    # Y axes first: their tick labels set the left margin every panel shares, so plots line up.
    cells = []
    for panel in chart.panels:
        xs, ys = _scales(panel)
        cells.append(_Cell(panel, xs, ys, _fit_y(panel, ys, ph, headroom=not margin)))
    tick_w = max(text_width(t, TICK_SIZE) for c in cells for t in c.yplan.labels)
    left = LABEL_SIZE * 1.25 + 6 + tick_w + 7
    margin_w = 0.0
    if margin:
        natural = max((text_width(t, REF_SIZE) for c in cells for t, _ in _ceilings(c.panel)), default=0.0)
        margin_w = min(natural, 0.4 * cell_w, 190.0)
    right = 12.0 + (margin_w + 12 if margin_w else 0.0)
    titled = any(p.title for p in chart.panels)
    head = PANEL_TITLE_SIZE * 1.25 + 8 if titled else 8.0
    foot = 42.0
    cell_h = head + ph + foot

    crowded = False
    for i, cell in enumerate(cells):
        r, k = divmod(i, cols)
        cell.x = _PAD + k * (cell_w + _GUTTER)
        cell.top = y + r * (cell_h + _ROW_GAP)
        cell.px, cell.py, cell.pw, cell.ph = cell.x + left, cell.top + head, cell_w - left - right, ph
        cell.xplan = _fit_x(cell, cell_w)
        crowded |= _panel(cell, cell_w, margin_w, out, labels)
    y += rows * cell_h + (rows - 1) * _ROW_GAP

    # Legend: in the empty cell of an odd grid where it fits there, else in centred rows below.
    keys = _legend_keys(chart)
    free = n % cols != 0 and len(keys) * _LEGEND_ROW <= ph
    if free and all(_SWATCH + 6 + text_width(k.label, LABEL_SIZE) <= cell_w - left for k in keys):
        last = cells[-1]
        _legend_column(keys, last.x + cell_w + _GUTTER + left, last.py + (ph - len(keys) * _LEGEND_ROW) / 2,
                       out, labels)
    else:
        y = _legend(keys, width, y + 4, out, labels)
    height = math.ceil(y + _PAD)

    head_parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(width)}" height="{height}" '
        f'viewBox="0 0 {_n(width)} {height}" style="max-width:100%;height:auto" role="img" '
        f'aria-label="{_attr(_aria(chart))}" font-family="{FONT_FAMILY}" font-size="{_n(LABEL_SIZE)}">',
        f"<title>{_esc(chart.title)}</title>",
        f"<desc>{_esc(chart.description)}</desc>",
        '<rect width="100%" height="100%" fill="#fff"/>',
    ]
    text_parts = _texts(labels)
    return _Drawing("\n".join([*head_parts, *out, *text_parts, "</svg>"]) + "\n", labels, crowded and not margin)


def _aria(chart: Chart) -> str:
    return f"{chart.title}. {chart.description}" if chart.description else chart.title


_ROLES = ("title", "panel", "axis", "tick", "legend", "ref")


def _texts(labels: list[Label]) -> list[str]:
    """All text last, so it is drawn over every line and marker; grouped by style to keep the file small."""
    out: list[str] = []
    ordered = sorted(labels, key=lambda lab: _ROLES.index(lab.role) if lab.role in _ROLES else len(_ROLES))
    for (role, size, bold, halo), group in itertools.groupby(ordered, key=lambda lab: (lab.role, lab.size, lab.bold,
                                                                                       lab.halo)):
        attrs = f'font-size="{_n(size)}" fill="{MUTED if role == "tick" else INK}"'
        if bold:
            attrs += ' font-weight="bold"'
        if halo:
            attrs += ' stroke="#fff" stroke-width="3.5" stroke-linejoin="round" paint-order="stroke"'
        out.append(f"<g {attrs}>" + "".join(_text(lab) for lab in group) + "</g>")
    return out


def _fit_y(panel: Panel, scale: str, ph: float, headroom: bool) -> AxisPlan:
    values = [p.y for s in panel.series for p in s.points] + list(panel.y.include)
    ceilings = [r.value for r in panel.refs] + [r.peak for r in panel.roofs if isinstance(r, ComputeRoof)]
    values += ceilings
    # No thinning needed: at 190 px or more, 8 even ticks, or 1-2-5 / 1-3 ticks over the few decades
    # that get them, are 18 px apart or more, clear of an 11.5 px label.
    plan = plan_axis(values, scale, zero=panel.y.zero)
    if not (ceilings and headroom):
        return plan
    # Room above the highest ceiling for two labels: nothing measured goes past a ceiling, so a label
    # there is clear of the data (see _place_flat).
    top, need = max(ceilings), (_STACK * min(len(ceilings), 2) + 6) / ph
    for _ in range(4):
        if 1 - plan.frac(top) >= need:
            break
        if plan.scale == "linear":
            values.append(top + 1.1 * need * (plan.hi - plan.lo))
        else:
            values.append(top * (plan.hi / plan.lo) ** (1.1 * need))
        plan = plan_axis(values, scale, zero=panel.y.zero)
    return plan


def _x_values(panel: Panel) -> list[float]:
    values = [p.x for s in panel.series for p in s.points] + list(panel.x.include)
    for c in panel.roofs:
        if isinstance(c, ComputeRoof) and (mem := _partner(c, panel.roofs)) is not None:
            values.append(ridge(mem, c))  # the corners of the roof stay in view
    return values


def _x_tick_labels(cell: _Cell, plan: AxisPlan, cell_w: float) -> list[Label]:
    base = cell.py + cell.ph + 4 + 5 + ASCENT * TICK_SIZE
    out = []
    for t, text in zip(plan.ticks, plan.labels, strict=True):
        x = cell.px + plan.frac(t) * cell.pw
        w = text_width(text, TICK_SIZE)
        # Shifted, not dropped, where a centred label would leave the cell.
        x = min(max(x, cell.x + w / 2), cell.x + cell_w - w / 2)
        out.append(Label(text, x, base, TICK_SIZE, "middle", role="tick"))
    return out


def _fit_x(cell: _Cell, cell_w: float) -> AxisPlan:
    values = _x_values(cell.panel)
    plan = plan_axis(values, cell.xs, zero=cell.panel.x.zero)
    for max_ticks in range(len(plan.ticks) - 1, 1, -1):
        labs = _x_tick_labels(cell, plan, cell_w)
        if not any(overlap(a, b, _TICK_GAP) for a, b in itertools.pairwise(labs)):
            break
        plan = plan_axis(values, cell.xs, zero=cell.panel.x.zero, max_ticks=max_ticks)
    return plan


def _panel(cell: _Cell, cell_w: float, margin_w: float, out: list[str], labels: list[Label]) -> bool:
    """Draws one panel; True when a ceiling label found no free place inside the plot."""
    assert cell.xplan is not None
    panel, xp, yp = cell.panel, cell.xplan, cell.yplan
    x0, y0, x1, y1 = cell.px, cell.py, cell.px + cell.pw, cell.py + cell.ph
    rect = (x0, y0, x1, y1)

    # Frame: grid, axes, ticks; one path each.
    grid = "".join(f"M{_n(x0)} {_n(cell.at_y(t))}H{_n(x1)}" for t in yp.ticks)
    grid += "".join(f"M{_n(cell.at_x(t))} {_n(y0)}V{_n(y1)}" for t in xp.ticks)
    out.append(f'<path d="{grid}" stroke="{GRID}" fill="none"/>')
    axes = f"M{_n(x0)} {_n(y0)}V{_n(y1)}H{_n(x1)}"
    axes += "".join(f"M{_n(x0 - 4)} {_n(cell.at_y(t))}h4" for t in yp.ticks)
    axes += "".join(f"M{_n(cell.at_x(t))} {_n(y1)}v4" for t in xp.ticks)
    out.append(f'<path d="{axes}" stroke="{FRAME}" fill="none"/>')
    if yp.broken:  # the value axis does not start at zero: the usual break mark says so
        out.append(f'<path d="M{_n(x0)} {_n(y1 - 12)}v8" stroke="#fff" stroke-width="3"/>'
                   f'<path d="M{_n(x0 - 5)} {_n(y1 - 9)}l10-4m-10 9l10-4" stroke="{FRAME}" fill="none"/>')
    if xp.broken:
        out.append(f'<path d="M{_n(x0 + 4)} {_n(y1)}h8" stroke="#fff" stroke-width="3"/>'
                   f'<path d="M{_n(x0 + 4)} {_n(y1 + 5)}l4-10m1 10l4-10" stroke="{FRAME}" fill="none"/>')

    # Text of the frame
    if panel.title:
        title = fit(panel.title, PANEL_TITLE_SIZE, cell_w)
        w = text_width(title, PANEL_TITLE_SIZE)
        cx = min(max((x0 + x1) / 2, cell.x + w / 2), cell.x + cell_w - w / 2)
        labels.append(Label(title, cx, cell.top + PANEL_TITLE_SIZE * 1.1, PANEL_TITLE_SIZE, "middle", role="panel",
                            full=_full(panel.title, PANEL_TITLE_SIZE, cell_w)))
    for t, text in zip(yp.ticks, yp.labels, strict=True):
        labels.append(Label(text, x0 - 6, cell.at_y(t) + (ASCENT - DESCENT) / 2 * TICK_SIZE, TICK_SIZE, "end",
                            role="tick"))
    labels.extend(_x_tick_labels(cell, xp, cell_w))
    xl = fit(panel.x.label, LABEL_SIZE, cell.pw + 20)
    labels.append(Label(xl, (x0 + x1) / 2, y1 + 38, LABEL_SIZE, "middle", role="axis",
                        full=_full(panel.x.label, LABEL_SIZE, cell.pw + 20)))
    yl = fit(panel.y.label, LABEL_SIZE, cell.ph + 10)
    labels.append(Label(yl, cell.x + ASCENT * LABEL_SIZE + 1, (y0 + y1) / 2, LABEL_SIZE, "middle", angle=-90,
                        role="axis", full=_full(panel.y.label, LABEL_SIZE, cell.ph + 10)))

    # Ceilings: under the data.
    lines: list[tuple[float, float, float, float]] = []
    horizontal: list[tuple[str, str, float, float, float]] = []  # label, colour, y, x from, x to
    slopes: list[tuple[str, str, tuple[float, float, float, float]]] = []
    for ref in panel.refs:
        yy = cell.at_y(ref.value)
        out.append(f'<path d="M{_n(x0)} {_n(yy)}H{_n(x1)}" stroke="{ref.color}" stroke-width="1.3" fill="none"'
                   f'{_dash(ref.dashed)}/>')
        lines.append((x0, yy, x1, yy))
        horizontal.append((ref.label, ref.color, yy, x0, x1))
    for roof, a, b in roof_segments(panel.roofs, xp.lo, xp.hi):
        if isinstance(roof, MemoryRoof):
            seg = _clip(cell.at_x(a), cell.at_y(roof.bandwidth * a), cell.at_x(b), cell.at_y(roof.bandwidth * b), rect)
        else:
            seg = _clip(cell.at_x(a), cell.at_y(roof.peak), cell.at_x(b), cell.at_y(roof.peak), rect)
        if seg is None:
            continue
        out.append(f'<path d="M{_n(seg[0])} {_n(seg[1])}L{_n(seg[2])} {_n(seg[3])}" stroke="{roof.color}" '
                   f'stroke-width="1.5" fill="none"{_dash(roof.measured)}/>')
        lines.append(seg)
        if isinstance(roof, MemoryRoof):
            slopes.append((roof.label, roof.color, seg))
        else:
            horizontal.append((roof.label, roof.color, seg[1], seg[0], seg[2]))

    # Data
    obs = _Obstacles([], [], lines)
    for s in panel.series:
        _series(cell, s, out, obs)

    # Ceiling labels: over everything, where they cover least.
    placed: list[Label] = []
    crowded = False
    for text, color, (sx0, sy0, sx1, sy1) in slopes:
        placed.extend(_place_slope(text, color, (sx0, sy0, sx1, sy1), obs, placed, rect))
    if margin_w:
        placed.extend(_margin_labels(horizontal, x1, y0, y1, margin_w, out))
    else:
        # Highest first: it takes the room above its line, the next one stacks over it if it must.
        horizontal.sort(key=lambda h: h[2])
        for text, color, yy, a, b in horizontal:
            labs, cost = _place_flat(text, color, yy, a, b, horizontal[0][2], obs, placed, rect)
            crowded |= cost >= 10
            placed.extend(labs)
    labels.extend(placed)
    return crowded


def _full(text: str, size: float, max_w: float) -> str | None:
    return text if text_width(text, size) > max_w else None


def _series(cell: _Cell, s: Series, out: list[str], obs: _Obstacles) -> None:
    pts = sorted(s.points, key=lambda p: p.x)  # stable: points at one x keep the caller's order
    groups = [list(g) for _, g in itertools.groupby(pts, key=lambda p: p.x)]
    if s.connect:
        runs: list[list[Point]] = [[]]
        for g in groups:
            if len(g) == 1:
                runs[-1].append(g[0])
            else:  # several points at one x: the line stops on both sides rather than jump
                runs.append([])
        d = ""
        for run in runs:
            if len(run) < 2:
                continue
            xy = [(cell.at_x(p.x), cell.at_y(p.y)) for p in run]
            d += "M" + "L".join(f"{_n(x)} {_n(y)}" for x, y in xy)
            obs.data.extend((a[0], a[1], b[0], b[1]) for a, b in itertools.pairwise(xy))
        if d:
            out.append(f'<path d="{d}" fill="none" stroke="{s.color}" stroke-width="1.8" '
                       f'stroke-linejoin="round"{_dash(s.dashed)}/>')
    main: list[str] = []
    alt: list[str] = []
    for g in groups:
        for i, p in enumerate(g):
            x, y = cell.at_x(p.x), cell.at_y(p.y)
            obs.markers.append((x, y))
            tip = p.label if p.label is not None else f"{s.name}: {_num(p.x)}, {_num(p.y)}"
            close = "</circle>" if s.marker == "circle" else "</path>"
            (alt if i and s.connect else main).append(f"{_marker(s.marker, x, y)}><title>{_esc(tip)}</title>{close}")
    for hollow, items in ((s.hollow, main), (not s.hollow, alt)):
        if items:
            out.append(_marker_group(s.color, s.marker, hollow) + "".join(items) + "</g>")


def _place_flat(text: str, color: str, yy: float, a: float, b: float, top: float, obs: _Obstacles,
                placed: Sequence[Label], rect: tuple[float, float, float, float],
                anywhere: bool = False) -> tuple[list[Label], float]:
    """A horizontal ceiling's label: above its line, else below, at the right end, the left end or between;
    on one line, else on two or three shorter ones (a long label in a narrow facet). When every such place
    crosses another ceiling or a marker, in the room the axis keeps above the highest ceiling (``top``),
    stacked over the labels already there: nothing is measured up there, and its colour ties it to its line.
    ``anywhere``: failing all that, the free place in the plot nearest its line (the last resort of a slope)."""
    room = rect[2] - rect[0] - 8
    variants = [[fit(text, REF_SIZE, room)]]
    if text_width(text, REF_SIZE) > 0.35 * room:
        variants.append(_balanced(text, REF_SIZE, room))
    line_h = REF_SIZE * 1.2

    def by_the_line() -> Iterable[tuple[list[str], list[float], float, float, float]]:
        for lines in variants:
            for above in (True, False):
                if above:
                    bases = [yy - 3 - DESCENT * REF_SIZE - (len(lines) - 1 - j) * line_h for j in range(len(lines))]
                else:
                    bases = [yy + 3 + ASCENT * REF_SIZE + j * line_h for j in range(len(lines))]
                for where in (1.0, 0.0, 0.5, 0.75, 0.25):
                    yield lines, bases, a, b, where

    def over_the_top() -> Iterable[tuple[list[str], list[float], float, float, float]]:
        for lines in variants:
            for k in range(3):
                bottom = top - 3 - DESCENT * REF_SIZE - k * _STACK
                bases = [bottom - (len(lines) - 1 - j) * line_h for j in range(len(lines))]
                for where in (1.0, 0.0):
                    yield lines, bases, rect[0], rect[2], where

    def nearest_free() -> Iterable[tuple[list[str], list[float], float, float, float]]:
        rows = [rect[1] + ASCENT * REF_SIZE + 2 + k * _STACK for k in range(int((rect[3] - rect[1]) // _STACK))]
        for base in sorted(rows, key=lambda r: abs(r - yy)):
            for where in (0.0, 1.0, 0.5):
                yield variants[0], [base], rect[0], rect[2], where

    best: tuple[float, list[Label]] | None = None
    for places in (by_the_line, over_the_top, nearest_free) if anywhere else (by_the_line, over_the_top):
        for lines, bases, xa, xb, where in places():
            x = xa + 4 + where * (xb - xa - 8)
            anchor = "end" if where == 1.0 else "start" if where == 0.0 else "middle"
            labs = [Label(line, x, base, REF_SIZE, anchor, color=color, halo=True, role="ref")
                    for line, base in zip(lines, bases, strict=True)]
            costs = [_cost(lab, obs, placed, rect) for lab in labs]
            if any(c is None for c in costs):
                continue
            cost = sum(c for c in costs if c is not None)
            if cost == 0:
                return labs, 0.0
            if best is None or cost < best[0]:
                best = (cost, labs)
        if best is not None and best[0] < 4:  # crossing a data line by its own line beats moving away from it
            break
    if best is None:  # no room inside at all (a line on the frame of a tiny plot): sit on the line
        return [Label(variants[0][0], b - 4, yy - 3 - DESCENT * REF_SIZE, REF_SIZE, "end", color=color, halo=True,
                      role="ref")], 1000.0
    return best[1], best[0]


def _balanced(text: str, size: float, room: float) -> list[str]:
    """``text`` on two lines of about equal width (three when a word is too long for that), each within ``room``."""
    width = text_width(text, size) / 2
    while width < room:
        lines = wrap(text, size, width, max_lines=99)
        if len(lines) <= 2:
            return lines
        width += size
    return wrap(text, size, room, max_lines=3)


def _place_slope(text: str, color: str, seg: tuple[float, float, float, float], obs: _Obstacles,
                 placed: Sequence[Label], rect: tuple[float, float, float, float]) -> list[Label]:
    """The memory roof's label, along its slope above it (clear of data: no case beats the roof)."""
    sx0, sy0, sx1, sy1 = seg
    angle = math.degrees(math.atan2(sy1 - sy0, sx1 - sx0))
    length = math.hypot(sx1 - sx0, sy1 - sy0)
    text = fit(text, REF_SIZE, max(length - 8, 40.0))
    c, s = _cos_sin(angle)
    best: tuple[float, Label] | None = None
    # Above the line, then a row higher (clear of a second slope just above), then below it.
    for off in (-3 - DESCENT * REF_SIZE, -3 - DESCENT * REF_SIZE - _STACK, 3 + ASCENT * REF_SIZE):
        for t in (0.06, 0.2, 0.35, 0.5, 0.65, 0.8):
            ax, ay = sx0 + t * (sx1 - sx0), sy0 + t * (sy1 - sy0)
            lab = Label(text, ax - s * off, ay + c * off, REF_SIZE, angle=angle, color=color, halo=True, role="ref")
            cost = _cost(lab, obs, placed, rect)
            if cost is not None and (best is None or cost < best[0]):
                best = (cost, lab)
                if cost == 0:
                    return [lab]
    if best is not None and best[0] < 100:
        return [best[1]]
    # Too short to write along, or only over another label: written level, beside the slope's top end.
    labs, cost = _place_flat(text, color, sy1, sx0, sx1, sy1, obs, placed, rect, anywhere=True)
    return labs if best is None or cost < best[0] else [best[1]]


def _margin_labels(horizontal: list[tuple[str, str, float, float, float]], x1: float, top: float, bottom: float,
                   width: float, out: list[str]) -> list[Label]:
    """Ceiling labels in a column right of the plot, in the order of their lines, spread so none overlap,
    each joined to its line by a leader."""
    line_h = REF_SIZE * 1.2
    items = sorted(horizontal, key=lambda h: h[2])
    wrapped = [wrap(text, REF_SIZE, width, max_lines=3) for text, *_ in items]
    heights = [len(w) * line_h for w in wrapped]
    tops = _spread([h[2] for h in items], heights, top - 4, bottom + 4)
    col = x1 + 12
    labels = []
    leaders = []
    for (_, color, yy, *_), lines, t, h in zip(items, wrapped, tops, heights, strict=True):
        mid = t + h / 2
        leaders.append(f'<path d="M{_n(x1)} {_n(yy)}L{_n(x1 + 4)} {_n(yy)}L{_n(col - 2)} {_n(mid)}" '
                       f'stroke="{color}" fill="none" stroke-width=".9"/>')
        for j, line in enumerate(lines):
            base = t + j * line_h + (line_h + (ASCENT - DESCENT) * REF_SIZE) / 2
            labels.append(Label(line, col, base, REF_SIZE, color=color, role="ref"))
    out.extend(leaders)
    return labels


def _rows(entries: list[tuple[Key, str, float]], avail: float, most: int) -> list[list[tuple[Key, str, float]]]:
    """Entries in rows of at most ``most`` entries and ``avail`` px, filled in order."""
    rows: list[list[tuple[Key, str, float]]] = [[]]
    used = 0.0
    for e in entries:
        need = e[2] + (18 if rows[-1] else 0)
        if rows[-1] and (used + need > avail or len(rows[-1]) >= most):
            rows.append([])
            used, need = 0.0, e[2]
        rows[-1].append(e)
        used += need
    return rows


def _legend_entry(k: Key, text: str, x: float, cy: float, out: list[str], labels: list[Label]) -> None:
    if k.line:
        out.append(f'<path d="M{_n(x)} {_n(cy)}h{_n(_SWATCH)}" stroke="{k.color}" stroke-width="1.8" fill="none"'
                   f'{_dash(k.dashed)}/>')
    if k.marker:
        out.append(_marker_group(k.color, k.marker, k.hollow) + _marker(k.marker, x + _SWATCH / 2, cy) + "/></g>")
    labels.append(Label(text, x + _SWATCH + 6, cy + (ASCENT - DESCENT) / 2 * LABEL_SIZE, LABEL_SIZE,
                        role="legend", full=k.label if text != k.label else None))


def _legend_column(keys: list[Key], x: float, top: float, out: list[str], labels: list[Label]) -> None:
    for i, k in enumerate(keys):
        _legend_entry(k, k.label, x, top + (i + 0.5) * _LEGEND_ROW, out, labels)


def _legend(keys: Iterable[Key], width: float, top: float, out: list[str], labels: list[Label]) -> float:
    """Entries in centred rows under the panels; returns the bottom of the legend."""
    keys = list(keys)
    if not keys:
        return top
    max_text = width - 2 * _PAD - _SWATCH - 6
    entries = []
    for k in keys:
        text = fit(k.label, LABEL_SIZE, max_text)
        entries.append((k, text, _SWATCH + 6 + text_width(text, LABEL_SIZE)))
    avail = width - 2 * _PAD
    rows = _rows(entries, avail, len(entries))
    # As many rows as greedy filling needs, but evened out: no lone entry on a last row.
    per_row = math.ceil(len(entries) / len(rows))
    even = _rows(entries, avail, per_row)
    if len(even) == len(rows):
        rows = even
    y = top
    for row in rows:
        total = sum(e[2] for e in row) + 18 * (len(row) - 1)
        x = (width - total) / 2
        cy = y + _LEGEND_ROW / 2
        for k, text, w in row:
            _legend_entry(k, text, x, cy, out, labels)
            x += w + 18
        y += _LEGEND_ROW
    return y
