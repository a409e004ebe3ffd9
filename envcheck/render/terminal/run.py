"""The terminal summary of ``envcheck run``: one table per op, the findings, the totals, the checks.

Laid out from the same view as the documents (``render.view``, phrased with ``escape.term``),
so the terminal says what the report says. Below ``console.WIDE_FROM`` columns each op table
has one time column per implementation, one speedup column per non-torch implementation, the
best share of the theoretical ceiling, the worst error as a fraction of its tolerance and the
flags as letters (legend printed); from that width on it adds throughput and both shares per
implementation and spells the flags out. No cell wraps at 100 columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from envcheck.analysis import Analysis
from envcheck.checks.keyed import keyed
from envcheck.model import Bench, Report
from envcheck.render import fmt
from envcheck.render.checktext import all_localized
from envcheck.render.escape import term
from envcheck.render.i18n import check_counts, translate
from envcheck.render.phase_view import PhaseTable
from envcheck.render.terminal.console import bullets, heading, print_fitted, started, table, wide
from envcheck.render.view import FLAG_ORDER, BenchView, CaseRow, FindingView, OpSection, bench_view
from envcheck.render.writing import written_lines

STATUS_STYLE = {"fail": "bold red", "error": "bold red", "warn": "yellow", "pass": "green", "skip": "dim"}


def _speed_style(x: float | None) -> str:
    if x is None:
        return ""
    return "green" if x >= 1.05 else "yellow" if x < 0.95 else ""


def _styled(text: str, style: str) -> str:
    return f"[{style}]{text}[/]" if style and text else text


def _groups(s: OpSection) -> list[tuple[str, str, dict[str, CaseRow]]]:
    """The section's rows per (precision, size), one entry per implementation, in the section's order."""
    out: dict[tuple[str, str], dict[str, CaseRow]] = {}
    for r in s.rows:
        out.setdefault((r.variant, r.size), {})[r.impl] = r
    return [(v, size, rows) for (v, size), rows in out.items()]


def _time(r: CaseRow | None, s: OpSection) -> str:
    if r is None:
        return ""
    text = r.gpu_time if s.has_gpu else r.launch_time
    return _styled(text, "red" if r.status == "error" else "")


def _error_cell(rows: dict[str, CaseRow], values: bool = False) -> str:
    """The row's worst err/bound, and (``values``) the whole-output error and the baseline's beside it;
    where an op with several outputs failed on some, those outputs (named, or phrased with their
    ratios when ``values``)."""
    errored = [r for r in rows.values() if r.status == "error"]
    if errored:
        return _styled("error", "bold red")
    judged = [r for r in rows.values() if r.error_ratio is not None]
    if not judged:
        return fmt.DASH
    worst = max(judged, key=lambda r: r.error_ratio or 0.0)
    failed = any(r.status == "fail" for r in rows.values())
    text = f"{worst.error} ({worst.tolerance})" if values else worst.error
    failing = [r for r in rows.values() if r.failed_outputs]
    if failing and values:
        text += "; " + "; ".join(r.failed_text for r in failing)
    elif failing:
        text += " " + term(",".join(dict.fromkeys(o for r in failing for o in r.failed_outputs)))
    return _styled(text, "bold red" if failed else "")


def _best_pct(rows: dict[str, CaseRow]) -> str:
    """The highest share of the theoretical ceiling among the row's implementations (as the analysis gave them)."""
    shares = [r for r in rows.values() if r.share is not None]
    return max(shares, key=lambda r: r.share or 0.0).pct_theoretical if shares else fmt.DASH


def op_table(console: Console, b: BenchView, s: OpSection, lang: str) -> None:
    def t(key: str, **kw: object) -> str:
        return translate(lang, key, **kw)

    impls = list(s.impls)
    # A speedup column per implementation that has one (not the baseline: torch, or the one a user's op names).
    others = [i for i in impls if any(r.impl == i and r.speedup is not None for r in s.rows)]
    is_wide = wide(console)
    time_label = t("col.gpu_time") if s.has_gpu else t("col.host_time" if b.backend == "cpu" else "col.launch_time")
    caption = t("term.op_caption" if s.has_speedup else "term.op_caption_plain", time=time_label)
    tab = table(console)
    tab.add_column(t("col.size"), justify="right", no_wrap=True)
    tab.add_column(t("col.dtype"), no_wrap=True)
    for impl in impls:
        tab.add_column(term(impl), justify="right", no_wrap=True)
    if s.has_speedup:
        for impl in others:
            tab.add_column(f"×{term(impl)}", justify="right", no_wrap=True)
    if is_wide:
        tab.add_column(f"{s.unit} ({'/'.join(impls)})", justify="right", no_wrap=True)
        if s.has_theoretical:
            tab.add_column(f"{t('col.pct_theoretical')} ({'/'.join(impls)})", justify="right", no_wrap=True)
    else:
        if len(impls) == 1:  # room for the throughput: one implementation, no speedup columns
            tab.add_column(s.unit, justify="right", no_wrap=True)
        if s.has_theoretical:
            tab.add_column(t("term.col.best_pct"), justify="right", no_wrap=True)
    tab.add_column(t("col.error") if is_wide else t("term.col.err_tol"), justify="right", no_wrap=True)
    has_flags = any(r.flags for r in s.rows)
    if has_flags:
        tab.add_column(t("col.flags"), no_wrap=True)
    for variant, size, rows in _groups(s):
        cells = [term(size), term(variant)]
        cells += [_time(rows.get(i), s) for i in impls]
        if s.has_speedup:
            cells += [_styled(rows[i].speedup_text, _speed_style(rows[i].speedup)) if i in rows else ""
                      for i in others]
        if is_wide:
            cells.append(" / ".join(rows[i].throughput if i in rows else fmt.DASH for i in impls))
            if s.has_theoretical:
                cells.append(" / ".join(rows[i].pct_theoretical if i in rows else fmt.DASH for i in impls))
        else:
            if len(impls) == 1:
                cells.append(rows[impls[0]].throughput if impls[0] in rows else fmt.DASH)
            if s.has_theoretical:
                cells.append(_best_pct(rows))
        cells.append(_error_cell(rows, values=is_wide))
        seen = {f.name: f for r in rows.values() for f in r.flags}
        flags = {n: seen[n] for n in FLAG_ORDER if n in seen}
        text = ", ".join(f.label for f in flags.values()) if is_wide else " ".join(f.abbr for f in flags.values())
        if has_flags:
            cells.append(_styled(term(text), "yellow" if flags else ""))
        tab.add_row(*cells)
    console.print()
    # The heading is a line of its own: as a table title it would wrap at the table's width.
    console.print(f"[bold]{term(s.op)}[/]  [dim]{caption}[/]")
    print_fitted(console, tab, keep=2)  # size and dtype name a row


def _finding_lines(console: Console, items: Sequence[FindingView], lang: str) -> None:
    lines = []
    for f in items:
        mark = {"warn": "[yellow]![/]", "fail": "[bold red]✗[/]"}.get(f.level, "-")
        text = f.text
        if f.flag is not None:
            text += " " + translate(lang, "term.rows_flagged", flag=f.flag.abbr if not wide(console) else f.flag.label)
        elif len(f.rows) > 1 and f.key not in ("finding.speedup_large", "finding.launch_overhead", "finding.tf32",
                                                "finding.tf32_noieee"):
            text += " " + translate(lang, "term.rows_in_report", count=len(f.rows))
        lines.append((mark, text))
    if lines:
        bullets(console, lines)


def legend(console: Console, b: BenchView, lang: str) -> None:
    if wide(console):
        return
    # Only what the tables above show: a CPU run has no theoretical ceiling, so no "%theor" column.
    flags = [f"{f.abbr} {f.label}" for f in b.flag_legend]
    parts = [translate(lang, "term.legend.flags", flags=", ".join(flags))] if flags else []
    if any(s.has_theoretical for s in b.sections):
        parts.append(translate(lang, "term.legend.theor"))
    parts.append(translate(lang, "term.legend.err_tol"))
    console.print(f"[dim]{' '.join(parts)}[/]")


def totals(console: Console, b: BenchView, lang: str) -> None:
    def t(key: str, **kw: object) -> str:
        return translate(lang, key, **kw)

    tab = table(console, title=t("section.summary"))
    tab.add_column(t("col.op"), no_wrap=True)
    tab.add_column(t("col.cases"), justify="right", no_wrap=True)
    tab.add_column(t("col.passed"), justify="right", no_wrap=True)
    tab.add_column(t("col.failed"), justify="right", no_wrap=True)
    tab.add_column(t("col.errors"), justify="right", no_wrap=True)
    for row in b.tallies:
        bad = row.failed or row.errors
        tab.add_row(term(row.op), str(row.cases), _styled(str(row.passed), "" if bad else "green"),
                    _styled(str(row.failed), "bold red" if row.failed else ""),
                    _styled(str(row.errors), "bold red" if row.errors else ""))
    console.print()
    print_fitted(console, tab)
    if b.speedups:
        sp = table(console, title=t("term.speedups"), caption=t("term.speedups_caption"))
        sp.add_column(t("col.op"), no_wrap=True)
        sp.add_column(t("col.impl"), no_wrap=True)
        for x in b.precisions:
            sp.add_column(x, justify="right", no_wrap=True)
        for row in b.speedups:
            cells = [_styled(cell, _speed_style(value)) if cell else fmt.DASH
                     for cell, value in zip(row.cells, row.values, strict=True)]
            sp.add_row(term(row.op), term(row.impl), *cells)
        console.print()
        print_fitted(console, sp, keep=2)


def bench_lines(console: Console, report: Report, b: BenchView, lang: str, bench: Bench | None = None) -> None:
    """One device's tables and findings; ``bench``: which of the report's (default: the first)."""
    def t(key: str, **kw: object) -> str:
        return translate(lang, key, **kw)

    bench = bench if bench is not None else report.bench
    assert bench is not None
    versions = ", ".join(f"{k} {v}" for k, v in sorted(bench.versions.items()))
    where = f"GPU {bench.device.index}" if bench.device.backend == "cuda" and bench.device.index is not None else \
        bench.device.backend
    took = fmt.seconds(bench.duration_s) if bench.duration_s is not None else fmt.DASH
    console.print(f"[bold]{t('term.bench_head', device=term(b.device), where=term(where), versions=term(versions), took=took)}[/]")
    started(console)
    if b.stop:
        console.print(f"[bold red]{b.stop}[/]")
    for s in b.sections:
        op_table(console, b, s, lang)
        _finding_lines(console, s.findings, lang)
    legend(console, b, lang)
    totals(console, b, lang)
    if b.findings:
        heading(console, t("section.findings"))
        _finding_lines(console, b.findings, lang)
    if b.recommendations:
        heading(console, t("section.recommendations"))
        bullets(console, [(f"{i}.", r) for i, r in enumerate(b.recommendations, 1)])
    if b.skipped:
        heading(console, t("term.skipped", count=b.skipped_count))
        lines = [(f"{g.count} ×", g.reason) for g in b.skipped[:6]]
        if len(b.skipped) > 6:
            lines.append(("…", t("term.more_reasons", count=len(b.skipped) - 6)))
        bullets(console, lines)
    if b.methodology.ceilings:
        heading(console, t("term.ceilings"))
        if wide(console):
            bullets(console, [("-", f"{term(c.name)} {c.kind}: {term(c.value)}  [dim]{c.source}[/]")
                              for c in b.methodology.ceilings])
        else:  # one line per limit, theoretical and measured side by side; the sources are in the report
            names: dict[str, list[str]] = {}
            for c in b.methodology.ceilings:
                names.setdefault(c.name, []).append(f"{term(c.value)} {c.kind}")
            bullets(console, [("-", f"{term(name)}: {' · '.join(values)}") for name, values in names.items()])
    if b.notes:
        heading(console, t("section.notes"))
        bullets(console, [("-", n) for n in b.notes])
    if b.phases:
        phase_lines(console, b.phases)


def phase_lines(console: Console, p: PhaseTable) -> None:
    """Where a run's (or the node tests') time went: one line a phase."""
    heading(console, p.title)
    bullets(console, [("-", p.explain), *((" ", f"{r.label}: {r.seconds} ({r.share})") for r in p.rows),
                      *(("-", line) for line in (p.by_op, p.slowest) if line)])


def check_lines(console: Console, report: Report, lang: str) -> None:
    """The checks that did not pass, one line each with the fix (``envcheck check`` shows all)."""
    if not report.checks:
        return
    verdict = report.verdict
    console.print()
    console.print(_styled(translate(lang, "term.checks", verdict=translate(lang, f"status.{verdict}"),
                                    counts=check_counts(lang, report.checks)),
                          STATUS_STYLE.get(verdict, "")))
    lines = []
    for c in all_localized(keyed(report.checks, report.environment, report.node), lang):
        if c.status in ("fail", "warn"):
            text = f"{term(c.title)}: {term(c.finding)}"
            if c.fix:
                text += f"\n[cyan]{term(translate(lang, 'term.fix', fix=c.fix))}[/]"
            lines.append((_styled(translate(lang, f"status.{c.status}").upper(), STATUS_STYLE[c.status]), text))
    if lines:
        bullets(console, lines)


def print_run(console: Console, report: Report, analysis: Analysis, written: Sequence[Path] = (),
              lang: str = "en") -> None:
    """Everything ``envcheck run`` prints after the run: with several GPUs (``--gpus``), the node's
    verdict and tests first, then each GPU's tables under its own heading."""
    if analysis.node is not None or len(analysis.benches) > 1:
        _print_node_run(console, report, analysis, lang)
    elif analysis.bench is not None and report.bench is not None:
        bench_lines(console, report, bench_view(analysis.bench, lang, term), lang)
    check_lines(console, report, lang)
    if written:
        heading(console, translate(lang, "term.report"))
        for line in written_lines(written):
            console.print(f"  {term(line)}")


def _print_node_run(console: Console, report: Report, analysis: Analysis, lang: str) -> None:
    from envcheck.render.terminal.node import MARK, print_section
    from envcheck.render.view import run_view

    v = run_view(report, analysis, lang, term)
    heading(console, v.title)
    bullets(console, [(MARK.get(x.status or "", "-"), f"{x.label}: [bold]{x.value}[/]"
                       + (f" [dim]({'; '.join(x.lines)})[/]" if x.lines else "")) for x in v.node_tiles])
    if v.node is not None:
        print_section(console, v.node, lang)
    if v.node_phases is not None:
        phase_lines(console, v.node_phases)
    for bv, ba in zip(v.benches, analysis.benches, strict=True):
        heading(console, bv.title)
        bench_lines(console, report, bv, lang, ba.bench)
