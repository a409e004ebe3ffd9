"""The terminal summary of ``envcheck run``: per-op tables, then totals like a test report.

Pure formatting of a ``Report``: ``run_renderables`` returns rich renderables and
``print_run`` prints them. Every text that comes from the machine or the worker (notes,
error messages, skip reasons) goes through ``Text`` so brackets in it are never read as
rich markup.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from envcheck import summary
from envcheck.bench.sizes import describe
from envcheck.model import IMPLS, STATUSES, Bench, Case, Report

FLAG_LABELS = {"launch_bound": "launch-bound", "l2_resident": "fits L2", "throttled": "throttled", "noisy": "noisy"}
TIME_METHODS = {"cuda_graph": "GPU time (CUDA-graph replay)", "cuda_events": "eager calls timed with CUDA events",
                "host_clock": "host clock around synchronous calls"}
MAX_SKIP_REASONS = 6


def fmt_us(us: float | None) -> str:
    if us is None:
        return "-"
    if us >= 10000:
        return f"{us / 1000:,.1f} ms"
    return f"{us:,.1f}" if us >= 10 else f"{us:.2f}"


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def fmt_num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 1 else f"{x:.3f}"


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}%"


def _precision_label(c: Case) -> str:
    return c.dtype if c.precision == c.dtype else f"{c.dtype}/{c.precision}"


def _error_cell(cases: Sequence[Case]) -> Text:
    """The worst error of a row's cases against its tolerance."""
    judged = [c for c in cases if c.error is not None]
    errored = [c for c in cases if c.status == "error"]
    if errored:
        return Text(f"{errored[0].impl}: could not run", style="bold red")
    if not judged:
        return Text("-")
    worst = max(judged, key=lambda c: c.error.rel_l2 / c.error.tolerance if c.error.tolerance else 0.0)
    e = worst.error
    assert e is not None
    if e.passed:
        return Text(f"{e.rel_l2:.1e} <= {e.tolerance:.0e}", style="green")
    return Text(f"{worst.impl} {e.rel_l2:.1e} > {e.tolerance:.0e}", style="bold red")


def pct_of_peak(bench: Bench, c: Case) -> float | None:
    """The case's share of its theoretical ceiling: bandwidth as stored, or FLOP/s of its precision."""
    if c.pct_theoretical is not None:
        return c.pct_theoretical
    if c.op == "matmul" and c.tflops is not None:
        ceiling = bench.ceiling(c.precision, "theoretical")
        if ceiling is not None and ceiling.value > 0:
            return 100 * c.tflops / ceiling.value
    return None


def _throughput(c: Case, matmul: bool) -> float | None:
    return c.tflops if matmul else c.gbps


def op_table(bench: Bench, op: str) -> Table:
    """One row per (shape, dtype/precision); one time column per implementation present."""
    cases = [c for c in bench.cases if c.op == op]
    impls = [i for i in IMPLS if any(c.impl == i for c in cases)]
    matmul = op == "matmul"
    methods = sorted({c.best_time.method for c in cases if c.best_time})
    caption = "us: " + "; ".join(TIME_METHODS.get(m, m) for m in methods) if methods else None
    table = Table(title=Text(op, style="bold"), caption=caption, caption_justify="left", title_justify="left",
                  show_edge=False, pad_edge=False)
    table.add_column("shape", justify="right")
    table.add_column("dtype")
    for impl in impls:
        table.add_column(f"{impl} us", justify="right")
    for impl in impls:
        if impl != "torch":
            table.add_column(f"{impl} speedup", justify="right")
    unit = "TFLOP/s" if matmul else "GB/s"
    table.add_column(f"{unit} ({'/'.join(impls)})", justify="right")
    table.add_column("% peak", justify="right")
    table.add_column("error / tolerance")
    table.add_column("flags")

    rows: dict[tuple[str, str, tuple[int, ...]], dict[str, Case]] = {}
    for c in cases:
        rows.setdefault((c.dtype, c.precision, c.shape), {})[c.impl] = c
    for (_, _, _), by_impl in rows.items():
        any_case = next(iter(by_impl.values()))
        row: list[RenderableType] = [describe(any_case.shape), _precision_label(any_case)]
        for impl in impls:
            c = by_impl.get(impl)
            t = c.best_time if c else None
            row.append(Text(fmt_us(t.median_us if t else None), style="red" if c and c.status == "error" else ""))
        for impl in impls:
            if impl != "torch":
                c = by_impl.get(impl)
                sp = c.speedup if c else None
                style = "" if sp is None else "green" if sp >= 1.05 else "yellow" if sp < 0.95 else ""
                row.append(Text(fmt_ratio(sp), style=style))
        row.append(" / ".join(fmt_num(_throughput(by_impl[i], matmul)) if i in by_impl else "-" for i in impls))
        row.append(" / ".join(fmt_pct(pct_of_peak(bench, by_impl[i])) if i in by_impl else "-" for i in impls))
        row.append(_error_cell(list(by_impl.values())))
        flags = dict.fromkeys(f for c in by_impl.values() for f in c.flags)
        row.append(Text(", ".join(FLAG_LABELS.get(f, f) for f in flags), style="yellow" if flags else ""))
        table.add_row(*row)
    return table


def _tally_line(t: summary.Tally) -> Text:
    text = Text(f"{t.name:<20} ", style="bold")
    rate = t.success_rate
    style = "green" if t.failed == 0 and t.errors == 0 else "bold red"
    text.append(f"{t.passed}/{t.cases} passed", style=style)
    if t.failed:
        text.append(f", {t.failed} over tolerance", style="bold red")
    if t.errors:
        text.append(f", {t.errors} could not run", style="bold red")
    if rate is not None:
        text.append(f" ({100 * rate:.1f}%)")
    if t.speedup_geomean is not None:
        text.append(f"  speedup vs torch: geomean {fmt_ratio(t.speedup_geomean)} "
                    f"(min {fmt_ratio(t.speedup_min)}, max {fmt_ratio(t.speedup_max)})")
    return text


def totals(bench: Bench) -> list[RenderableType]:
    """Totals like a test report: per op, per op and implementation, then overall."""
    if not bench.cases:
        return []
    out: list[RenderableType] = [Text("Summary", style="bold underline")]
    for t in summary.by_op(bench):
        out.append(_tally_line(t))
    for t in summary.by_op_impl(bench):
        out.append(_tally_line(t))
    out.append(_tally_line(summary.overall(bench)))
    return out


def skipped(bench: Bench) -> list[RenderableType]:
    """Planned cases not measured, grouped by reason, most frequent first."""
    if not bench.skipped:
        return []
    reasons = Counter(s.reason for s in bench.skipped)
    n = len(bench.skipped)
    out: list[RenderableType] = [Text(f"{n} planned case{'s' if n != 1 else ''} skipped:", style="yellow")]
    for reason, count in reasons.most_common(MAX_SKIP_REASONS):
        out.append(Text(f"  {count} x {reason}"))
    if len(reasons) > MAX_SKIP_REASONS:
        out.append(Text(f"  ... and {len(reasons) - MAX_SKIP_REASONS} other reasons (see the report)"))
    return out


def ceilings(bench: Bench) -> list[RenderableType]:
    if not bench.ceilings:
        return []
    out: list[RenderableType] = [Text("Ceilings", style="bold underline")]
    for c in bench.ceilings:
        out.append(Text(f"  {c.name} ({c.kind}): {fmt_num(c.value)} {c.unit}  [{c.source}]"))
    return out


def run_renderables(report: Report, written: Sequence[Path] = ()) -> list[RenderableType]:
    """Everything ``envcheck run`` prints after the run."""
    out: list[RenderableType] = []
    bench = report.bench
    if bench is not None:
        dev = bench.device
        head = Text(f"Benchmark on {dev.name} ({dev.backend}")
        head.append(f", GPU {dev.index}" if dev.backend == "cuda" and dev.index is not None else "")
        versions = ", ".join(f"{k} {v}" for k, v in bench.versions.items())
        head.append(f"; {versions}" if versions else "")
        head.append(f"; {bench.duration_s:.1f} s)" if bench.duration_s is not None else ")")
        out.append(head)
        if bench.interrupted:
            out.append(Text(f"PARTIAL RESULTS: {bench.interrupted}", style="bold red"))
        for op in summary.ops(bench):
            out += [Text(""), op_table(bench, op)]
        out.append(Text(""))
        out += totals(bench)
        out += skipped(bench)
        out += ceilings(bench)
        if bench.notes:
            out.append(Text("Notes", style="bold underline"))
            out += [Text(f"  - {n}") for n in bench.notes]
    out += check_lines(report)
    if written:
        out.append(Text("Report", style="bold underline"))
        out += [Text(f"  {line}") for line in written_lines(written)]
    return out


def written_lines(paths: Sequence[Path]) -> list[str]:
    """The files written: the report and its renderings by name, their assets (charts) as folders."""
    paths = [Path(p) for p in paths]
    if not paths:
        return []
    home = paths[0].parent
    lines = [str(p) for p in paths if p.parent == home]
    folders: dict[Path, int] = {}
    for p in paths:
        if p.parent != home:
            folders[p.parent] = folders.get(p.parent, 0) + 1
    lines += [f"{d}/ ({n} file{'s' if n != 1 else ''})" for d, n in folders.items()]
    return lines


def check_lines(report: Report) -> list[RenderableType]:
    """The checks that did not pass, one line each with the fix (``envcheck check`` shows all)."""
    if not report.checks:
        return []
    counts = Counter(c.status for c in report.checks)
    verdict = report.verdict
    style = {"fail": "bold red", "warn": "yellow"}.get(verdict, "green")
    parts = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
    out: list[RenderableType] = [Text(f"Checks: {verdict} ({parts})", style=style)]
    for c in report.checks:
        if c.status in ("fail", "warn"):
            line = Text(f"  {c.status.upper()} ", style="bold red" if c.status == "fail" else "yellow")
            line.append(f"{c.title}: {c.finding}")
            if c.fix:
                line.append(f"  fix: {c.fix}", style="cyan")
            out.append(line)
    return out


def print_run(console: Console, report: Report, written: Sequence[Path] = ()) -> None:
    console.print(Group(*run_renderables(report, written)))
