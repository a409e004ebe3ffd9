"""The terminal's cross-check section: the verdict and counts, the findings (rows outside their bar, tools that
failed; the first ``MAX_FINDINGS``) and the notes; the report's documents hold every ratio table. Laid out from
the same view as the documents (``render.crosscheck_view``, phrased with ``escape.term``)."""

from __future__ import annotations

from rich.console import Console

from envcheck.analysis.crosscheck import CrosscheckAnalysis
from envcheck.render.crosscheck_view import crosscheck_view
from envcheck.render.escape import term
from envcheck.render.i18n import translate
from envcheck.render.terminal.console import bullets, heading

STYLE = {"fail": "bold red", "pass": "green", "skip": "dim"}
MAX_FINDINGS = 20  # the terminal's share; the report lists every one


def print_crosscheck(console: Console, a: CrosscheckAnalysis, lang: str = "en", host: str | None = None) -> None:
    """``host``: the fleet node the cross-checks are of (None: the run's own)."""
    v = crosscheck_view(a, lang, term)
    heading(console, translate(lang, "crosscheck.section") if host is None else
            translate(lang, "crosscheck.section_node", host=term(host)))
    console.print(f"[{STYLE[v.verdict]}]{v.verdict_text}[/]" + (f" {v.summary}" if v.summary else ""))
    mark = "✗" if console.is_terminal else "-"
    shown = list(v.findings[:MAX_FINDINGS])
    if len(v.findings) > MAX_FINDINGS:
        shown.append(translate(lang, "crosscheck.more", count=len(v.findings) - MAX_FINDINGS))
    if shown:
        bullets(console, [(mark, f) for f in shown])
    for note in v.notes:
        console.print(f"[dim]{note}[/]")
