"""Characters that change how text reads without being seen are shown, in every output, by one rule
(issue 46, item 12): ``outside_text.visible`` writes them ``\\u{...}``; JSON spells them as its own escapes.

A host name and a failing check's finding carry one character of each class; the terminal, Markdown,
HTML, JSON, JUnit, Prometheus and health outputs of that report hold none of them raw, and each shows it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import factories
import pytest
from in_lang import health_line, junit_xml, render_html, render_markdown

from envcheck import cli, model
from envcheck.analysis import analyse
from envcheck.model import Check
from envcheck.render.escape import json_text, visible
from envcheck.render.prometheus import prometheus_text

UNSEEN = {
    "tag letter": "\U000e0041", "tag begin": "\U000e0001", "tag cancel": "\U000e007f", "tag block start": "\U000e0000",
    "invisible times": "\u2062", "function application": "\u2061", "invisible plus": "\u2064",
    "hangul filler": "\u3164", "hangul choseong filler": "\u115f", "hangul jungseong filler": "\u1160",
    "halfwidth hangul filler": "\uffa0", "mongolian vowel separator": "\u180e",
    "variation selector 16": "\ufe0f", "variation selector 17": "\U000e0100",
    "zero width space": "\u200b", "zero width joiner": "\u200d", "word joiner": "\u2060", "byte order mark": "\ufeff",
    "right-to-left override": "\u202e", "left-to-right isolate": "\u2066", "arabic letter mark": "\u061c",
    "right-to-left mark": "\u200f", "soft hyphen": "\u00ad", "arabic number sign": "\u0600",
    "escape": "\x1b", "C1 CSI": "\x9b", "delete": "\x7f", "line separator": "\u2028",
}


def escaped(c: str) -> str:
    return f"\\u{{{ord(c):04x}}}"


def outputs(c: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    base = factories.report()
    finding = f"driver{c}broken"
    report = dataclasses.replace(base, host=f"box{c}end", checks=(
        *base.checks, Check("driver.loaded", "fail", "Driver", finding, params={"x": finding})))
    a = analyse(report)
    path = tmp_path / "r.json"
    path.write_text(json_text(model.dumps(report)), encoding="utf-8")
    assert cli.main(["diff", str(path), str(path), "--format", "text"]) == 0
    return {"terminal": capsys.readouterr().out, "markdown": render_markdown(report), "html": render_html(report),
            "junit": junit_xml(a), "prometheus": prometheus_text(a), "health": health_line(a)[0],
            "json": path.read_text(encoding="utf-8")}


@pytest.mark.usefixtures("charts_not_drawn")
@pytest.mark.parametrize("c", UNSEEN.values(), ids=UNSEEN.keys())
def test_every_output_shows_every_unseen_character(c: str, tmp_path: Path, capsys) -> None:
    for name, text in outputs(c, tmp_path, capsys).items():
        assert c not in text, f"{name}: {c!r} raw"
        if name == "json":
            assert model.loads(text).host == f"box{c}end"  # the same string read back
            assert json.dumps(c)[1:-1].lower() in text.lower()
        else:
            assert escaped(c) in text, f"{name}: {escaped(c)} not shown"


def test_one_rule_text_that_is_plain_stays_as_it_is() -> None:
    plain = "NVIDIA H100 80GB HBM3 · 中文 µs café \t tab"
    assert visible(plain, lines=True) == plain and json_text(json.dumps(plain, ensure_ascii=False)) == json.dumps(
        plain, ensure_ascii=False)
