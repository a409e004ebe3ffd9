"""Hostile text from a user's code (exception messages and stderr lines with newlines, surrogates, bidi
overrides, C0/C1 controls, markup, a secret, 200 kB lines): the report and every view stay valid."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("hypothesis", reason="hypothesis (a test extra) is not installed")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from envcheck import model  # noqa: E402
from envcheck.bench import protocol  # noqa: E402
from envcheck.model import StopCause  # noqa: E402
from tests.test_runner import PLAN, PLANNED, emit, run_script, start  # noqa: E402
from tests.test_worker_containment import SECRET  # noqa: E402

CHARS = ["\n", "\r", "\r\n", "\x00", "\x07", "\x1b[31m", "\x7f", "\x85", "\x9b", "\u2028", "\u202e", "\u2066",
         "\ufeff", "\ud800", "\udfff", "\uffff", "<b>&amp;", "]]>", "|", "`", "*", "a", "é", "中", " ", SECRET]
HOSTILE = st.lists(st.sampled_from(CHARS) | st.text(max_size=3), min_size=1, max_size=12).map("".join)
# Lines a Markdown table or a one-line field must not hold raw.
LINE_BREAKING = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029\x00-\x08\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")



@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(HOSTILE, min_size=4, max_size=4), long=st.booleans())
def test_hostile_text_from_a_user_s_code_leaves_every_view_valid_and_one_line(tmp_path, monkeypatch, texts, long):
    """Exception messages and stderr lines holding newlines, surrogates, bidi overrides, C0/C1
    controls, markup, a secret and (``long``) 200 kB: the report round-trips, the Markdown and HTML
    hold none of them raw, JUnit validates, and the secret is nowhere."""
    from in_lang import junit_xml, render_html, render_markdown

    from envcheck.analysis import analyse
    from envcheck.bench import runner
    from tests.test_outputs import _schema

    monkeypatch.setenv("HF_TOKEN", SECRET)
    pad = "x" * 200_000 if long else ""
    steps: list = [start()]
    for i, (pc, text) in enumerate(zip(PLANNED[:3], texts, strict=False)):
        steps += [emit(protocol.CaseStarted(i, 4, pc)), emit(protocol.Measured(pc.failed("first_call", text + pad))),
                  {"stderr": text + pad}, {"raw": text}]
    steps += [emit(protocol.CaseStarted(3, 4, PLANNED[3])), {"stderr": texts[3] + pad}, {"exit": 1}]
    out, _ = run_script(tmp_path, steps)
    assert out.stop.cause == StopCause.EXITED and len(out.cases) == 3
    report = model.Report("0.1.0", "2026-11-22T22:00:00Z", "h", "run", model.Environment(),
                          benches=(runner.assemble(PLAN, out, "2026-11-22T22:00:00Z", 1.0),))
    text = model.dumps(report)
    text.encode("utf-8")
    assert model.loads(text) == report
    analysis = analyse(report)
    md = render_markdown(report, "en", "c", analysis, [])
    html = render_html(report, "en", analysis, [])
    xml = junit_xml(analysis)
    _schema().validate(xml)
    for view in (text, md, html, xml):
        view.encode("utf-8")
        assert SECRET not in view
    for view in (md, html):
        assert not LINE_BREAKING.search(view), repr(LINE_BREAKING.search(view))
    assert all(ln.endswith("|") for ln in md.splitlines() if ln.startswith("|"))
