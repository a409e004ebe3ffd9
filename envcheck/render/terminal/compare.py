"""A diff and a history in the terminal: a digest of the documents (the per-case tables are in md / html), the
tables narrowed below ``console.WIDE_FROM`` columns to those that decide."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console

from envcheck.compare.diff import Comparison, Diff
from envcheck.compare.history import History
from envcheck.compare.node_diff import NodeComparison
from envcheck.render import compare_view as dv
from envcheck.render import fmt
from envcheck.render.escape import term
from envcheck.render.i18n import escaping, t, word
from envcheck.render.terminal.console import bullets, print_rows, styled, table, wide

MAX_ROWS = 40  # significant-change rows shown in the terminal; the documents list them all
VERDICT_STYLE = {"slower": "red", "faster": "green", "not comparable": "yellow", "uncertain": "yellow",
                 "not judged": "yellow"}


def _v(verdict: str, text: str) -> str:
    return styled(text, VERDICT_STYLE.get(verdict, ""))


def _heads(*keys: str) -> list[str]:
    return [t(k) for k in keys]


def _comparison(console: Console, cmp: Comparison, d: Diff) -> None:
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
    print_rows(console, _heads("diff.col.op", "diff.col.ratio", "diff.col.interval", "diff.col.count", "diff.col.slower",
                               "diff.col.faster", "diff.col.same", "diff.col.nc", "diff.col.verdict"),
               [(term(x.name), fmt.ratio(x.geomean), fmt.interval(x.low, x.high), str(x.count), str(x.slower),
                 str(x.faster), str(x.same), str(x.not_comparable), _v(x.verdict, dv.verdict(x.verdict)))
                for x in cmp.ops], [False, *[True] * 7, False], t("diff.by_op"))
    significant = dv.significant(cmp)
    if significant:
        shown = significant[:MAX_ROWS]
        more = f" ({len(shown)}/{len(significant)})" if len(significant) > len(shown) else ""
        heads = _heads("diff.col.case", *(("diff.col.timing",) if is_wide else ()), "diff.col.base_time",
                       "diff.col.other_time", "diff.col.ratio", "diff.col.interval",
                       *(("diff.col.base_pct", "diff.col.other_pct") if is_wide else ()))
        print_rows(console, heads, [(term(dv.case_name(c)), *((term(c.timing or fmt.DASH),) if is_wide else ()),
                                     fmt.duration_us(c.base_us), fmt.duration_us(c.other_us),
                                     _v(c.verdict, fmt.ratio(c.ratio)), fmt.interval(c.low, c.high),
                                     *((fmt.pct(c.base_pct), fmt.pct(c.other_pct)) if is_wide else ()))
                                    for c in shown], 2 if is_wide else 1, t("diff.significant") + more)
    else:
        console.print(t("diff.significant.none", threshold=fmt.general(d.practical_pct)))
    if cmp.numeric_changes:
        print_rows(console, _heads("diff.col.case", "diff.col.base_err", "diff.col.other_err", "diff.col.change"),
                   [(term(dv.case_name(c)), fmt.sci(c.numeric.base_rel_l2), fmt.sci(c.numeric.other_rel_l2),
                     dv.numeric_label(c)) for c in cmp.numeric_changes], [False, True, True, False], t("diff.numeric"))
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


def _node(console: Console, n: NodeComparison, d: Diff, heading: str | None = None) -> None:
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
        print_rows(console, _heads("diff.node.col.test", "diff.node.col.base", "diff.node.col.other",
                                   "diff.node.col.change", "diff.col.ratio", "diff.col.interval"),
                   [(*dv.node_row(r)[:3], _v(r.change.verdict, dv.node_row(r)[3]), fmt.ratio(r.change.ratio),
                     fmt.interval(r.change.low, r.change.high)) for r in significant[:MAX_ROWS]],
                   title=t("diff.node.significant"))
    else:
        console.print(t("diff.node.significant.none", threshold=fmt.general(d.practical_pct)))
    console.print(t("term.node_rows", count=len(n.collectives) + len(n.copies)))
    counters = [c for c in n.counters if c.nonzero]
    if counters:
        over = f" [red]{t('diff.node.over_limit')}[/]"
        print_rows(console, _heads("diff.node.col.counter", "diff.node.col.base_rate", "diff.node.col.other_rate",
                                   "diff.node.col.base_boot", "diff.node.col.other_boot"),
                   [(term(f"GPU{c.gpu} {c.name}") + (over if c.base_over_limit or c.other_over_limit else ""),
                     fmt.num(c.base_per_s), fmt.num(c.other_per_s), fmt.num(c.base_boot_per_s),
                     fmt.num(c.other_boot_per_s)) for c in counters], title=t("diff.node.counters"))


def print_diff(console: Console, d: Diff) -> None:
    """A diff (``compare.diff.Diff``) for the terminal."""
    with escaping(term):
        console.print(f"[bold]{dv.title(d)}[/]")
        is_wide = wide(console)
        heads = _heads("diff.col.report", "diff.col.host", *(("diff.col.created",) if is_wide else ()),
                       "diff.col.gpu", "diff.col.health", "diff.col.cases")
        print_rows(console, heads, [(term(r.label) + (f" ({t('diff.baseline_mark')})" if i == 0 else ""),
                                     term(r.host), *((term(r.created),) if is_wide else ()),
                                     term(r.gpu_name or fmt.DASH), t(f"status.{r.verdict}")
                                     if r.verdict in ("pass", "warn", "fail") else term(r.verdict), str(r.cases))
                                    for i, r in enumerate(d.reports)], len(heads) - 1)
        unmatched = dv.unmatched(d)
        if unmatched:
            console.print()
            console.print(f"[bold yellow]{t('diff.unmatched', count=len(unmatched))}[/]")
            bullets(console, [("-", line) for line in unmatched])
        for w in d.worlds:
            _node(console, w.node, d, heading=t("diff.world", other=term(w.other), baseline=term(w.base)))
        for cmp in d.comparisons:
            _comparison(console, cmp, d)
            if cmp.node is not None:
                _node(console, cmp.node, d)
        console.print()
        # The method in one line; the paragraph is in the documents, not after every diff in a terminal.
        console.print(f"[dim]{t('term.diff_method')}[/]")


def print_history(console: Console, h: History) -> None:
    """A history (``compare.history.History``) for the terminal."""
    with escaping(term):
        is_wide = wide(console)
        console.print(f"[bold]{dv.history_title(h)}[/]")
        if not h.trend:
            console.print(f"[dim]{t('history.single')}[/]")
        for w in dv.warnings(h):
            console.print(f"[bold yellow]{w}[/]")
        print_rows(console, [t("diff.col.report"), *map(term, h.ops), t("history.col.copy")],
                   [(term(p.info.label), *((f"{x[0]} {x[1]}" if is_wide else x[0]) if x else fmt.DASH
                                           for x in dv.trend(h, p)), fmt.num(p.copy_gbps)) for p in h.points],
                   title=t("history.trend"))
        nodes = [p for p in h.points if p.node is not None]
        if nodes:
            print_rows(console, _heads("diff.col.report", "history.col.ar_small", "history.col.ar_large", "history.col.p2p"),
                       [(term(p.info.label), dv.busbw_at(p.node.small_busbw, p.node.small_bytes),
                         dv.busbw_at(p.node.large_busbw, p.node.large_bytes), fmt.num(p.node.p2p_gbps)) for p in nodes],
                       title=t("history.node"))
        print_rows(console, [t("diff.col.report"), *map(term, h.ops)],
                   [(term(p.info.label), *(dv.peak(p.op(op), unit=is_wide) for op in h.ops)) for p in h.points],
                   title=t("history.peaks"), caption=None if is_wide else t("term.peaks_units"))
        if h.steps:
            console.print(f"[bold]{t('history.steps')}[/]")
            bullets(console, [("-", _v(s.direction, dv.step(s))) for s in h.steps])
        else:
            console.print(t("history.steps.none", threshold=fmt.general(h.practical_pct)))
        console.print()
        console.print(f"[dim]{t('history.method', threshold=fmt.general(h.practical_pct))}[/]")
