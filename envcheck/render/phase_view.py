"""Where a run's time went, phrased: the phase table of one bench (analysis/phases.py) for every medium.

Markdown, HTML and the terminal lay the same rows out; the seconds and shares are the analysis's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envcheck.analysis.phases import BenchPhases
from envcheck.render import fmt
from envcheck.render.i18n import case_label, has, join, translate


@dataclass(frozen=True)
class PhaseLine:
    label: str
    seconds: str
    share: str


@dataclass(frozen=True)
class PhaseTable:
    title: str
    explain: str
    rows: tuple[PhaseLine, ...]
    by_op: str  # "matmul 98 s, softmax 12 s, ..." as one sentence
    slowest: str  # the slowest cases, each with its seconds and span


def phase_table(phases: BenchPhases | None, lang: str, escape: Callable[[str], str], node: bool = False
                ) -> PhaseTable | None:
    """A bench's table, or (``node``) the node tests'."""
    if phases is None:
        return None

    def label(phase: str) -> str:
        key = f"phase.{phase}"
        return translate(lang, key) if has(lang, key) else escape(phase)

    rows = tuple(PhaseLine(label(r.phase), fmt.seconds(r.seconds), fmt.ratio_pct(r.share)) for r in phases.rows)
    ops = join(lang, [f"{escape(op)} {fmt.seconds(s)}" for op, s in phases.by_op])
    cases = []
    for c in phases.slowest:
        when = (translate(lang, "phases.span", start=fmt.num(c.span_s[0]), end=fmt.num(c.span_s[1]))
                if c.span_s is not None else "")
        cases.append(f"{escape(case_label(lang, c.key))} {fmt.seconds(c.seconds)}{when}")
    if node:
        explain = translate(lang, "phases.node_explain", total=fmt.seconds(phases.total_s))
    else:
        explain = translate(lang, "phases.explain", total=fmt.seconds(phases.total_s)) + (
            translate(lang, "phases.probe", probe=fmt.seconds(phases.probe_s)) if phases.probe_s else "")
    return PhaseTable(
        title=translate(lang, "section.node_phases" if node else "section.phases"),
        explain=explain,
        rows=rows,
        by_op=translate(lang, "phases.by_op", ops=ops) if phases.by_op else "",
        slowest=translate(lang, "phases.slowest", cases="; ".join(cases)) if cases else "",
    )
