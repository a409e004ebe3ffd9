"""The one-line health verdict schedulers read: Slurm's HealthCheckProgram and node-problem-detector.

node-problem-detector's custom plugin protocol: exit 0 (OK), 1 (NonOK: a problem), anything else
(Unknown); stdout is the message, cut at its ``max_output_length`` (80 by default). Slurm shows a
drained node's reason in ``sinfo -R``; NHC-style health checks set it with ``scontrol update
NodeName=... State=DRAIN Reason=...``. So: ``OK``, or ``[node_problem] <the first reason>`` in at most
``MAX_LINE`` characters, with the exit status envcheck uses everywhere (0 pass, 1 fail, 2 bad usage:
node-problem-detector's "unknown").
"""

from __future__ import annotations

from envcheck.analysis import Analysis
from envcheck.analysis.verdict import Verdict, verdict
from envcheck.errors import EXIT_FAIL, EXIT_OK
from envcheck.render.escape import visible
from envcheck.render.i18n import translate

MAX_LINE = 80  # node-problem-detector's default max_output_length
PREFIX = "[node_problem] "


def _cut(text: str, width: int, keep: int = 0) -> str:
    """``text`` in ``width`` characters, cut at a word with "..." (never mid-word: "(NV..."); ``keep``:
    the length of its head (the prefix and the check's name) that is never cut into."""
    if len(text) <= width:
        return text
    head = text[: width - 3]
    at = head.rfind(" ")
    if at > keep:
        head = head[:at]
    return head.rstrip(" ,;:(") + "..."


def _line(prefix: str, v: Verdict, lang: str, width: int) -> str:
    """``prefix`` + the first reason, cut at a word, then how many more there are (never cut off)."""
    first = visible(translate(lang, f"verdict.reason.{v.reasons[0].key}", **v.reasons[0].values))
    more = len(v.reasons) - 1
    tail = translate(lang, "health.more", count=more) if more else ""
    name = first.split(": ", 1)[0] if ": " in first else ""
    return _cut(prefix + first, width - len(tail), keep=len(prefix) + len(name)) + tail


def health_line(analysis: Analysis, lang: str = "en", width: int = MAX_LINE) -> tuple[str, int]:
    """``("OK", 0)`` or ``("[node_problem] GPU 0: ...", 1)``: one visible line, machine text escaped."""
    v = verdict(analysis)
    if v.ok:
        return "OK", EXIT_OK
    return _line(PREFIX, v, lang, width), EXIT_FAIL


def drain_reason(analysis: Analysis, lang: str = "en") -> str | None:
    """What ``scontrol update ... Reason=`` gets (None when the report passes): short, one line."""
    v = verdict(analysis)
    return None if v.ok else _line("envcheck: ", v, lang, 120)
