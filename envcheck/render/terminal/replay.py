"""The banner over a replayed report: whose machine this is, and when it was captured (not this one, not now)."""

from __future__ import annotations

from rich.console import Console

from envcheck.model import ReplaySource
from envcheck.render.escape import term
from envcheck.render.i18n import t


def print_replay_banner(console: Console, source: ReplaySource | None) -> None:
    """``Replay of snapshot FILE: the machine HOST as captured TIME, not this machine``."""
    if source is None:
        return
    params = {"file": term(source.file), "host": term(source.host)}
    banner = (t("term.replay.banner", captured=term(source.captured), **params) if source.captured
              else t("term.replay.banner_undated", **params))
    console.print(f"[bold yellow]{banner}[/]")
