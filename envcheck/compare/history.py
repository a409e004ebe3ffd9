"""The result of ``envcheck history``: one machine's reports over time, as trends and steps.

Each op's trend is its geometric-mean time ratio to the *first* report (cases
matched as in ``diff``). A step is a change between *consecutive* reports, for
one (op, impl, dtype, precision) group, that is significant as in ``diff`` (the
geomean interval excludes 1.0) and larger than the practical threshold; each
step carries what changed in the environment at that point, so a reader sees
"matmul triton bf16 got 7% faster at 2026-12-01 when the driver went 575.57 -> 580.159".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from envcheck.compare import stats
from envcheck.compare.diff import CaseDiff, ReportInfo, compare, pct_of_ceiling, summarise
from envcheck.compare.envdiff import EnvChange
from envcheck.model import Case, Report


@dataclass(frozen=True)
class OpPoint:
    """One op in one report."""

    op: str
    ratio: float | None  # geomean time ratio to the first report (1.0 for the first)
    low: float | None
    high: float | None
    count: int
    peak_gbps: float | None
    peak_gbps_pct: float | None  # of this report's own theoretical bandwidth
    peak_tflops: float | None
    peak_tflops_pct: float | None  # of this report's own peak for that precision


@dataclass(frozen=True)
class Point:
    info: ReportInfo
    ops: tuple[OpPoint, ...]
    copy_gbps: float | None  # measured device-to-device copy bandwidth of the run
    theoretical_gbps: float | None

    def op(self, name: str) -> OpPoint | None:
        return next((o for o in self.ops if o.op == name), None)


@dataclass(frozen=True)
class Step:
    """A significant change in one group between report ``index - 1`` and report ``index``."""

    index: int
    created: str
    group: str  # "matmul triton bf16"
    ratio: float  # geomean time ratio new / previous
    low: float | None
    high: float | None
    count: int
    direction: str  # faster | slower
    changes: tuple[EnvChange, ...]  # environment differences at that point

    @property
    def change_pct(self) -> float:
        """How much less (faster) or more (slower) time, in percent of the previous time (always positive).

        Time, not speed: "7% faster" means a 0.93 ratio, the number the tables show.
        """
        return abs(self.ratio - 1) * 100

    @property
    def factor(self) -> float:
        """The change as a factor >= 1 (3.0: three times faster or slower), for changes too large for percent."""
        return 1 / self.ratio if self.ratio < 1 else self.ratio


@dataclass(frozen=True)
class History:
    points: tuple[Point, ...]
    ops: tuple[str, ...]
    steps: tuple[Step, ...]
    hosts: tuple[tuple[str, tuple[str, ...]], ...]  # host -> labels of its reports, when more than one host
    gpus: tuple[tuple[str, tuple[str, ...]], ...]  # GPU model -> labels, when more than one model
    practical_pct: float

    @property
    def mixed(self) -> bool:
        return len(self.hosts) > 1 or len(self.gpus) > 1


def _when(r: Report) -> tuple[int, float, str]:
    """Sort key: parseable ISO times in order, unparseable ones last (still in name order)."""
    try:
        return (0, datetime.fromisoformat(r.created.replace("Z", "+00:00")).timestamp(), r.created)
    except (ValueError, AttributeError):
        return (1, 0.0, str(r.created))


def group_name(c: CaseDiff) -> str:
    prec = f" ({c.precision})" if c.precision != c.dtype else ""
    return f"{c.op} {c.impl} {c.dtype}{prec}"




def _memory_bound(c: Case) -> bool:
    return not c.compute_bound


def _op_point(op: str, r: Report, vs_first: Sequence[CaseDiff] | None) -> OpPoint:
    bench = r.bench
    cases = [c for c in (bench.cases if bench else ()) if c.op == op and c.status != "error"]
    bw = [c for c in cases if _memory_bound(c) and c.gbps is not None]
    fl = [c for c in cases if not _memory_bound(c) and c.tflops is not None]
    top_bw = max(bw, key=lambda c: c.gbps or 0.0) if bw else None
    top_fl = max(fl, key=lambda c: c.tflops or 0.0) if fl else None
    if vs_first is None:  # the first report: every ratio is 1 by definition
        ratio, low, high, count = 1.0, 1.0, 1.0, len(cases)
    else:
        g = summarise(op, vs_first, 0.0, stats.CONFIDENCE)
        ratio, low, high, count = g.geomean, g.low, g.high, g.count
    return OpPoint(
        op, ratio, low, high, count,
        top_bw.gbps if top_bw else None, top_bw.pct_theoretical if top_bw else None,
        top_fl.tflops if top_fl else None, pct_of_ceiling(top_fl, bench) if top_fl and bench else None,
    )


def _mixed(infos: Sequence[ReportInfo], attr: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    groups: dict[str, list[str]] = {}
    for i in infos:
        groups.setdefault(str(getattr(i, attr) or "unknown"), []).append(i.label)
    return tuple((k, tuple(v)) for k, v in groups.items()) if len(groups) > 1 else ()


def history(reports: Sequence[tuple[str, Report]], *, practical: float = stats.PRACTICAL,
            resamples: int = stats.RESAMPLES, seed: int = stats.SEED) -> History:
    """Trends and steps of ``reports`` ((label, report) pairs, any order: sorted by ``created`` here)."""
    if not reports:
        raise ValueError("history needs at least one report")
    ordered = sorted(reports, key=lambda lr: _when(lr[1]))
    first = ordered[0]
    ops: dict[str, None] = {}
    for _, r in ordered:
        for c in r.bench.cases if r.bench else ():
            ops.setdefault(c.op, None)
    points: list[Point] = []
    steps: list[Step] = []
    for i, (label, r) in enumerate(ordered):
        vs_first = compare(first, (label, r), practical=practical, resamples=resamples, seed=seed) if i else None
        bench = r.bench
        copy = bench.ceiling("bandwidth", "measured") if bench else None
        theo = bench.ceiling("bandwidth", "theoretical") if bench else None
        points.append(Point(
            ReportInfo.of(label, r),
            tuple(_op_point(op, r, [c for c in vs_first.cases if c.op == op] if vs_first else None) for op in ops),
            copy.value if copy else None, theo.value if theo else None,
        ))
        if i == 0:
            continue
        step_cmp = compare(ordered[i - 1], (label, r), practical=practical, resamples=resamples, seed=seed)
        groups: dict[str, list[CaseDiff]] = {}
        for c in step_cmp.cases:
            groups.setdefault(group_name(c), []).append(c)
        for name, cases in groups.items():
            g = summarise(name, cases, practical, stats.CONFIDENCE)
            if g.verdict in ("faster", "slower") and g.geomean is not None:
                steps.append(Step(i, r.created, name, g.geomean, g.low, g.high, g.count, g.verdict, step_cmp.env))
    infos = [p.info for p in points]
    return History(tuple(points), tuple(ops), tuple(steps), _mixed(infos, "host"), _mixed(infos, "gpu_name"),
                   practical * 100)
