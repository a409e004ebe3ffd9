"""Terminal output of a diff and a history (rich; plain text when not a terminal).

Terminal output is a digest: environment and health changes, per-op summaries,
the significant changes and everything not compared. The full per-case tables
are in ``--format md`` / ``html``.
"""

from __future__ import annotations

from typing import Any

from envcheck.compare.diff import Comparison, Diff, GroupSummary
from envcheck.compare.history import History
from envcheck.compare.i18n import general, interval, numeric_label, ratio, step_sentence, translator
from envcheck.render.jinja import DASH, duration_us, num, pct

MAX_ROWS = 40  # significant-change rows shown in the terminal; the documents list them all


def _style(verdict: str) -> str:
    return {"slower": "red", "faster": "green", "not comparable": "yellow", "uncertain": "yellow"}.get(verdict, "")


def _table(title: str | None, columns: list[str], rows: list[list[str]], styles: list[str] | None = None) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left", show_edge=False, pad_edge=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    for i, row in enumerate(rows):
        table.add_row(*row, style=styles[i] if styles else None)
    return table


def _group_row(g: GroupSummary, t: Any) -> list[str]:
    return [g.name, ratio(g.geomean), interval(g.low, g.high), str(g.count), str(g.slower), str(g.faster),
            str(g.same), str(g.not_comparable), t(f"verdict.{g.verdict}")]


def print_comparison(console: Any, cmp: Comparison, d: Diff, t: Any) -> None:
    console.rule(t("diff.vs", other=cmp.other.label, baseline=cmp.base.label))
    if not cmp.same_gpu:
        console.print(t("diff.different_gpus", baseline_gpu=cmp.base.gpu_name or DASH,
                        other_gpu=cmp.other.gpu_name or DASH),
                      style="yellow", markup=False)
    if cmp.env:
        console.print(_table(t("diff.env"), [t("diff.col.what"), cmp.base.label, cmp.other.label],
                             [[c.title, c.before, c.after] for c in cmp.env]))
    else:
        console.print(t("diff.env.none"), markup=False)
    if cmp.checks:
        console.print(_table(t("diff.health"), [t("diff.col.change"), "check", t("diff.col.baseline"),
                                                t("diff.col.other"), ""],
                             [[t(f"diff.health.{c.kind}"), c.title, c.before or DASH, c.after or DASH,
                               c.finding + (f" ({t('diff.health.fix', fix=c.fix)})" if c.fix else "")]
                              for c in cmp.checks],
                             ["bold red" if c.kind == "new_fail" else "" for c in cmp.checks]))
    else:
        console.print(t("diff.health.none"), markup=False)
    if not cmp.cases:
        console.print(t("diff.perf.none"), markup=False)
    else:
        g = cmp.overall
        console.print(t("diff.overall", ratio=ratio(g.geomean), low=ratio(g.low), high=ratio(g.high), count=g.count,
                        verdict=t(f"verdict.{g.verdict}")), style=_style(g.verdict), markup=False)
        console.print(_table(t("diff.by_op"), [t("diff.col.op"), t("diff.col.ratio"), t("diff.col.interval"),
                                               t("diff.col.count"), t("diff.col.slower"), t("diff.col.faster"),
                                               t("diff.col.same"), t("diff.col.nc"), t("diff.col.verdict")],
                             [_group_row(o, t) for o in cmp.ops], [_style(o.verdict) for o in cmp.ops]))
        sig = sorted((c for c in cmp.cases if c.verdict in ("slower", "faster")), key=lambda c: -(c.ratio or 0))
        if sig:
            shown = sig[:MAX_ROWS]
            console.print(_table(
                t("diff.significant") + (f" ({len(shown)}/{len(sig)})" if len(sig) > len(shown) else ""),
                [t("diff.col.case"), t("diff.col.timing"), t("diff.col.base_time"), t("diff.col.other_time"),
                 t("diff.col.ratio"), t("diff.col.interval"), t("diff.col.base_pct"), t("diff.col.other_pct")],
                [[c.name, c.timing or DASH, duration_us(c.base_us), duration_us(c.other_us), ratio(c.ratio),
                  interval(c.low, c.high), pct(c.base_pct, 1), pct(c.other_pct, 1)] for c in shown],
                [_style(c.verdict) for c in shown]))
        else:
            console.print(t("diff.significant.none", threshold=general(d.practical_pct)), markup=False)
        if cmp.numeric_changes:
            console.print(_table(t("diff.numeric"), [t("diff.col.case"), t("diff.col.base_err"),
                                                     t("diff.col.other_err"), t("diff.col.change")],
                                 [[c.name, f"{c.numeric.base_rel_l2:.2g}", f"{c.numeric.other_rel_l2:.2g}",
                                   numeric_label(c, t)] for c in cmp.numeric_changes if c.numeric]))
        if cmp.not_comparable:
            console.print(_table(t("diff.not_comparable"), [t("diff.col.case"), t("diff.col.reason")],
                                 [[c.name, "; ".join(c.reasons)] for c in cmp.not_comparable]))
    for title, refs in ((t("diff.only_base", count=len(cmp.only_base)), cmp.only_base),
                        (t("diff.only_other", label=cmp.other.label, count=len(cmp.only_other)), cmp.only_other)):
        if refs:
            names = ", ".join(f"{r.op} {r.impl} {r.dtype} {r.shape}" for r in refs[:MAX_ROWS])
            more = f" (+{len(refs) - MAX_ROWS})" if len(refs) > MAX_ROWS else ""
            console.print(f"{title}: {names}{more}", markup=False)


def print_diff(console: Any, d: Diff, lang: str = "en") -> None:
    t = translator(lang)
    console.print(t("diff.title", count=len(d.reports), baseline=d.baseline.label), style="bold", markup=False)
    console.print(_table(None, [t("diff.col.report"), t("diff.col.host"), t("diff.col.created"), t("diff.col.gpu"),
                                t("diff.col.health"), t("diff.col.cases")],
                         [[r.label + (f" ({t('diff.baseline_mark')})" if i == 0 else ""), r.host, r.created,
                           r.gpu_name or DASH, r.verdict, str(r.cases)] for i, r in enumerate(d.reports)]))
    for cmp in d.comparisons:
        print_comparison(console, cmp, d, t)
    console.print(t("diff.method", confidence=general(d.confidence * 100), resamples=d.resamples,
                    threshold=general(d.practical_pct)), style="dim", markup=False)


def print_history(console: Any, h: History, lang: str = "en") -> None:
    t = translator(lang)
    console.print(t("history.title", count=len(h.points), first=h.points[0].info.created,
                    last=h.points[-1].info.created), style="bold", markup=False)
    for key, groups in (("history.mixed_hosts", h.hosts), ("history.mixed_gpus", h.gpus)):
        if groups:
            text = "; ".join(f"{name}: {', '.join(labels)}" for name, labels in groups)
            console.print(t(key, groups=text), style="bold yellow", markup=False)
    cols = [t("diff.col.report"), t("diff.col.created"), *h.ops, t("history.col.copy")]
    rows = [[p.info.label, p.info.created, *(ratio(o.ratio) if (o := p.op(op)) else DASH for op in h.ops),
             num(p.copy_gbps)] for p in h.points]
    console.print(_table(t("history.trend"), cols, rows))
    peak_rows = []
    for p in h.points:
        cells = []
        for op in h.ops:
            o = p.op(op)
            if o is None or (o.peak_gbps is None and o.peak_tflops is None):
                cells.append(DASH)
            elif o.peak_tflops is not None:
                cells.append(f"{num(o.peak_tflops)} TFLOP/s ({pct(o.peak_tflops_pct)})")
            else:
                cells.append(f"{num(o.peak_gbps)} GB/s ({pct(o.peak_gbps_pct)})")
        peak_rows.append([p.info.label, *cells])
    console.print(_table(t("history.peaks"), [t("diff.col.report"), *h.ops], peak_rows))
    if h.steps:
        console.print(t("history.steps"), style="bold", markup=False)
        for s in h.steps:
            console.print("  " + step_sentence(s, t), style=_style(s.direction), markup=False)
    else:
        console.print(t("history.steps.none", threshold=general(h.practical_pct)), markup=False)
    console.print(t("history.method", threshold=general(h.practical_pct)), style="dim", markup=False)
