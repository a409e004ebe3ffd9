"""The checks (worst first), what failed subprocesses printed, and the one-line verdict: a table from
``console.WIDE_FROM`` columns on, below it a list with the fix under each finding."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from envcheck.model import Check
from envcheck.render.checktext import all_localized
from envcheck.render.escape import term
from envcheck.render.i18n import check_counts, t
from envcheck.render.terminal.console import STYLE, bullets, heading, table, wide

DETAIL_LINES = 15


def checks_table(console: Console, checks: Sequence[Check]) -> Table:
    """Every check but the skipped ones: status, check, finding with the fix under it."""
    is_wide = wide(console)
    if is_wide:
        tab = table(console)
        tab.add_column(t("col.status"), no_wrap=True)
        tab.add_column(t("col.check"), overflow="fold", max_width=36)
        tab.add_column(f"{t('col.finding')} / {t('col.fix')}", overflow="fold")
    else:  # a list: the status in its own column, the rest one paragraph that wraps under itself
        tab = Table.grid(padding=(0, 1))
        tab.add_column(no_wrap=True)
        tab.add_column(overflow="fold")
    for c in (c for c in checks if c.status != "skip"):
        fix = fix_text(c, "bold" if is_wide else "cyan")
        tab.add_row(f"[{STYLE.get(c.status, '')}]{t(f'status.{c.status}').upper()}[/]", *((term(c.title), term(c.finding) + fix) if is_wide
                                             else (f"[bold]{term(c.title)}[/]: {term(c.finding)}{fix}",)))
    return tab


def fix_text(c: Check, style: str = "cyan") -> str:
    """The fix on a line of its own under the finding of a check that did not pass."""
    return f"\n[{style}]{term(t('term.fix', fix=c.fix))}[/]" if c.fix and c.status != "pass" else ""


def skipped_lines(console: Console, checks: Sequence[Check]) -> None:
    skipped = [c for c in checks if c.status == "skip"]
    if not skipped:
        return
    console.print(f"[bold]{t('term.checks_skipped', count=len(skipped))}[/]")
    # Each line wraps under itself, indented: a long reason never runs back to column 0.
    bullets(console, [("", f"[dim]{term(c.title)}: {term(c.finding)}[/]") for c in skipped])


def details_lines(console: Console, checks: Sequence[Check]) -> None:
    """The captured output of failed checks, last lines only: enough to search the error for."""
    for c in checks:
        if c.status not in ("fail", "warn") or not c.details:
            continue
        lines = c.details.strip().splitlines()
        shown = lines[-DETAIL_LINES:]
        key = "term.details_cut" if len(lines) > DETAIL_LINES else "term.details"
        console.print(f"[bold]{t(key, check=term(c.id), shown=len(shown), total=len(lines))}[/]")
        bullets(console, [("", f"[dim]{term(ln)}[/]") for ln in shown])


def verdict_line(checks: Sequence[Check], probe_s: float | None = None) -> str:
    """``FAIL: 1 failed, 2 warned, 14 passed, 5 skipped in 5.2 s``: the worst status first."""
    worst = next((s for s in ("fail", "warn") if any(c.status == s for c in checks)), "pass")
    took = t("term.took", seconds=f"{probe_s:.1f}") if probe_s is not None else ""
    return f"[{STYLE[worst]} bold]{t(f'term.verdict.{worst}')}[/]: {check_counts(checks)}{took}"


def print_checks(console: Console, checks: Sequence[Check], probe_s: float | None = None) -> None:
    checks = all_localized(checks)
    heading(console, t("section.health"))
    if any(c.status != "skip" for c in checks):
        console.print(checks_table(console, checks))
    skipped_lines(console, checks)
    details_lines(console, checks)
    console.print()
    console.print(verdict_line(checks, probe_s))
