"""The terminal summary of ``envcheck run``: a table per op, the findings, the totals, the checks. Below
``console.WIDE_FROM`` columns the op tables abbreviate (flags as letters, with a legend): no cell wraps at 100."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from envcheck.analysis import Analysis, BenchAnalysis, CaseResult
from envcheck.checks.keyed import keyed
from envcheck.model import Case, Report
from envcheck.render import fmt
from envcheck.render import view as v
from envcheck.render.checktext import all_localized
from envcheck.render.escape import term
from envcheck.render.i18n import check_counts, escaping, t
from envcheck.render.terminal.checks import fix_text
from envcheck.render.terminal.console import STYLE, bullets, heading, print_rows, print_written, started, styled, wide

Row = dict[str, CaseResult]  # a table row: one size and precision, a result per implementation


def _speed_style(x: float | None) -> str:
    return "" if x is None else "green" if x >= 1.05 else "yellow" if x < 0.95 else ""


def _error_cell(rows: Row, values: bool = False) -> str:
    """The row's worst error: as a share of its tolerance, or (``values``) the error and the tolerance; where
    an op with several outputs failed on some, those outputs (named, or with their ratios when ``values``)."""
    if any(r.status == "error" for r in rows.values()):
        return styled(t("status.error"), "bold red")
    judged = [r for r in rows.values() if r.verdict is not None and r.verdict.ratio is not None]
    if not judged:
        return fmt.DASH
    worst = max(judged, key=lambda r: r.verdict.ratio or 0.0)  # type: ignore[union-attr]
    text = v.error(worst) if values else fmt.ratio_pct(worst.verdict.ratio)  # type: ignore[union-attr]
    failing = [r for r in rows.values() if r.verdict is not None and r.verdict.failed_outputs]
    if failing and values:
        text += "; " + "; ".join(v.failed_outputs(r) for r in failing)
    elif failing:
        text += " " + term(",".join(dict.fromkeys(o for r in failing for o in r.verdict.failed_outputs)))  # type: ignore[union-attr]
    return styled(text, "bold red" if any(r.status == "fail" for r in rows.values()) else "")


def _case(row: Row) -> Case:
    return next(iter(row.values())).case


def _flags_cell(rows: Row, is_wide: bool) -> str:
    flags = v.flag_legend(rows.values())
    text = ", ".join(f.label for f in flags) if is_wide else " ".join(f.abbr for f in flags)
    return styled(term(text), "yellow" if flags else "")


def op_table(console: Console, ba: BenchAnalysis, op: str, rs: Sequence[CaseResult]) -> None:
    impls = v.impls(rs)
    # A speedup column per implementation that has one (not the baseline: torch, or the one a user's op names).
    others = [i for i in impls if any(r.case.impl == i and r.speedup is not None for r in rs)]
    has_gpu, has_speedup, has_share = (v.has_any(rs, a) for a in ("case.gpu", "speedup", "pct_theoretical"))
    unit = "TFLOP/s" if rs[0].spec.compute_bound else "GB/s"
    is_wide = wide(console)
    time_label = t("col.gpu_time") if has_gpu else t("col.host_time") if ba.bench.device.backend == "cpu" \
        else t("col.launch_time")

    def each(show: Callable[[CaseResult], str]) -> Callable[[Row], str]:  # every implementation's, side by side
        return lambda row: " / ".join(show(row[i]) if i in row else fmt.DASH for i in impls)

    def best_share(row: Row) -> str:  # the highest share of the theoretical ceiling among the implementations
        shares = [r.pct_theoretical for r in row.values() if r.pct_theoretical is not None]
        return fmt.pct(max(shares)) if shares else fmt.DASH

    cols: list[tuple[str, bool, Callable[[Row], str]]] = [
        (t("col.size"), True, lambda row: term(fmt.shape(_case(row).shape))),
        (t("col.dtype"), False, lambda row: term(fmt.precision_label(_case(row).dtype, _case(row).precision)))]
    cols += [(term(i), True, lambda row, i=i: styled(v.case_time(row[i], "gpu" if has_gpu else "launch"),
                                                     "red" if row[i].status == "error" else "") if i in row else "")
             for i in impls]
    cols += [(f"×{term(i)}", True, lambda row, i=i: styled(fmt.speedup(row[i].speedup), _speed_style(row[i].speedup))
              if i in row else "") for i in (others if has_speedup else ())]
    if is_wide or len(impls) == 1:  # narrow: room for the throughput with one implementation only
        cols.append((f"{unit} ({'/'.join(impls)})" if is_wide else unit, True, each(v.throughput)))
    if has_share and is_wide:
        cols.append((f"{t('col.pct_theoretical')} ({'/'.join(impls)})", True, each(lambda r: fmt.pct(r.pct_theoretical))))
    elif has_share:
        cols.append((t("term.col.best_pct"), True, best_share))
    cols.append((t("col.error") if is_wide else t("term.col.err_tol"), True, lambda row: _error_cell(row, is_wide)))
    if any(r.flags for r in rs):
        cols.append((t("col.flags"), False, lambda row: _flags_cell(row, is_wide)))
    groups: dict[tuple[str, str], Row] = {}
    for r in rs:
        groups.setdefault((fmt.precision_label(r.case.dtype, r.case.precision), fmt.shape(r.case.shape)), {})[
            r.case.impl] = r
    # The heading is a line of its own: as a table title it would wrap at the table's width.
    caption = t("term.op_caption", time=time_label) if has_speedup else t("term.op_caption_plain", time=time_label)
    print_rows(console, [head for head, _, _ in cols], [[cell(row) for _, _, cell in cols] for row in groups.values()],
               [right for _, right, _ in cols], keep=2, lead=f"[bold]{term(op)}[/]  [dim]{caption}[/]")


def _finding_lines(console: Console, items: Sequence[v.Said]) -> None:
    lines = []
    for f in items:
        text = f.text
        if f.flag is not None:
            text += " " + t("term.rows_flagged", flag=f.flag.abbr if not wide(console) else f.flag.label)
        elif len(f.rows) > 1 and f.key not in ("finding.speedup_large", "finding.launch_overhead", "finding.tf32",
                                                "finding.tf32_noieee"):
            text += " " + t("term.rows_in_report", count=len(f.rows))
        lines.append(({"warn": "[yellow]![/]", "fail": "[bold red]✗[/]"}.get(f.level, "-"), text))
    bullets(console, lines)


def totals(console: Console, ba: BenchAnalysis) -> None:
    print_rows(console, [t(c) for c in ("col.op", "col.cases", "col.passed", "col.failed", "col.errors")],
               [(term(x.op or t("summary.all")), str(x.cases), styled(str(x.passed), "" if x.failed or x.errors else "green"),
                 styled(str(x.failed), "bold red" if x.failed else ""), styled(str(x.errors), "bold red" if x.errors else ""))
                for x in (*ba.summary.by_op, ba.summary.overall)], title=t("section.summary"))
    precisions, rows = v.speedups(ba)
    if rows:
        print_rows(console, [t("col.op"), t("col.impl"), *precisions],
                   [(term(op), term(impl), *(styled(fmt.speedup(x.speedup_geomean), _speed_style(x.speedup_geomean))
                                             if x else fmt.DASH for x in cells)) for op, impl, cells in rows],
                   2, t("term.speedups"), t("term.speedups_caption"), keep=2)


def bench_lines(console: Console, ba: BenchAnalysis, prefix: str = "") -> None:
    """One device's tables and findings."""
    bench = ba.bench
    versions = ", ".join(f"{k} {x}" for k, x in sorted(bench.versions.items()))
    where = f"GPU {bench.device.index}" if bench.device.backend == "cuda" and bench.device.index is not None else \
        bench.device.backend
    took = fmt.seconds(bench.duration_s) if bench.duration_s is not None else fmt.DASH
    console.print(f"[bold]{t('term.bench_head', device=term(bench.device.name), where=term(where), versions=term(versions), took=took)}[/]")
    started(console)
    stop = v.stop(ba)
    if stop:
        console.print(f"[bold red]{stop}[/]")
    run_findings, op_findings = v.findings(ba, prefix)
    sections = v.sections(ba)
    for op, rs in sections:
        op_table(console, ba, op, rs)
        _finding_lines(console, op_findings.get(op, ()))
    if not wide(console):  # a legend of only what the tables show: a CPU run has no "%theor" column
        flags = [f"{f.abbr} {f.label}" for f in v.flag_legend(ba)]
        parts = [t("term.legend.flags", flags=", ".join(flags))] if flags else []
        if any(v.has_any(rs, "pct_theoretical") for _, rs in sections):
            parts.append(t("term.legend.theor"))
        console.print(f"[dim]{' '.join([*parts, t('term.legend.err_tol')])}[/]")
    totals(console, ba)
    if run_findings:
        heading(console, t("section.findings"))
        _finding_lines(console, run_findings)
    if ba.recommendations:
        heading(console, t("section.recommendations"))
        bullets(console, [(f"{i}.", v.phrase(r.key, r.params)) for i, r in enumerate(ba.recommendations, 1)])
    skipped = v.skipped(bench.skipped)
    if skipped:
        heading(console, t("term.skipped", count=len(bench.skipped)))
        lines = [(f"{count} ×", reason) for reason, count, _ in skipped[:6]]
        if len(skipped) > 6:
            lines.append(("…", t("term.more_reasons", count=len(skipped) - 6)))
        bullets(console, lines)
    ceilings = v.ceilings(ba.ceilings)
    if ceilings:
        heading(console, t("term.ceilings"))
        if wide(console):
            bullets(console, [("-", f"{term(name)} {kind}: {term(value)}  [dim]{source}[/]")
                              for name, kind, value, source in ceilings])
        else:  # one line per limit, theoretical and measured side by side; the sources are in the report
            names: dict[str, list[str]] = {}
            for name, kind, value, _ in ceilings:
                names.setdefault(name, []).append(f"{term(value)} {kind}")
            bullets(console, [("-", f"{term(name)}: {' · '.join(values)}") for name, values in names.items()])
    if bench.notes:
        heading(console, t("section.notes"))
        bullets(console, [("-", v.phrase(n.key, n.params)) for n in bench.notes])
    if ba.phases:
        phase_lines(console, ba.phases)


def phase_lines(console: Console, p: object, node: bool = False) -> None:
    """Where a run's (or the node tests') time went: one line a phase."""
    heading(console, t("section.node_phases") if node else t("section.phases"))
    bullets(console, [("-", v.phase_explain(p, node)),
                      *((" ", f"{v.phase_label(r.phase)}: {fmt.seconds(r.seconds)} ({fmt.ratio_pct(r.share)})")
                        for r in p.rows),  # type: ignore[attr-defined]
                      *(("-", line) for line in (v.phase_by_op(p), v.phase_slowest(p)) if line)])


def check_lines(console: Console, report: Report) -> None:
    """The checks that did not pass, one line each with the fix (``envcheck check`` shows all)."""
    if not report.checks:
        return
    verdict = report.verdict
    console.print()
    console.print(styled(t("term.checks", verdict=t(f"status.{verdict}"), counts=check_counts(report.checks)),
                          STYLE.get(verdict, "")))
    checks = all_localized(keyed(report.checks, report.environment, report.node))
    bullets(console, [(styled(t(f"status.{c.status}").upper(), STYLE[c.status]),
                       f"{term(c.title)}: {term(c.finding)}{fix_text(c)}")
                      for c in checks if c.status in ("fail", "warn")])


def print_run(console: Console, report: Report, analysis: Analysis, written: Sequence[Path] = ()) -> None:
    """Everything ``envcheck run`` prints after the run: with several GPUs (``--gpus``), the node's verdict and
    tests first, then each GPU's tables under its own heading."""
    with escaping(term):
        if analysis.node is not None or len(analysis.benches) > 1:
            from envcheck.render.node_view import node_section, node_tiles
            from envcheck.render.terminal.node import print_section, print_tiles

            heading(console, v.title(report))
            print_tiles(console, node_tiles(analysis.node) if analysis.node is not None else ())
            if analysis.node is not None:
                print_section(console, node_section(analysis.node))
            if analysis.node_phases is not None:
                phase_lines(console, analysis.node_phases, node=True)
            for i, ba in enumerate(analysis.benches):
                heading(console, v.bench_title(ba))
                bench_lines(console, ba, v.bench_prefix(analysis, i))
        elif analysis.bench is not None:
            bench_lines(console, analysis.bench)
        check_lines(console, report)
        print_written(console, written)
