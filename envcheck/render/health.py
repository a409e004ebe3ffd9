"""The one-line verdict Slurm's health checks and node-problem-detector read (docs/outputs.md): ``OK``, or
``[node_problem] <the first reason>`` in at most ``MAX_LINE`` characters, with envcheck's exit status."""

from __future__ import annotations

from envcheck.analysis import Analysis
from envcheck.analysis.verdict import Verdict, verdict
from envcheck.errors import EXIT_FAIL, EXIT_OK
from envcheck.render.escape import visible
from envcheck.render.i18n import t

MAX_LINE = 80  # node-problem-detector's default max_output_length
PREFIX = "[node_problem] "


def _cut(text: str, width: int, keep: int = 0) -> str:
    """``text`` in ``width`` characters, cut at a word with "..." (never mid-word), never into its ``keep`` head."""
    if len(text) <= width:
        return text
    head = text[: width - 3]
    at = head.rfind(" ")
    if at > keep:
        head = head[:at]
    return head.rstrip(" ,;:(") + "..."


def _line(prefix: str, v: Verdict, width: int) -> str:
    """``prefix`` + the first reason, cut at a word, then how many more there are (never cut off)."""
    first = visible(t(f"verdict.reason.{v.reasons[0].key}", **v.reasons[0].values))
    more = len(v.reasons) - 1
    tail = t("health.more", count=more) if more else ""
    name = first.split(": ", 1)[0] if ": " in first else ""
    return _cut(prefix + first, width - len(tail), keep=len(prefix) + len(name)) + tail


def health_line(analysis: Analysis, width: int = MAX_LINE) -> tuple[str, int]:
    """``("OK", 0)`` or ``("[node_problem] GPU 0: ...", 1)``: one visible line, machine text escaped."""
    v = verdict(analysis)
    if v.ok:
        return "OK", EXIT_OK
    return _line(PREFIX, v, width), EXIT_FAIL


def drain_reason(analysis: Analysis) -> str | None:
    """What ``scontrol update ... Reason=`` gets (None when the report passes): short, one line."""
    v = verdict(analysis)
    return None if v.ok else _line("envcheck: ", v, 120)
