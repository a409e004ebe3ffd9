"""The banner over a replayed report: whose machine this is, and when it was captured (not this one, not now)."""

from __future__ import annotations

from rich.console import Console

from envcheck.model import ReplaySource
from envcheck.render.escape import term
from envcheck.render.i18n import t


def replay_banner(source: ReplaySource) -> str:
    """``Replay of snapshot FILE: the machine HOST as captured TIME, not this machine`` (rich markup)."""
    params = {"file": term(source.file), "host": term(source.host)}
    if source.captured:
        return t("term.replay.banner", captured=term(source.captured), **params)
    return t("term.replay.banner_undated", **params)


def print_replay_banner(console: Console, source: ReplaySource | None) -> None:
    if source is not None:
        console.print(f"[bold yellow]{replay_banner(source)}[/]")
