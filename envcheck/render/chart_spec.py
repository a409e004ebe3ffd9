"""What a chart shows, as data (``Chart`` > ``Panel`` > ``Series`` of ``Point``s, ceilings, a band, roofline
roofs), validated where it is built; ``chart_draw`` draws it. Roofline units must agree: x in FLOP/byte, y in
TFLOP/s, a ``MemoryRoof.value`` in TB/s."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from envcheck.outside_text import visible
from envcheck.render.chart_style import GREY, MARKERS

Scale = Literal["auto", "linear", "log2", "log10"]
SCALES: tuple[str, ...] = ("auto", "linear", "log2", "log10")
AUTO_LOG_RATIO = 10**1.5  # "auto" turns log10 past one and a half decades

_COLOR = re.compile(r"#[0-9A-Fa-f]{3}(?:[0-9A-Fa-f]{3})?")


def clean(text: str) -> str:
    """``text`` as a chart shows it: what could break the SVG or reorder or hide what follows made visible."""
    return visible(text, lines=True)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str | None = None  # what the point is, e.g. "triton 4096×4096×4096: 683 TFLOP/s"
    low: float | None = None  # an interval around y (a diff's ratio), drawn as an error bar
    high: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.x) and math.isfinite(self.y)):
            raise ValueError(f"point ({self.x}, {self.y}) is not finite: leave it out and say why elsewhere")
        if (self.low is None) != (self.high is None):
            raise ValueError(f"point ({self.x}, {self.y}): an interval needs both ends")
        if self.low is not None and self.high is not None and not (
                math.isfinite(self.low) and math.isfinite(self.high) and self.low <= self.high):
            raise ValueError(f"point ({self.x}, {self.y}): interval [{self.low}, {self.high}] is not one")


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
    """A horizontal ceiling across the plot, named in the legend (e.g. "theoretical 4814 GB/s")."""

    value: float
    label: str
    color: str = GREY
    dashed: bool = False

    def __post_init__(self) -> None:
        _check_color(self.color, self.label)
        if not math.isfinite(self.value):
            raise ValueError(f"reference line {self.label!r}: value {self.value} is not finite")


@dataclass(frozen=True)
class Roof:
    """A roofline roof at ``value`` (y units, or y units per x unit for a memory roof's slope). Measured: dashed."""

    value: float
    label: str
    color: str = GREY
    measured: bool = False

    def __post_init__(self) -> None:
        _check_color(self.color, self.label)
        if not (math.isfinite(self.value) and self.value > 0):
            raise ValueError(f"roof {self.label!r}: value must be positive, got {self.value}")


class MemoryRoof(Roof):
    """The roofline's slope: y = value × x, up to where it meets its compute roofs."""


class ComputeRoof(Roof):
    """A horizontal roof at ``value``, from where it meets its memory roof."""


@dataclass(frozen=True)
class Band:
    """A horizontal band (a diff's practical band: changes inside it are too small to call), named in the legend."""

    low: float
    high: float
    label: str

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(f"band {self.label!r}: [{self.low}, {self.high}] is not an interval")


@dataclass(frozen=True)
class Axis:
    label: str
    scale: Scale = "auto"
    zero: bool = True  # linear: include 0; False: the domain follows the data
    include: tuple[float, ...] = ()  # values the domain must show (a parity line at 1.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "include", tuple(self.include))
        if self.scale not in SCALES:
            raise ValueError(f"unknown scale {self.scale!r}, expected one of {SCALES}")


@dataclass(frozen=True)
class Panel:
    title: str
    x: Axis
    y: Axis
    series: tuple[Series, ...]
    refs: tuple[RefLine, ...] = ()
    roofs: tuple[Roof, ...] = ()
    band: Band | None = None

    def __post_init__(self) -> None:
        for name in ("series", "refs", "roofs"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        scales(self)  # refuse, where the panel is built, what no axis could show


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
    return len({p.x for s in panel.series for p in s.points}) >= 2


def ridge(memory: MemoryRoof, compute: ComputeRoof) -> float:
    """The x where the memory roof meets a compute roof."""
    return compute.value / memory.value


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
            out.append((roof, x_lo, min(max(peaks), x_hi) if peaks else x_hi))
        else:
            mem = _partner(roof, roofs)
            out.append((roof, max(ridge(mem, roof), x_lo) if mem else x_lo, x_hi))
    return tuple(out)


def resolve_scale(scale: str, values: Sequence[float], roofline: bool = False) -> str:
    """``auto``: log10 for a roofline (log-log by definition, however narrow its cases) or when every value is
    positive and they span more than 1.5 decades, else linear."""
    if scale != "auto":
        return scale
    wide = bool(values) and min(values) > 0 and max(values) / min(values) > AUTO_LOG_RATIO
    return "log10" if roofline or wide else "linear"


def y_values(panel: Panel) -> list[float]:
    """Every y the panel must show: points with their intervals, ceilings, the band, the compute roofs."""
    ys = [v for s in panel.series for p in s.points for v in (p.y, p.low, p.high) if v is not None]
    ys += list(panel.y.include) + [r.value for r in panel.refs]
    ys += [r.value for r in panel.roofs if isinstance(r, ComputeRoof)]
    if panel.band is not None:
        ys += [panel.band.low, panel.band.high]
    return ys


def scales(panel: Panel) -> tuple[str, str]:
    """The panel's resolved (x, y) scales; ValueError when a log axis would have to show a value <= 0."""
    xs = [p.x for s in panel.series for p in s.points] + list(panel.x.include)
    ys = y_values(panel)
    sx, sy = resolve_scale(panel.x.scale, xs, bool(panel.roofs)), resolve_scale(panel.y.scale, ys, bool(panel.roofs))
    if panel.roofs and "linear" in (sx, sy):
        raise ValueError(f"panel {panel.title!r}: a roofline needs log axes, got x {sx}, y {sy}")
    for axis, scale, values in (("x", sx, xs), ("y", sy, ys)):
        if scale != "linear" and values and min(values) <= 0:
            raise ValueError(f"panel {panel.title!r}: the {scale} {axis} axis cannot show {min(values)}; "
                             "use a linear axis or leave non-positive values out")
    return sx, sy
