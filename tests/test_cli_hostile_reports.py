"""Reports that parse as JSON but are malformed: ``render``, ``diff`` and ``history`` answer each with
one line naming the file and the field, exit status 2 (``history`` of a folder skips the file with
that line and goes on), never a traceback and never a hang."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_model import HOSTILE, _mutated, small_report

from envcheck import cli, model

GOOD = small_report()

# What the hardening review fed the tools, beyond HOSTILE's per-field damage.
WHOLE = [
    ("schema true", '{"format": "envcheck-report", "schema_version": true}'),
    ("nesting", '{"format": "envcheck-report", "schema_version": 2, "host": ' + "[" * 200_000 + "]" * 200_000 + "}"),
    ("a list", "[1, 2]"),
    ("integer of 5000 digits", '{"format": "envcheck-report", "schema_version": 2, "x": ' + "9" * 5000 + "}"),
    ("NaN literal", json.dumps({"format": "envcheck-report", "schema_version": 2}).replace("}", ', "x": NaN}')),
]


def _cases() -> list[tuple[str, str]]:
    return [(name, _mutated(mutate)) for name, mutate, _ in HOSTILE] + WHOLE


CASES = _cases()


@pytest.mark.parametrize("name, text", CASES, ids=[c[0] for c in CASES])
def test_render_and_diff_refuse_malformed_reports_in_one_line(tmp_path, capsys, name, text):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    good = tmp_path / "good.json"
    model.dump(GOOD, good)
    for argv in (["render", str(bad), "--out", str(tmp_path / "out")], ["diff", str(good), str(bad)],
                 ["diff", str(bad), str(good), "--format", "json"]):
        assert cli.main(argv) == 2, (name, argv)
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "bad.json" in err and "Traceback" not in err, (name, argv, err)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())  # nothing half-written


def test_history_of_a_folder_skips_a_bad_file_and_goes_on(tmp_path, capsys):
    model.dump(GOOD, tmp_path / "a.json")
    model.dump(GOOD, tmp_path / "b.json")
    (tmp_path / "c.json").write_text(_mutated(HOSTILE[0][1]))
    os.mkfifo(tmp_path / "d.json")  # would block forever if opened
    assert cli.main(["history", str(tmp_path), "--format", "md"]) == 0
    captured = capsys.readouterr()
    assert "c.json" in captured.err and "d.json" in captured.err and "Traceback" not in captured.err


def test_render_refuses_a_fifo(tmp_path, capsys):
    fifo = Path(tmp_path / "r.json")
    os.mkfifo(fifo)
    assert cli.main(["render", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_history_of_a_folder_leaves_out_a_report_with_a_huge_integer(tmp_path, capsys):
    model.dump(GOOD, tmp_path / "good.json")
    data = json.loads(model.dumps(GOOD))
    data["benches"][0]["device"]["sm_count"] = 10**400
    (tmp_path / "huge.json").write_text(json.dumps(data))
    assert cli.main(["history", str(tmp_path), "--format", "md"]) == 0
    err = capsys.readouterr().err
    assert "huge.json" in err and "sm_count" in err and "Traceback" not in err, err


SCHEMA_1 = json.loads((Path(__file__).parent / "golden" / "h200_small.json").read_text())


def _bench_1(d):
    return d["bench"]


# A schema-1 report is upgraded before it is validated: what steers the upgrade is checked first.
HOSTILE_1 = [
    ("flags an integer", lambda d: _bench_1(d)["cases"][0].update(flags=3), "bench.cases[0].flags"),
    ("flags of lists", lambda d: _bench_1(d)["cases"][0].update(flags=[["l2_resident"]]), "bench.cases[0].flags"),
    ("op a list", lambda d: _bench_1(d)["cases"][0].update(op=["vector_add"], flags=[]), "cases[0].op"),
    ("shape of lists", lambda d: _bench_1(d)["cases"][0].update(shape=[[1024]], flags=[]), "cases[0].shape[0]"),
    ("shape of strings", lambda d: _bench_1(d)["cases"][0].update(shape=["1024"], flags=[]), "cases[0].shape[0]"),
    ("l2_bytes true", lambda d: _bench_1(d)["device"].update(l2_bytes=True), "device.l2_bytes"),
    ("case a string", lambda d: _bench_1(d)["cases"].insert(0, "x"), "bench.cases[0]"),
    ("cases an object", lambda d: _bench_1(d).update(cases={}), "bench.cases"),
    ("settings a list", lambda d: _bench_1(d).update(settings=[1]), "bench.settings"),
    ("notes an integer", lambda d: _bench_1(d).update(notes=1), "bench.notes"),
    ("bench a list", lambda d: d.update(bench=[1]), "bench"),
]


@pytest.mark.parametrize("what, mutate, field", HOSTILE_1, ids=[h[0] for h in HOSTILE_1])
def test_render_refuses_malformed_schema_1_reports_in_one_line(tmp_path, capsys, what, mutate, field):
    data = json.loads(json.dumps(SCHEMA_1))
    mutate(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert cli.main(["render", str(bad), "--out", str(tmp_path / "out")]) == 2, what
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err and field in err and "Traceback" not in err, (what, err)
