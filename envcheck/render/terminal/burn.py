"""The terminal summary of a burn: one row per GPU, the verdicts with cause and fix, the files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from envcheck.analysis.burn import BurnAnalysis
from envcheck.render import burn_view as bv
from envcheck.render.escape import term
from envcheck.render.i18n import escaping, t
from envcheck.render.terminal.console import STYLE, bullets, heading, print_fitted, table
from envcheck.render.writing import written_lines


def print_burn(console: Console, a: BurnAnalysis, written: Sequence[Path] = ()) -> None:
    with escaping(term):
        heading(console, t("burn.section"))
        tab = table(console)
        for c in (bv.device_column(a), t("col.status"), *bv.columns(a)):
            tab.add_column(c)
        for g, who, name, cells in bv.rows(a):
            tab.add_row(f"{who} {name}", f"[{STYLE.get(g.status, '')}]{t(f'burn.status.{g.status}')}[/]", *cells)
        print_fitted(console, tab)
        bullets(console, [("✗" if console.is_terminal else "-", f"{who}: {cause}" + (f" ({th})" if th else "")
                           + f" {t('burn.fix')}: {fix}") for who, cause, fix, th in bv.findings(a)])
        console.print(f"[{STYLE.get(a.verdict, '')}]{bv.verdict_text(a)}[/] {bv.summary(a)}")
        for note in bv.notes(a):  # what was not applied, a control, an unread kernel log: before trusting the pass
            console.print(f"[dim]{note}[/]")
        for line in written_lines(written):
            console.print(term(line), soft_wrap=True)
