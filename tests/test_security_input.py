"""Input that is the wrong kind or costs too much is one line and a non-zero exit (issue 46, items 5 and 10).

A document of another kind (a probe's facts, a snapshot, a report where a snapshot goes) is refused at the
one loader seam, naming what was expected and what it is; a small gzip file that inflates without end is
stopped at a named limit, whatever command reads it.
"""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import factories
import pytest

from envcheck import cli, model

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "fixtures" / "snapshots" / "corpus" / "linux-libcuda-so-missing.json"
REPORT = ROOT / "tests" / "golden" / "h200_small.json"


def one_line_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = cli.main(args)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (code, err)
    return err


@pytest.fixture
def probe_json(tmp_path: Path) -> Path:
    """The JSON ``envcheck probe --format json`` writes: facts, no check, no measurement."""
    path = tmp_path / "probe.json"
    model.dump(dataclasses.replace(factories.report(), kind="probe", checks=(), benches=()), path)
    return path


@pytest.mark.parametrize("args", [["export", "{p}", "--format", "health"], ["export", "{p}", "--format", "junit"],
                                  ["export", "{p}", "--format", "prometheus"], ["diff", "{p}", str(REPORT)],
                                  ["diff", str(REPORT), "{p}", "--fail-on-regression", "5"]])
def test_a_probe_report_where_a_verdict_is_read_is_refused(probe_json: Path, args: list[str], capsys) -> None:
    """A probe's facts were exported as a healthy node (``OK``, exit 0)."""
    err = one_line_error([a.replace("{p}", str(probe_json)) for a in args], capsys)
    assert "a probe report" in err and "check, run, fleet or burn report is expected" in err


@pytest.mark.parametrize("command", [["render", "{s}"], ["export", "{s}", "--format", "health"],
                                     ["diff", "{s}", str(REPORT)], ["history", "{s}"]])
def test_a_snapshot_where_a_report_goes_is_named(command: list[str], capsys) -> None:
    err = one_line_error([a.replace("{s}", str(SNAPSHOT)) for a in command], capsys)
    assert "not an envcheck report" in err and "'envcheck-snapshot' document" in err


def test_a_report_where_a_snapshot_goes_is_named(capsys) -> None:
    err = one_line_error(["check", "--replay", str(REPORT)], capsys)
    assert "not an envcheck snapshot" in err and "'envcheck-report' document" in err


def _bomb(path: Path, inflated: int = 16 << 20) -> Path:
    """A gzip file of some kilobytes that inflates to ``inflated`` bytes of JSON."""
    path.write_bytes(gzip.compress(b"[" + b"[]," * (inflated // 3) + b"[]]", compresslevel=9))
    assert path.stat().st_size < inflated // 200
    return path


@pytest.mark.parametrize("command", [["render", "{b}"], ["export", "{b}", "--format", "health"],
                                     ["diff", "{b}", str(REPORT)], ["history", "{b}"],
                                     ["check", "--replay", "{b}"], ["probe", "--replay", "{b}"]])
def test_a_gzip_bomb_stops_at_the_named_limit(tmp_path: Path, command: list[str], capsys) -> None:
    bomb = _bomb(tmp_path / "bomb.json.gz")
    err = one_line_error([a.replace("{b}", str(bomb)) for a in command], capsys)
    assert "once decompressed" in err and "times its compressed size" in err


def test_a_gzip_compressed_snapshot_replays_as_the_plain_one(tmp_path: Path, capsys) -> None:
    packed = tmp_path / "snap.json.gz"
    packed.write_bytes(gzip.compress(SNAPSHOT.read_bytes()))
    assert cli.main(["check", "--replay", str(SNAPSHOT), "--format", "health"]) == 1
    plain = capsys.readouterr().out
    assert cli.main(["check", "--replay", str(packed), "--format", "health"]) == 1
    assert capsys.readouterr().out == plain
