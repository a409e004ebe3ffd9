"""A diff and a history in the terminal: a digest of the documents (the per-case tables are in md / html), the
tables narrowed below ``console.WIDE_FROM`` columns to those that decide.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.console import Console

from envcheck.render import compare_view as dv
from envcheck.render import fmt
from envcheck.render.escape import term
from envcheck.render.i18n import escaping, t, word
from envcheck.render.terminal.console import bullets, print_fitted, table, wide

MAX_ROWS = 40  # significant-change rows shown in the terminal; the documents list them all
VERDICT_STYLE = {"slower": "red", "faster": "green", "not comparable": "yellow", "uncertain": "yellow",
                 "not judged": "yellow"}


def _v(verdict: str, text: str) -> str:
    style = VERDICT_STYLE.get(verdict, "")
    return f"[{style}]{text}[/]" if style else text


def _table(console: Console, title: str, cols: tuple[str, ...], right_from: int = 1) -> Any:
    tab = table(console, title=title)
    for i, col in enumerate(cols):
        tab.add_column(t(col), justify="right" if i >= right_from else "left", no_wrap=True)
    return tab


def _comparison(console: Console, cmp: Any, d: Any) -> None:
    is_wide = wide(console)
    title = dv.vs(cmp)
    console.print()
    if cell_len(title) + 6 <= console.width:
        console.rule(title)
    else:  # a rule would cut the title (the reports' names)
        console.print(f"[bold]{title}[/]")
        console.rule()
    settings_differ, gpus_differ = dv.settings_differ(cmp), dv.gpus_differ(cmp)
    if settings_differ:
        console.print(f"[bold yellow]{settings_differ}[/]")
    if gpus_differ:
        console.print(f"[yellow]{gpus_differ}[/]")
    env = [(dv.env_label(c), dv.env_value(c, c.before), dv.env_value(c, c.after)) for c in cmp.env]
    if env and is_wide:
        tab = table(console, title=t("diff.env"))
        tab.add_column(t("diff.col.what"), no_wrap=True)
        tab.add_column(term(cmp.base.label), overflow="fold")
        tab.add_column(term(cmp.other.label), overflow="fold")
        for row in env:
            tab.add_row(*map(term, row))
        console.print(tab)
    elif env:
        console.print(f"[bold]{t('diff.env')}[/]")
        bullets(console, [("-", f"{term(what)}: {term(before)} → {term(after)}") for what, before, after in env])
    else:
        console.print(t("diff.env.none"))
    if cmp.checks:
        console.print(f"[bold]{t('diff.health')}[/]")
        lines = []
        for c in cmp.checks:
            title_, finding, fix = dv.check_said(c)
            style = "bold red" if c.kind == "new_fail" else "green" if c.kind == "fixed" else ""
            head = word("diff.health.", c.kind)
            line = f"{f'[{style}]{head}[/]' if style else head}: {term(title_)} ({term(dv.status(c.before))} → " \
                   f"{term(dv.status(c.after))}): {term(finding)}"
            if fix:
                line += f"\n[cyan]{term(t('diff.health.fix', fix=fix))}[/]"
            lines.append(("-", line))
        bullets(console, lines)
    else:
        console.print(t("diff.health.none"))
    if not cmp.cases:
        console.print(t("diff.perf.none"))
        return
    if settings_differ:  # no row was compared, for the one reason said first: no tables of dashes
        return
    g = cmp.overall
    console.print(_v(g.verdict, dv.overall(g)) + " " + dv.split(g))
    console.print(f"[dim]{dv.noise(cmp, d.confidence)}[/]")
    tab = _table(console, t("diff.by_op"), ("diff.col.op", "diff.col.ratio", "diff.col.interval", "diff.col.count",
                                            "diff.col.slower", "diff.col.faster", "diff.col.same", "diff.col.nc"))
    tab.add_column(t("diff.col.verdict"), no_wrap=True)
    for x in cmp.ops:
        tab.add_row(term(x.name), fmt.ratio(x.geomean), fmt.interval(x.low, x.high), str(x.count), str(x.slower),
                    str(x.faster), str(x.same), str(x.not_comparable), _v(x.verdict, dv.verdict(x.verdict)))
    console.print()
    print_fitted(console, tab)
    significant = dv.significant(cmp)
    if significant:
        shown = significant[:MAX_ROWS]
        more = f" ({len(shown)}/{len(significant)})" if len(significant) > len(shown) else ""
        tab = table(console, title=t("diff.significant") + more)
        tab.add_column(t("diff.col.case"), no_wrap=True)
        if is_wide:
            tab.add_column(t("diff.col.timing"), no_wrap=True)
        for col in ("diff.col.base_time", "diff.col.other_time", "diff.col.ratio", "diff.col.interval",
                    *(("diff.col.base_pct", "diff.col.other_pct") if is_wide else ())):
            tab.add_column(t(col), justify="right", no_wrap=True)
        for c in shown:
            cells = [term(dv.case_name(c))] + ([term(c.timing or fmt.DASH)] if is_wide else [])
            cells += [fmt.duration_us(c.base_us), fmt.duration_us(c.other_us), _v(c.verdict, fmt.ratio(c.ratio)),
                      fmt.interval(c.low, c.high)]
            tab.add_row(*cells, *((fmt.pct(c.base_pct), fmt.pct(c.other_pct)) if is_wide else ()))
        console.print()
        print_fitted(console, tab)
    else:
        console.print(t("diff.significant.none", threshold=fmt.general(d.practical_pct)))
    if cmp.numeric_changes:
        tab = _table(console, t("diff.numeric"), ("diff.col.case", "diff.col.base_err", "diff.col.other_err"))
        tab.add_column(t("diff.col.change"), no_wrap=True)
        for c in cmp.numeric_changes:
            tab.add_row(term(dv.case_name(c)), fmt.sci(c.numeric.base_rel_l2), fmt.sci(c.numeric.other_rel_l2),
                        dv.numeric_label(c))
        console.print()
        print_fitted(console, tab)
    if cmp.not_comparable:
        console.print(f"[bold]{t('diff.not_comparable')}[/] ({len(cmp.not_comparable)})")
        lines = [("-", f"{term(dv.case_name(c))}: [yellow]{dv.reasons_text(c.reasons)}[/]")
                 for c in cmp.not_comparable[:MAX_ROWS]]
        if len(cmp.not_comparable) > MAX_ROWS:
            lines.append(("…", t("term.more_rows", count=len(cmp.not_comparable) - MAX_ROWS)))
        bullets(console, lines)
    for title_, refs in ((t("diff.only_base", count=len(cmp.only_base)), cmp.only_base),
                         (t("diff.only_other", label=term(cmp.other.label), count=len(cmp.only_other)), cmp.only_other)):
        if refs:
            console.print(f"[bold]{title_}[/]")
            bullets(console, [("-", term(line)) for line in dv.refs(refs)])


def _node(console: Console, n: Any, d: Any, heading: str | None = None) -> None:
    """The node tests' digest: what changed in the wiring and NCCL, the significant rows, the counters that
    moved; every row is in ``--format md`` / ``html`` / ``json``."""
    console.print()
    console.print(f"[bold]{heading or t('diff.node')}[/]")
    if n.changes:
        bullets(console, [("-", f"{dv.node_change(c)}: {term(c.before or fmt.DASH)} → {term(c.after or fmt.DASH)}")
                          for c in n.changes])
    else:
        console.print(t("diff.node.changes.none"))
    significant = dv.significant(n)
    if significant:
        tab = _table(console, t("diff.node.significant"), ("diff.node.col.test", "diff.node.col.base",
                                                           "diff.node.col.other", "diff.node.col.change",
                                                           "diff.col.ratio", "diff.col.interval"))
        for r in significant[:MAX_ROWS]:
            name, base, other, change, _ = dv.node_row(r)
            tab.add_row(name, base, other, _v(r.change.verdict, change), fmt.ratio(r.change.ratio),
                        fmt.interval(r.change.low, r.change.high))
        console.print()
        print_fitted(console, tab)
    else:
        console.print(t("diff.node.significant.none", threshold=fmt.general(d.practical_pct)))
    console.print(t("term.node_rows", count=len(n.collectives) + len(n.copies)))
    counters = [c for c in n.counters if c.nonzero]
    if counters:
        tab = _table(console, t("diff.node.counters"), ("diff.node.col.counter", "diff.node.col.base_rate",
                                                        "diff.node.col.other_rate", "diff.node.col.base_boot",
                                                        "diff.node.col.other_boot"))
        for c in counters:
            name = term(f"GPU{c.gpu} {c.name}")
            if c.base_over_limit or c.other_over_limit:
                name += f" [red]{t('diff.node.over_limit')}[/]"
            tab.add_row(name, fmt.num(c.base_per_s), fmt.num(c.other_per_s), fmt.num(c.base_boot_per_s),
                        fmt.num(c.other_boot_per_s))
        console.print()
        print_fitted(console, tab)


def print_diff(console: Console, d: Any) -> None:
    """A diff (``compare.diff.Diff``) for the terminal."""
    with escaping(term):
        console.print(f"[bold]{dv.title(d)}[/]")
        tab = table(console)
        for col in ("diff.col.report", "diff.col.host", *(("diff.col.created",) if wide(console) else ()),
                    "diff.col.gpu", "diff.col.health"):
            tab.add_column(t(col), no_wrap=True)
        tab.add_column(t("diff.col.cases"), justify="right", no_wrap=True)
        for i, r in enumerate(d.reports):
            cells = [term(r.label) + (f" ({t('diff.baseline_mark')})" if i == 0 else ""), term(r.host)]
            cells += [term(r.created)] if wide(console) else []
            cells += [term(r.gpu_name or fmt.DASH), t(f"status.{r.verdict}") if r.verdict in ("pass", "warn", "fail")
                      else term(r.verdict), str(r.cases)]
            tab.add_row(*cells)
        console.print()
        print_fitted(console, tab)
        unmatched = dv.unmatched(d)
        if unmatched:
            console.print()
            console.print(f"[bold yellow]{t('diff.unmatched', count=len(unmatched))}[/]")
            bullets(console, [("-", line) for line in unmatched])
        for w in getattr(d, "worlds", ()):
            _node(console, w.node, d, heading=t("diff.world", other=term(w.other), baseline=term(w.base)))
        for cmp in d.comparisons:
            _comparison(console, cmp, d)
            if getattr(cmp, "node", None) is not None:
                _node(console, cmp.node, d)
        console.print()
        # The method in one line; the paragraph is in the documents, not after every diff in a terminal.
        console.print(f"[dim]{t('term.diff_method')}[/]")


def print_history(console: Console, h: Any) -> None:
    """A history (``compare.history.History``) for the terminal."""
    with escaping(term):
        is_wide = wide(console)
        console.print(f"[bold]{dv.history_title(h)}[/]")
        if not h.trend:
            console.print(f"[dim]{t('history.single')}[/]")
        for w in dv.warnings(h):
            console.print(f"[bold yellow]{w}[/]")
        trend = table(console, title=t("history.trend"))
        trend.add_column(t("diff.col.report"), no_wrap=True)
        for op in h.ops:
            trend.add_column(term(op), justify="right", no_wrap=True)
        trend.add_column(t("history.col.copy"), justify="right", no_wrap=True)
        for p in h.points:
            cells = [(f"{x[0]} {x[1]}" if is_wide else x[0]) if x else fmt.DASH for x in dv.trend(h, p)]
            trend.add_row(term(p.info.label), *cells, fmt.num(p.copy_gbps))
        console.print()
        print_fitted(console, trend)
        nodes = [p for p in h.points if getattr(p, "node", None) is not None]
        if nodes:
            node = table(console, title=t("history.node"))
            node.add_column(t("diff.col.report"), no_wrap=True)
            for col in ("history.col.ar_small", "history.col.ar_large", "history.col.p2p"):
                node.add_column(t(col), justify="right")
            for p in nodes:
                node.add_row(term(p.info.label), dv.busbw_at(p.node.small_busbw, p.node.small_bytes),
                             dv.busbw_at(p.node.large_busbw, p.node.large_bytes), fmt.num(p.node.p2p_gbps))
            console.print()
            print_fitted(console, node)
        peaks = table(console, title=t("history.peaks"), caption=None if is_wide else t("term.peaks_units"))
        peaks.add_column(t("diff.col.report"), no_wrap=True)
        for op in h.ops:
            peaks.add_column(term(op), justify="right", no_wrap=True)
        for p in h.points:
            peaks.add_row(term(p.info.label), *(dv.peak(p.op(op), unit=is_wide) for op in h.ops))
        console.print()
        print_fitted(console, peaks)
        if h.steps:
            console.print(f"[bold]{t('history.steps')}[/]")
            bullets(console, [("-", _v(s.direction, dv.step(s))) for s in h.steps])
        else:
            console.print(t("history.steps.none", threshold=fmt.general(h.practical_pct)))
        console.print()
        console.print(f"[dim]{t('history.method', threshold=fmt.general(h.practical_pct))}[/]")
