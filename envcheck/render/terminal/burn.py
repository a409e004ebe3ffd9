"""The terminal summary of a burn: one row per GPU, the verdicts with cause and fix, the files.

Laid out from the same view as the documents (``render.burn_view``, phrased with ``escape.term``),
so the terminal says what the report says.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from envcheck.analysis.burn import BurnAnalysis
from envcheck.render.burn_view import burn_view
from envcheck.render.escape import term
from envcheck.render.i18n import translate
from envcheck.render.terminal.console import bullets, heading, print_fitted, table
from envcheck.render.writing import written_lines

STATUS_STYLE = {"fail": "bold red", "stopped": "yellow", "pass": "green"}


def print_burn(console: Console, a: BurnAnalysis, written: Sequence[Path], lang: str = "en") -> None:
    v = burn_view(a, lang, term)
    heading(console, translate(lang, "burn.section"))
    t = table(console)
    for c in (v.device_column, translate(lang, "col.status"), *v.columns):
        t.add_column(c)
    for r in v.gpus:
        style = STATUS_STYLE.get(r.status, "")
        t.add_row(f"{r.gpu} {r.name}", f"[{style}]{translate(lang, f'burn.status.{r.status}')}[/]", *r.cells)
    print_fitted(console, t)
    if v.findings:
        bullets(console, [("✗" if console.is_terminal else "-",
                           f"{f.gpu}: {f.cause}" + (f" ({f.threshold})" if f.threshold else "")
                           + f" {translate(lang, 'burn.fix')}: {f.fix}") for f in v.findings])
    style = STATUS_STYLE.get(v.verdict, "")
    console.print(f"[{style}]{v.verdict_text}[/] {v.summary}")
    for note in v.notes:  # what was not applied, a control, an unread kernel log: before a reader trusts the pass
        console.print(f"[dim]{note}[/]")
    for line in written_lines(written):
        console.print(term(line))
