"""Which output of an op with several failed, in every medium: the terminal's error cell (names
at 100 columns, phrased with each output's ratio when wide) and the status cell of the Markdown
and HTML case rows, phrased from the analysis's verdict (``Verdict.failed_ratios``)."""

from __future__ import annotations

import dataclasses

import factories_cpu
import pytest

from envcheck.analysis import analyse
from envcheck.analysis.tolerance import tolerance
from envcheck.model import Accuracy, Case, OutputAccuracy, Report, Timing
from envcheck.render.documents import render_html, render_markdown
from envcheck.render.terminal.console import capture
from envcheck.render.terminal.run import print_run

pytestmark = pytest.mark.usefixtures("charts_not_drawn")

SHAPE = (64, 48, 128)
RIGHT = Accuracy(1e-7, 1e-7, 1e-7, 0, 100, 1e-7)


def _report(outputs: bool) -> Report:
    """linear_fwbw in torch and Triton; Triton's dx twice its bound (analysis/tolerance.py)."""
    def case(impl: str, dx: Accuracy) -> Case:
        outs = tuple(OutputAccuracy(n, a) for n, a in (("y", RIGHT), ("dx", dx), ("dW", RIGHT))) if outputs else ()
        return Case("linear_fwbw", impl, "fp32", "fp32", SHAPE, launch=Timing.from_samples("host_clock", [9.0, 9.1]),
                    accuracy=Accuracy(1.1e-7, 5e-7, 5e-7, 0, 300, 1.1e-7), outputs=outs)

    r = factories_cpu.report()
    bench = r.benches[0]
    twice = 2 * tolerance("linear_fwbw", "fp32", "fp32", SHAPE, "dx", 100).rel_l2
    cases = (case("torch", RIGHT), case("triton", Accuracy(twice, 5e-7, 1e-7, 0, 100, 1e-7)))
    return dataclasses.replace(r, benches=(dataclasses.replace(bench, cases=bench.cases + cases),))


def test_the_failed_output_is_named_with_its_ratio_in_every_medium():
    r = _report(outputs=True)
    a = analyse(r)
    (triton,) = [x for x in a.benches[0].results if x.case.impl == "triton"]
    assert triton.verdict.failed_ratios() == (("dx", pytest.approx(2.0)),)
    phrase = "failed on dx at 2.00× its bound"
    assert phrase in render_markdown(r, "en")
    assert phrase in render_html(r, "en")
    assert "未通过的输出：dx（为其容差的 2.00×）" in render_markdown(r, "zh-CN")
    narrow = capture(lambda c: print_run(c, r, a, lang="en"), width=100)
    assert any("200% dx" in line for line in narrow.splitlines() if "64×48×128" in line or "64x48x128" in line)
    assert phrase in capture(lambda c: print_run(c, r, a, lang="en"), width=200)


def test_a_report_without_per_output_statistics_renders_as_before():
    r = _report(outputs=False)
    for text in (render_markdown(r, "en"), render_html(r, "en"),
                 capture(lambda c: print_run(c, r, analyse(r), lang="en"), width=200)):
        assert "failed on" not in text and "dx" not in text
