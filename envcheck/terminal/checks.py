"""The checks table (worst first), what failed subprocesses printed, and the one-line verdict."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from envcheck.model import Check
from envcheck.terminal.console import table_box

STYLE = {"fail": "bold red", "warn": "yellow", "pass": "green", "skip": "dim"}
DETAIL_LINES = 15


def status_text(status: str) -> Text:
    return Text(status.upper(), style=STYLE.get(status, ""))


def checks_table(checks: Sequence[Check], console: Console) -> Table:
    """Failing and warning checks with their fix under the finding; then passes. Skips are listed apart."""
    table = Table(box=table_box(console), show_edge=False, pad_edge=False, expand=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", overflow="fold", max_width=36)
    table.add_column("finding / fix", overflow="fold")
    for c in checks:
        if c.status == "skip":
            continue
        cell = Text(c.finding)
        if c.fix and c.status != "pass":
            cell.append("\nfix: ", style="bold")
            cell.append(c.fix)
        table.add_row(status_text(c.status), Text(c.title), cell)
    return table


def skipped_lines(checks: Sequence[Check]) -> list[RenderableType]:
    skipped = [c for c in checks if c.status == "skip"]
    if not skipped:
        return []
    out: list[RenderableType] = [Text(f"Skipped ({len(skipped)}):", style="bold")]
    for c in skipped:
        out.append(Text(f"  {c.title}: {c.finding}", style="dim"))
    return out


def details_lines(checks: Sequence[Check]) -> list[RenderableType]:
    """The captured output of failed checks, last lines only: enough to search the error for."""
    out: list[RenderableType] = []
    for c in checks:
        if c.status not in ("fail", "warn") or not c.details:
            continue
        lines = c.details.strip().splitlines()
        cut = len(lines) - DETAIL_LINES
        shown = lines[-DETAIL_LINES:]
        out.append(Text(f"{c.id} output" + (f" (last {DETAIL_LINES} of {len(lines)} lines)" if cut > 0 else "") + ":",
                        style="bold"))
        out.extend(Text("  " + ln, style="dim") for ln in shown)
    return out


def verdict_line(checks: Sequence[Check], probe_s: float | None = None) -> Text:
    """``FAIL: 1 failed, 2 warnings, 14 passed, 5 skipped``: the worst status first."""
    n = Counter(c.status for c in checks)
    worst = "fail" if n["fail"] else "warn" if n["warn"] else "pass"
    head = {"fail": "FAIL", "warn": "OK with warnings", "pass": "OK"}[worst]
    parts = [f"{n['fail']} failed"] if n["fail"] else []
    if n["warn"]:
        parts.append(f"{n['warn']} warning{'s' if n['warn'] != 1 else ''}")
    parts.append(f"{n['pass']} passed")
    if n["skip"]:
        parts.append(f"{n['skip']} skipped")
    took = f" in {probe_s:.1f} s" if probe_s is not None else ""
    text = Text(head, style=STYLE.get(worst, "") + " bold")
    text.append(f": {', '.join(parts)}{took}")
    return text


def print_checks(console: Console, checks: Sequence[Check], probe_s: float | None = None) -> None:
    console.print()
    console.print(Text("Checks", style="bold underline"))
    if any(c.status != "skip" for c in checks):
        console.print(checks_table(checks, console))
    for line in [*skipped_lines(checks), *details_lines(checks)]:
        console.print(line)
    console.print()
    console.print(verdict_line(checks, probe_s))
