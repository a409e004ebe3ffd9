"""Raw C1 controls (U+0080-U+009F: U+009B is a whole CSI) never reach a terminal from ``--format json``.

``check``, ``probe`` and ``diff`` write machine strings as JSON: the characters a terminal or a log
viewer would obey are ``\\u`` escapes there, and the JSON still reads back to the same strings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import factories
import pytest

from envcheck import cli, model
from envcheck.render.escape import json_text

CORPUS = Path(__file__).parent / "fixtures" / "snapshots" / "corpus"
C1 = "\x9b31m\x9d0;title\x9c"
RAW = re.compile("[\x80-\x9f\u202e\u2028\u2029]")


def hostile_snapshot(tmp_path: Path) -> Path:
    data = json.loads((CORPUS / "wsl-4x-rtx4090-torch25.json").read_text())
    data["meta"]["host"] = f"box{C1}"
    data["nvml"]["gpus"][0]["nvmlDeviceGetName"] = {"value": f"RTX{C1}\u202e"}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("command", ["check", "probe"])
def test_check_and_probe_json_escape_c1(tmp_path: Path, capsys, command: str) -> None:
    cli.main([command, "--replay", str(hostile_snapshot(tmp_path)), "--format", "json"])
    out = capsys.readouterr().out
    assert not RAW.search(out)
    report = model.loads(out)
    assert report.host == f"box{C1}" and report.environment.gpus[0].get("name") == f"RTX{C1}\u202e"


def test_diff_json_escapes_c1(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / f"base{C1}.json", tmp_path / "other.json"
    model.dump(factories.report(host=f"h{C1}"), a)
    model.dump(factories.report(host="h2"), b)
    assert cli.main(["diff", str(a), str(b), "--format", "json"]) in (0, 1)
    out = capsys.readouterr().out
    assert not RAW.search(out)
    assert json.loads(out)["comparisons"][0]["baseline"] == a.name


def test_json_text_reads_back_to_the_same_strings() -> None:
    hypothesis = pytest.importorskip("hypothesis")  # a test extra: without it this test alone skips

    @hypothesis.given(hypothesis.strategies.text())
    def reads_back(s: str) -> None:
        text = json_text(json.dumps({"k": s, s: [s]}, ensure_ascii=False))
        assert json.loads(text) == {"k": s, s: [s]} and not RAW.search(text)

    reads_back()
