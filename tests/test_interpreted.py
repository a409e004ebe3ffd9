"""Triton's interpreter on the CPU (``run --interpret``, ``TRITON_INTERPRET=1 envcheck bench``): a row it ran
is labelled "interpreted (not a speed)" in every medium, and its speedups are left out, never 0.00x."""

from __future__ import annotations

import dataclasses
import random

import factories_cpu
import pytest
from in_lang import print_run, render_html, render_markdown

from envcheck.analysis import analyse
from envcheck.model import Timing
from envcheck.render.terminal.console import capture

LABEL = {"en": "interpreted (not a speed)", "zh-CN": "解释执行（不代表速度）"}


def _interpreted_report(interpret: bool = True):
    """The CPU run with a Triton row beside each torch vector_add and matmul, 1000x slower (the interpreter)."""
    r = factories_cpu.report()
    b = r.benches[0]
    rng = random.Random(1)
    extra = []
    for c in b.cases:
        if c.op in ("vector_add", "matmul") and c.launch is not None:
            slow = Timing.from_samples("host_clock", [c.launch.median_us * 1000 * (1 + rng.gauss(0, 0.01))
                                                      for _ in range(5)])
            extra.append(dataclasses.replace(c, impl="triton", launch=slow))
    settings = dataclasses.replace(b.settings, impls=("torch", "triton"), interpret=interpret)
    bench = dataclasses.replace(b, cases=b.cases + tuple(extra), settings=settings, skipped=())
    return dataclasses.replace(r, benches=(bench,))


@pytest.fixture(scope="module")
def interpreted():
    r = _interpreted_report()
    return r, analyse(r)


def test_an_interpreted_row_is_flagged_once_in_the_analysis_and_has_no_speedup(interpreted):
    _, a = interpreted
    (ba,) = a.benches
    triton = [x for x in ba.results if x.case.impl == "triton"]
    assert triton and all(x.interpreted and x.speedup is None for x in triton)
    assert not any(x.interpreted for x in ba.results if x.case.impl == "torch")
    assert ba.summary.overall.speedups == 0 and ba.summary.overall.speedup_geomean is None
    assert not [f for f in ba.findings if f.key == "finding.speedup_large"]


def test_without_the_interpreter_the_same_rows_keep_their_speedups():
    (ba,) = analyse(_interpreted_report(interpret=False)).benches
    assert all(x.speedup is not None and not x.interpreted for x in ba.results if x.case.impl == "triton")


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_every_medium_says_interpreted_and_shows_no_zero_speedup(interpreted, lang):
    r, a = interpreted
    outs = [render_markdown(r, lang, "charts"), render_html(r, lang),
            capture(lambda c: print_run(c, r, a, lang=lang), width=100)]
    for out in outs:
        assert LABEL[lang] in out
        assert "0.00x" not in out and "0.00×" not in out
    # The speedup table leaves the interpreted implementation out rather than showing a row of dashes.
    assert "triton     –     –" not in outs[2]

