"""The one chart style: sizes (SVG units), fonts, colours, markers, matplotlib settings. A one-panel chart scaled
to a phone's 370 px column keeps its ticks at 10 px or more: ``TICK_SIZE * 370 / PANEL_W >= 10``."""

from __future__ import annotations

from typing import Any

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
BAND = "#e8e8e8"  # the practical band of a diff chart: too small a change to call, whatever the interval

# The spec's marker names and the matplotlib marker each draws with.
MARKER_CODES = {"circle": "o", "square": "s", "triangle": "^", "diamond": "D", "cross": "x", "plus": "+"}
MARKERS = tuple(MARKER_CODES)

# Latin first (its metrics lay the chart out the same everywhere), then CJK fonts so zh-CN labels are
# measured and shown as Chinese glyphs, not boxes: matplotlib falls back along this list per glyph, and
# the SVG names the same list, so a browser without the first picks the next.
FONTS = ("DejaVu Sans", "Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "WenQuanYi Zen Hei",
         "Microsoft YaHei", "PingFang SC", "sans-serif")

PANEL_W = 480.0  # a panel's cell
PANEL_H = 330.0
LEGEND_ROW = 22.0  # per row of legend entries under the panels
TITLE_SIZE = 15.0
PANEL_TITLE_SIZE = 13.5
LABEL_SIZE = 13.0  # axis labels, legend
TICK_SIZE = 13.0
MAX_COLUMNS = 1  # panels per row: a second would make a chart 960 px wide, scrolled sideways on a phone
MARKER_SIZE = 6.0
LINE_WIDTH = 1.8
INK, MUTED, FRAME, GRID = "#222222", "#555555", "#8a8a8a", "#e6e6e6"

SALT = "envcheck"  # svg.hashsalt: the ids matplotlib writes are hashes of this and the content, never random


def rc() -> dict[str, Any]:
    """The matplotlib settings of every chart (applied in an ``rc_context``, never globally)."""
    return {
        "font.family": list(FONTS),
        "font.size": LABEL_SIZE,
        "axes.titlesize": PANEL_TITLE_SIZE,
        "axes.labelsize": LABEL_SIZE,
        "axes.edgecolor": FRAME,
        "axes.labelcolor": INK,
        "axes.grid": True,
        "axes.axisbelow": True,
        "grid.color": GRID,
        "grid.linewidth": 0.8,
        **{f"{axis}tick.{k}": v for axis in "xy" for k, v in (("labelsize", TICK_SIZE), ("color", MUTED),
                                                               ("labelcolor", INK))},
        "legend.fontsize": LABEL_SIZE,
        "legend.frameon": False,
        "figure.titlesize": TITLE_SIZE,
        "figure.dpi": 72,  # 1 point = 1 SVG unit = 1 px at natural size
        "savefig.dpi": 72,
        "svg.fonttype": "none",  # text stays <text>: searchable, selectable, Chinese shown by the browser's fonts
        "svg.hashsalt": SALT,
        "svg.image_inline": True,
        "text.parse_math": False,  # a label such as "$\\x$" is text, never mathtext
        "axes.unicode_minus": True,
        "path.simplify": True,
    }
