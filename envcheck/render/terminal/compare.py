"""Terminal output of a diff and a history: a digest of the documents, laid out for the console's width.

Environment and health changes, the per-op summary, the significant changes and what was not
compared; the full per-case tables are in ``--format md`` / ``html``. Below
``console.WIDE_FROM`` columns the tables keep the columns that decide (case, times, ratio,
interval) and long texts become lists, so no cell wraps at 100 columns.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.console import Console

from envcheck.render import fmt
from envcheck.render.compare_view import ComparisonView, DiffView, HistoryView, diff_view, history_view
from envcheck.render.escape import term
from envcheck.render.i18n import translate
from envcheck.render.node_compare_view import NodeCompareView
from envcheck.render.terminal.console import bullets, print_fitted, table, wide

MAX_ROWS = 40  # significant-change rows shown in the terminal; the documents list them all
VERDICT_STYLE = {"slower": "red", "faster": "green", "not comparable": "yellow", "uncertain": "yellow",
                 "not judged": "yellow"}


def _v(verdict: str, text: str) -> str:
    style = VERDICT_STYLE.get(verdict, "")
    return f"[{style}]{text}[/]" if style else text


def _comparison(console: Console, cmp: ComparisonView, v: DiffView, lang: str) -> None:
    def t(key: str, **kw: object) -> str:
        return translate(lang, key, **kw)

    is_wide = wide(console)
    console.print()
    if cell_len(cmp.title) + 6 <= console.width:
        console.rule(cmp.title)
    else:  # a rule would cut the title (the reports' names)
        console.print(f"[bold]{cmp.title}[/]")
        console.rule()
    if cmp.settings_differ:
        console.print(f"[bold yellow]{cmp.settings_differ}[/]")
    if cmp.gpus_differ:
        console.print(f"[yellow]{cmp.gpus_differ}[/]")
    if cmp.env:
        if is_wide:
            tab = table(console, title=t("diff.env"))
            tab.add_column(t("diff.col.what"), no_wrap=True)
            tab.add_column(term(cmp.base_label), overflow="fold")
            tab.add_column(term(cmp.other_label), overflow="fold")
            for c in cmp.env:
                tab.add_row(term(c.what), term(c.before), term(c.after))
            console.print(tab)
        else:
            console.print(f"[bold]{t('diff.env')}[/]")
            bullets(console, [("-", f"{term(c.what)}: {term(c.before)} → {term(c.after)}") for c in cmp.env])
    else:
        console.print(t("diff.env.none"))
    if cmp.checks:
        console.print(f"[bold]{t('diff.health')}[/]")
        lines = []
        for c in cmp.checks:
            style = "bold red" if c.kind == "new_fail" else "green" if c.kind == "fixed" else ""
            head = f"[{style}]{c.kind_text}[/]" if style else c.kind_text
            line = f"{head}: {term(c.title)} ({term(c.before)} → {term(c.after)}): {term(c.finding)}"
            if c.fix:
                line += f"\n[cyan]{term(t('diff.health.fix', fix=c.fix))}[/]"
            lines.append(("-", line))
        bullets(console, lines)
    else:
        console.print(t("diff.health.none"))
    if not cmp.has_cases:
        console.print(t("diff.perf.none"))
        return
    if cmp.settings_differ:  # no row was compared, for the one reason said first: no tables of dashes
        return
    console.print(_v(cmp.overall_verdict, cmp.overall) + " " + cmp.split)
    console.print(f"[dim]{cmp.noise}[/]")
    tab = table(console, title=t("diff.by_op"))
    for col, right in (("diff.col.op", False), ("diff.col.ratio", True), ("diff.col.interval", True),
                       ("diff.col.count", True), ("diff.col.slower", True), ("diff.col.faster", True),
                       ("diff.col.same", True), ("diff.col.nc", True), ("diff.col.verdict", False)):
        tab.add_column(t(col), justify="right" if right else "left", no_wrap=True)
    for g in cmp.ops:
        tab.add_row(term(g.name), g.ratio, g.interval, str(g.count), str(g.slower), str(g.faster), str(g.same),
                    str(g.not_comparable), _v(g.verdict, g.verdict_text))
    console.print()
    print_fitted(console, tab)
    if cmp.significant:
        shown = cmp.significant[:MAX_ROWS]
        more = f" ({len(shown)}/{len(cmp.significant)})" if len(cmp.significant) > len(shown) else ""
        tab = table(console, title=t("diff.significant") + more)
        tab.add_column(t("diff.col.case"), no_wrap=True)
        if is_wide:
            tab.add_column(t("diff.col.timing"), no_wrap=True)
        for col in ("diff.col.base_time", "diff.col.other_time", "diff.col.ratio", "diff.col.interval"):
            tab.add_column(t(col), justify="right", no_wrap=True)
        if is_wide:
            tab.add_column(t("diff.col.base_pct"), justify="right", no_wrap=True)
            tab.add_column(t("diff.col.other_pct"), justify="right", no_wrap=True)
        for c in shown:
            cells = [term(c.name)] + ([term(c.timing)] if is_wide else [])
            cells += [c.base, c.other, _v(c.verdict, c.ratio), c.interval]
            cells += [c.base_pct, c.other_pct] if is_wide else []
            tab.add_row(*cells)
        console.print()
        print_fitted(console, tab)
    else:
        console.print(v.significant_none)
    if cmp.numeric:
        tab = table(console, title=t("diff.numeric"))
        tab.add_column(t("diff.col.case"), no_wrap=True)
        tab.add_column(t("diff.col.base_err"), justify="right", no_wrap=True)
        tab.add_column(t("diff.col.other_err"), justify="right", no_wrap=True)
        tab.add_column(t("diff.col.change"), no_wrap=True)
        for n in cmp.numeric:
            tab.add_row(term(n.name), n.base, n.other, n.change)
        console.print()
        print_fitted(console, tab)
    if cmp.not_comparable:
        console.print(f"[bold]{t('diff.not_comparable')}[/] ({len(cmp.not_comparable)})")
        lines = [("-", f"{term(name)}: [yellow]{reasons}[/]") for name, reasons in cmp.not_comparable[:MAX_ROWS]]
        if len(cmp.not_comparable) > MAX_ROWS:
            lines.append(("…", t("term.more_rows", count=len(cmp.not_comparable) - MAX_ROWS)))
        bullets(console, lines)
    for title, refs in ((cmp.only_base_title, cmp.only_base), (cmp.only_other_title, cmp.only_other)):
        if refs:
            console.print(f"[bold]{title}[/]")
            bullets(console, [("-", term(line)) for line in refs])


def _node(console: Console, n: NodeCompareView, v: DiffView, lang: str, heading: str | None = None) -> None:
    """The node tests' digest: what changed in the wiring and NCCL, the significant rows, the
    counters that moved; every row is in ``--format md`` / ``html`` / ``json``. The view's texts
    are escaped for the terminal already."""
    def t(key: str, **kw: object) -> str:
        return translate(lang, key, **kw)

    console.print()
    console.print(f"[bold]{heading or t('diff.node')}[/]")
    if n.changes:
        bullets(console, [("-", f"{c.what}: {c.before} → {c.after}") for c in n.changes])
    else:
        console.print(t("diff.node.changes.none"))
    if n.significant:
        tab = table(console, title=t("diff.node.significant"))
        tab.add_column(t("diff.node.col.test"), no_wrap=True)
        for col in ("diff.node.col.base", "diff.node.col.other", "diff.node.col.change", "diff.col.ratio",
                    "diff.col.interval"):
            tab.add_column(t(col), justify="right", no_wrap=True)
        for r in n.significant[:MAX_ROWS]:
            tab.add_row(r.name, r.base, r.other, _v(r.verdict, r.change), r.ratio, r.interval)
        console.print()
        print_fitted(console, tab)
    else:
        console.print(v.node_significant_none)
    rows = len(n.collectives) + len(n.peer) + len(n.host)
    console.print(t("term.node_rows", count=rows))
    if n.counters:
        tab = table(console, title=t("diff.node.counters"))
        tab.add_column(t("diff.node.col.counter"), no_wrap=True)
        for col in ("diff.node.col.base_rate", "diff.node.col.other_rate", "diff.node.col.base_boot",
                    "diff.node.col.other_boot"):
            tab.add_column(t(col), justify="right", no_wrap=True)
        for c in n.counters:
            name = f"{c.name} [red]{t('diff.node.over_limit')}[/]" if c.over_limit else c.name
            tab.add_row(name, c.base, c.other, c.base_boot, c.other_boot)
        console.print()
        print_fitted(console, tab)


def print_diff(console: Console, d: Any, lang: str = "en") -> None:
    """A diff (``compare.diff.Diff``) for the terminal."""
    v = diff_view(d, lang, term)

    def t(key: str, **kw: object) -> str:
        return translate(lang, key, **kw)

    console.print(f"[bold]{v.title}[/]")
    tab = table(console)
    tab.add_column(t("diff.col.report"), no_wrap=True)
    tab.add_column(t("diff.col.host"), no_wrap=True)
    if wide(console):
        tab.add_column(t("diff.col.created"), no_wrap=True)
    tab.add_column(t("diff.col.gpu"), no_wrap=True)
    tab.add_column(t("diff.col.health"), no_wrap=True)
    tab.add_column(t("diff.col.cases"), justify="right", no_wrap=True)
    for r in v.reports:
        label = term(r.label) + (f" ({t('diff.baseline_mark')})" if r.baseline else "")
        cells = [label, term(r.host)] + ([term(r.created)] if wide(console) else [])
        cells += [term(r.gpu), t(f"status.{r.verdict}") if r.verdict in ("pass", "warn", "fail") else term(r.verdict),
                  str(r.cases)]
        tab.add_row(*cells)
    console.print()
    print_fitted(console, tab)
    if v.unmatched:
        console.print()
        console.print(f"[bold yellow]{t('diff.unmatched', count=len(v.unmatched))}[/]")
        bullets(console, [("-", line) for line in v.unmatched])
    for title, world in v.worlds:
        _node(console, world, v, lang, heading=title)
    for cmp in v.comparisons:
        _comparison(console, cmp, v, lang)
        if cmp.node is not None:
            _node(console, cmp.node, v, lang)
    console.print()
    # The method in one line; the paragraph is in the documents, not after every diff in a terminal.
    console.print(f"[dim]{t('term.diff_method')}[/]")


def _history_tables(console: Console, v: HistoryView, lang: str) -> None:
    def t(key: str, **kw: object) -> str:
        return translate(lang, key, **kw)

    trend = table(console, title=t("history.trend"))
    trend.add_column(t("diff.col.report"), no_wrap=True)
    for op in v.ops:
        trend.add_column(term(op), justify="right", no_wrap=True)
    trend.add_column(t("history.col.copy"), justify="right", no_wrap=True)
    for r in v.rows:
        cells = [(f"{c.ratio} {c.interval}" if wide(console) else c.ratio) if c else fmt.DASH for c in r.trend]
        trend.add_row(term(r.label), *cells, r.copy_gbps)
    console.print()
    print_fitted(console, trend)
    if v.node:
        node = table(console, title=t("history.node"))
        node.add_column(t("diff.col.report"), no_wrap=True)
        for col in ("history.col.ar_small", "history.col.ar_large", "history.col.p2p"):
            node.add_column(t(col), justify="right")
        for n in v.node:
            node.add_row(term(n.label), n.small, n.large, n.p2p)
        console.print()
        print_fitted(console, node)
    peaks = table(console, title=t("history.peaks"), caption=None if wide(console) else t("term.peaks_units"))
    peaks.add_column(t("diff.col.report"), no_wrap=True)
    for op in v.ops:
        peaks.add_column(term(op), justify="right", no_wrap=True)
    for r in v.rows:
        peaks.add_row(term(r.label), *(r.peaks if wide(console) else r.peaks_short))
    console.print()
    print_fitted(console, peaks)


def print_history(console: Console, h: Any, lang: str = "en") -> None:
    """A history (``compare.history.History``) for the terminal."""
    v = history_view(h, lang, term)

    def t(key: str, **kw: object) -> str:
        return translate(lang, key, **kw)

    console.print(f"[bold]{v.title}[/]")
    if v.single:
        console.print(f"[dim]{v.single}[/]")
    for w in v.warnings:
        console.print(f"[bold yellow]{w}[/]")
    _history_tables(console, v, lang)
    if v.steps:
        console.print(f"[bold]{t('history.steps')}[/]")
        bullets(console, [("-", _v(s.direction, s.text)) for s in v.steps])
    else:
        console.print(v.steps_none)
    console.print()
    console.print(f"[dim]{v.method}[/]")
