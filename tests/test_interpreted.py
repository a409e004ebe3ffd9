"""Triton's interpreter on the CPU (``run --interpret``, ``TRITON_INTERPRET=1 envcheck bench``): a row it ran
is labelled "interpreted (not a speed)" in every medium, and its speedups are left out, never 0.00x."""

from __future__ import annotations

import dataclasses
import random

import factories_cpu
import pytest

from envcheck.analysis import analyse
from envcheck.commands.options import RunOptions
from envcheck.model import Timing
from envcheck.render.documents import render_html, render_markdown
from envcheck.render.terminal.console import capture
from envcheck.render.terminal.run import print_run

LABEL = {"en": "checked", "zh-CN": "已核对"}


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



def test_an_interpreted_kernel_is_checked_not_warmed_up_nor_timed_and_the_run_says_how_it_exits(monkeypatch):
    """Issue 49, item 4: an interpreted run spent ~72% of its time warming up and sampling kernels whose
    times mean nothing, flagged them noisy and said "Triton and torch.compile were not measured" beside its
    Triton column; a CPU run the user asked for failed on the missing GPU driver it expects."""
    import torch

    from envcheck.analysis.verdict import verdict
    from envcheck.bench import interpret, kernels, suite
    from envcheck.bench.protocol import Measured, WorkerPlan
    from envcheck.bench.worker import Worker
    from envcheck.probes.collect import new_report
    from envcheck.render.i18n import translate

    # The Triton kernel's place is taken by torch (no interpreter in this process): only the path is under test.
    monkeypatch.setattr(interpret, "enable", lambda: None)
    monkeypatch.setattr(kernels, "vector_add", lambda x, y, out, extra=None: torch.add(x, y, out=out))
    env = factories_cpu.environment()
    options = RunOptions(ops=("vector_add",), no_compile=True, interpret=True)
    plan = suite.plan(options, env)
    assert plan.settings.interpret and [n.key for n in plan.notes][0] == "bench.interpreted"
    cases = []
    Worker(WorkerPlan("cpu", 0, plan.cases, plan.settings, ceilings=False),
           lambda e: cases.append(e.case) if isinstance(e, Measured) else None).run()
    triton = [c for c in cases if c.impl == "triton"]
    assert triton and all(c.launch is None and c.gpu is None and "warmup" not in c.phases for c in triton)
    assert all(c.launch is not None for c in cases if c.impl == "torch")
    bench = dataclasses.replace(factories_cpu.report().benches[0], cases=tuple(cases), settings=plan.settings,
                                notes=plan.notes, skipped=())
    failing_driver = next(c for c in factories_cpu.report().checks if c.id.startswith("driver."))
    failing_driver = dataclasses.replace(failing_driver, status="fail")
    r = dataclasses.replace(new_report("run", env), benches=(bench,), checks=(failing_driver,))
    a = analyse(r)
    results = [x for x in a.benches[0].results if x.case.impl == "triton"]
    assert all(x.interpreted and x.status == "pass" and x.flags == () and x.time is None for x in results)
    assert verdict(a).ok  # the GPU driver's check does not count against a CPU run asked for
    assert not verdict(analyse(dataclasses.replace(r, benches=(dataclasses.replace(
        bench, settings=dataclasses.replace(plan.settings, interpret=False)),)))).ok
    text = capture(lambda c: print_run(c, r, a, lang="en"), width=120)
    assert "checked" in text and "Triton and torch.compile were not measured" not in text
    assert translate("en", "bench.interpreted") in " ".join(text.split())
