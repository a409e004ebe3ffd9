"""Every output path with a hostile name (bytes that are not UTF-8, newlines, bidi and control
characters, names longer than a file system allows): a written report, or one clean line and exit 2,
never a traceback (issue 36, item 7). A name Python hands over with lone surrogates (``bad\\xffdir``
reads as ``bad\\udcffdir``) is written, and the content that records it stays valid UTF-8."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import factories
import pytest

pytest.importorskip("hypothesis", reason="hypothesis (a test extra) is not installed")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from envcheck import cli, files, model  # noqa: E402
from envcheck.commands import publish as publish_cmd  # noqa: E402
from envcheck.errors import UsageError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "tests" / "golden" / "node_x2.json"
SNAPSHOT = ROOT / "tests" / "fixtures" / "snapshots" / "corpus" / "linux-l4-driver-570.json"

PIECES = [os.fsdecode(b"bad\xff\xfedir"), "new\nline", "bidi\u202eevil", "c0\x01\x1b[31m", "c1\x85\x9b",
          "x" * 300, "-leading", "sp ace", "\ud800"[:0] + "ok", os.fsdecode(b"\xc3\x28"), "日本語"]
names = st.lists(st.sampled_from(PIECES), min_size=1, max_size=2).map("_".join)


def writable(name: str) -> bool:
    """Whether the file system takes ``name`` as one folder name at all (too long: it does not)."""
    return len(os.fsencode(name)) <= 255


def one_clean_line(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err


def test_a_non_utf8_folder_name_inside_the_content_is_written_as_an_escape(tmp_path: Path) -> None:
    bad = tmp_path / os.fsdecode(b"bad\xffdir")
    report = model.Report("0.1.0", "2026-11-21T22:00:00Z", str(bad), "check", factories.environment())
    path = files.write_new(bad / "r.json", model.dumps(report))
    text = path.read_bytes().decode("utf-8")  # valid UTF-8: every reader can open it
    assert json.loads(text)["host"] == str(bad)  # and the string is the one recorded


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names)
def test_a_run_s_report_reaches_a_hostile_out_dir_or_fails_before_any_work(tmp_path: Path, name: str) -> None:
    """run, bench, burn and fleet share these two steps: the folder checked before work, the JSON saved
    after it (with the fallback folders behind it)."""
    target = tmp_path / name / "x"
    try:
        out_dir = publish_cmd.output_dir(str(target))
    except UsageError as e:
        assert not writable(name) and "\n" not in str(e).strip()
        return
    report = model.Report("0.1.0", "2026-11-21T22:00:00Z", f"box {name}", "run", factories.environment())
    err = io.StringIO()
    path = publish_cmd.save_json(report, out_dir, "stem", err)
    assert path is not None and path.parent == out_dir and err.getvalue() == ""
    assert model.load(path).kind == "run"


COMMANDS = {
    "check": lambda out: ["check", "--replay", str(SNAPSHOT), "--format", "json", "--out", out],
    "export-junit": lambda out: ["export", str(REPORT), "--format", "junit", "--out", out],
    "export-prometheus": lambda out: ["export", str(REPORT), "--format", "prometheus", "--out", out],
    "diff": lambda out: ["diff", str(REPORT), str(REPORT), "--out", out],
    "history": lambda out: ["history", str(REPORT), "--format", "md", "--out", out],
    "render": lambda out: ["render", str(REPORT), "--format", "junit", "--out", str(Path(out).parent)],
}


@pytest.mark.slow  # a few seconds per command: each example renders or replays a whole report
@pytest.mark.parametrize("command", sorted(COMMANDS))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names)
def test_each_out_option_writes_or_says_one_line(tmp_path_factory, capsys, command: str, name: str) -> None:
    folder = tmp_path_factory.mktemp("out")
    out = str(folder / name / "result.out")
    rc = cli.main(COMMANDS[command](out))
    captured = capsys.readouterr()
    if rc == 2:
        one_clean_line(captured.err)
        assert not writable(name), captured.err
    else:
        assert rc in (0, 1), captured.err
        written = [p for p in (folder / name).rglob("*") if p.is_file()] if writable(name) else []
        assert written, captured.err
        for p in written:
            p.read_bytes().decode("utf-8")


def test_snapshot_from_a_non_utf8_folder_is_written(tmp_path: Path, monkeypatch, capsys) -> None:
    from envcheck import snapshot

    bad = tmp_path / os.fsdecode(b"bad\xffdir")
    bad.mkdir()
    monkeypatch.chdir(bad)
    snap = snapshot.Snapshot(meta={"host": "box", "captured": "2026-11-28T00:00:00Z"},
                             host={"cwd": str(bad), "files": {str(bad / "x"): "y"}}, nvml={})
    monkeypatch.setattr(snapshot, "capture", lambda timeout: snap)
    monkeypatch.setenv("ENVCHECK_REPORTS_DIR", str(bad))
    assert cli.main(["snapshot"]) == 0
    (written,) = bad.glob("envcheck-snapshot-*.json")
    assert json.loads(written.read_bytes().decode("utf-8"))["host"]["cwd"] == str(bad)
