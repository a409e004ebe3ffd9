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


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def reason_line(v: Verdict, lang: str = "en") -> str:
    """The first reason, with how many more there are."""
    first = translate(lang, f"verdict.reason.{v.reasons[0].key}", **v.reasons[0].values)
    more = len(v.reasons) - 1
    return first + (translate(lang, "health.more", count=more) if more else "")


def health_line(analysis: Analysis, lang: str = "en", width: int = MAX_LINE) -> tuple[str, int]:
    """``("OK", 0)`` or ``("[node_problem] GPU 0: ...", 1)``: one visible line, machine text escaped."""
    v = verdict(analysis)
    if v.ok:
        return "OK", EXIT_OK
    return _cut(PREFIX + visible(reason_line(v, lang)), width), EXIT_FAIL


def drain_reason(analysis: Analysis, lang: str = "en") -> str | None:
    """What ``scontrol update ... Reason=`` gets (None when the report passes): short, one line."""
    v = verdict(analysis)
    return None if v.ok else _cut("envcheck: " + visible(reason_line(v, lang)), 120)
