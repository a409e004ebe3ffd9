"""The terminal's cross-check section: the verdict and counts, the findings (the first ``MAX_FINDINGS``) and the
notes; the report's documents hold every ratio table."""

from __future__ import annotations

from rich.console import Console

from envcheck.analysis.crosscheck import CrosscheckAnalysis
from envcheck.render import crosscheck_view as cv
from envcheck.render.escape import term
from envcheck.render.i18n import escaping, t
from envcheck.render.terminal.console import STYLE, bullets, heading

MAX_FINDINGS = 20  # the terminal's share; the report lists every one


def print_crosscheck(console: Console, a: CrosscheckAnalysis, host: str | None = None) -> None:
    """``host``: the fleet node the cross-checks are of (None: the run's own)."""
    with escaping(term):
        heading(console, t("crosscheck.section") if host is None else t("crosscheck.section_node", host=term(host)))
        summary = cv.summary(a)
        console.print(f"[{STYLE[a.status]}]{t(f'crosscheck.verdict.{a.status}')}[/]" + (f" {summary}" if summary else ""))
        shown = [cv.finding(f) for f in a.findings[:MAX_FINDINGS]]
        if len(a.findings) > MAX_FINDINGS:
            shown.append(t("crosscheck.more", count=len(a.findings) - MAX_FINDINGS))
        bullets(console, [("✗" if console.is_terminal else "-", f) for f in shown])
        for note in cv.notes(a):
            console.print(f"[dim]{note}[/]")
