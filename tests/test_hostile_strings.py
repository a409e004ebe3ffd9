"""Hostile strings in what envcheck reads (issue 36, items 1 and 2).

A real snapshot (tests/fixtures/snapshots/corpus) and real reports (tests/golden) with hostile text
planted into the machine strings they carry: newlines, lone surrogates (JSON spells them, Python
reads them, no UTF-8 writer accepts them), bidi overrides, C0 and C1 controls, terminal escapes,
100,000-character lines. Every command that reads one (``check --replay`` in every format, ``probe
--replay``, ``export``, ``render``, ``diff``, ``history``) gives a clean output (exit 0 or 1) or one
line and exit 2: never a traceback, never text that cannot be written. The snapshot's torch build
lacks the GPU's architecture, so its check fails, and still fails, on the health line, in JUnit and
in Prometheus, whatever was planted. Fixed seed (tests/conftest.py), few examples, in-process; one
subprocess, where the real stdout's encoding is the point.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="hypothesis (a test extra) is not installed")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from envcheck import cli, model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
A100 = json.loads((ROOT / "tests/fixtures/snapshots/corpus/linux-a100-driver-535-torch-cu124.json").read_text())
A100["host"]["runs"]["torch_runtime"]["stdout"] = A100["host"]["runs"]["torch_runtime"]["stdout"].replace(
    '"sm_80", ', "")  # torch built without the A100's architecture: torch.arch.0 fails
REPORTS = {name: json.loads((ROOT / "tests" / "golden" / name).read_text()) for name in ("h200_small.json",
                                                                                        "cpu_small.json")}
LONG = "x" * 100_000
PIECES = ["\n", "\r\n", "\r", "\ud800", "\udfff", "\udc80", "\u202e", "\u2066", "\x00", "\x07", "\x1b[2J",
          "\x1b]8;;http://x\x07", "\x85", "\x9b31m", "\u2028", "\ufeff", "\u200b", "<script>", "|", "`", "[bold]",
          "{error}", "%s", "\\", '"', "é", "漢字"]
hostile = st.one_of(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4).map("".join),
                    st.text(max_size=4).map(lambda t: t + "\ud800\n"), st.just(LONG + "\n\ud800"))
SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Machine strings of the snapshot: where each is, appended to (a new key where the last part is new).
SNAPSHOT_PLACES = [
    ("nvml", "gpus", 0, "nvmlDeviceGetName", "value"),
    ("nvml", "nvmlSystemGetDriverVersion", "value"),
    ("meta", "host"),
    ("host", "python", "include_dir"),
    ("host", "python", "executable"),
    ("host", "packages", "triton", "location"),
    ("host", "packages", "torch", "version"),
    ("host", "environ", "CUDA_VISIBLE_DEVICES"),
    ("host", "environ", "PATH"),
    ("host", "cwd"),
]
REPORT_PLACES = [
    ("host",),
    ("environment", "sections", "system", "cpu_model", "value"),
    ("environment", "sections", "env", "variables", "value", "HOSTILE"),
    ("environment", "gpus", 0, "facts", "name", "value"),
    ("environment", "sections", "driver", "driver_version", "value"),
    ("checks", 0, "finding"),
    ("checks", 0, "params", "version"),
    ("bench", "device", "name"),
    ("benches", 0, "device", "name"),
]


def planted(data: dict[str, Any], where: tuple[Any, ...], text: str) -> dict[str, Any] | None:
    """``data`` with ``text`` appended at ``where`` (set, where the last key is new); None where the
    place is not in this document."""
    out = copy.deepcopy(data)
    node: Any = out
    for key in where[:-1]:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return None
        if node is None:
            return None
    last = where[-1]
    if isinstance(node, dict):
        node[last] = (node[last] if isinstance(node.get(last), str) else "") + text
    elif isinstance(node, list) and isinstance(last, int) and last < len(node):
        node[last] = str(node[last]) + text
    else:
        return None
    return out


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")  # ensure_ascii: a lone surrogate is spelled \ud800
    return path


def _clean(rc: int, out: str, err: str, names: tuple[str, ...]) -> None:
    """A result (0 or 1) whose text any UTF-8 writer takes, or one line naming the file and exit 2."""
    assert "Traceback" not in err, err[-2000:]
    out.encode("utf-8")
    err.encode("utf-8")
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and any(n in lines[0] for n in names), err[-2000:]
    else:
        assert rc in (0, 1), (rc, err[-2000:])


def _failing_everywhere(fmt: str, rc: int, out: str) -> None:
    assert rc == 1, out[-2000:]
    if fmt == "health":
        assert out.startswith("[node_problem] ") and out.count("\n") == 1, out[:500]
    elif fmt == "junit":
        assert any(tc.find("failure") is not None for tc in ET.fromstring(out).iter("testcase"))
    elif fmt == "prometheus":
        [ok] = [f for f in text_string_to_metric_families(out) if f.name == "envcheck_verdict_ok"]
        assert ok.samples[0].value == 0.0
    elif fmt == "json":
        report = model.loads(out)
        assert [c.status for c in report.checks if c.id == "torch.arch.0"] == ["fail"]
        assert not [c for c in report.checks if c.id.endswith(".internal")]


@SETTINGS
@given(text=hostile, where=st.sampled_from(SNAPSHOT_PLACES),
       fmt=st.sampled_from(["text", "json", "junit", "prometheus", "health"]))
@example(text="\ud800", where=SNAPSHOT_PLACES[0], fmt="json")
@example(text="\ud800", where=SNAPSHOT_PLACES[2], fmt="prometheus")
@example(text="\n[node_problem] fake", where=SNAPSHOT_PLACES[0], fmt="health")
@example(text=LONG + "\n", where=SNAPSHOT_PLACES[1], fmt="junit")
@example(text="\u202e\x1b[2J\x85", where=SNAPSHOT_PLACES[5], fmt="text")
def test_check_replay_of_a_hostile_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                            where: tuple[Any, ...], fmt: str) -> None:
    snap = planted(A100, where, text)
    assert snap is not None
    path = _write(tmp_path / "snap.json", snap)
    rc = cli.main(["check", "--replay", str(path), "--format", fmt])
    out, err = capsys.readouterr()
    _clean(rc, out, err, (path.name,))
    _failing_everywhere(fmt, rc, out)


@SETTINGS
@given(text=hostile, where=st.sampled_from(SNAPSHOT_PLACES), fmt=st.sampled_from(["text", "json"]))
@example(text="\ud800", where=SNAPSHOT_PLACES[0], fmt="json")
@example(text="\ud800\n", where=SNAPSHOT_PLACES[2], fmt="text")
@example(text=LONG, where=SNAPSHOT_PLACES[8], fmt="json")  # the redactor once took 30 s on it
def test_probe_replay_of_a_hostile_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                            where: tuple[Any, ...], fmt: str) -> None:
    snap = planted(A100, where, text)
    assert snap is not None
    path = _write(tmp_path / "snap.json", snap)
    rc = cli.main(["probe", "--replay", str(path), "--format", fmt])
    out, err = capsys.readouterr()
    _clean(rc, out, err, (path.name,))
    assert rc == 0
    if fmt == "json":
        assert model.loads(out).kind == "probe"


def _hostile_report(tmp_path: Path, name: str, where: tuple[Any, ...], text: str) -> Path | None:
    data = planted(REPORTS[name], where, text)
    return None if data is None else _write(tmp_path / f"hostile_{name}", data)


REPORT_COMMANDS = [
    ["export", "{r}", "--format", "junit"], ["export", "{r}", "--format", "prometheus"],
    ["export", "{r}", "--format", "health"],
    ["diff", "{good}", "{r}"], ["diff", "{r}", "{good}", "--format", "json"], ["diff", "{r}", "{good}", "--format", "md"],
    ["history", "{r}", "{good}"], ["history", "{r}", "{good}", "--format", "html"],
]


@SETTINGS
@given(text=hostile, name=st.sampled_from(sorted(REPORTS)), where=st.sampled_from(REPORT_PLACES),
       argv=st.sampled_from(REPORT_COMMANDS))
@example(text="\ud800", name="h200_small.json", where=REPORT_PLACES[0], argv=REPORT_COMMANDS[1])
@example(text="\ud800", name="h200_small.json", where=REPORT_PLACES[3], argv=REPORT_COMMANDS[4])
@example(text="\ud800", name="cpu_small.json", where=REPORT_PLACES[0], argv=REPORT_COMMANDS[6])
@example(text="\ud800\u202e", name="cpu_small.json", where=REPORT_PLACES[0], argv=REPORT_COMMANDS[3])
@example(text=LONG + "\n\x1b[2J", name="h200_small.json", where=REPORT_PLACES[1], argv=REPORT_COMMANDS[0])
def test_reading_a_hostile_report(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, name: str,
                                  where: tuple[Any, ...], argv: list[str]) -> None:
    bad = _hostile_report(tmp_path, name, where, text)
    if bad is None:
        return
    good = _write(tmp_path / "good.json", REPORTS["cpu_small.json"])
    rc = cli.main([a.format(r=bad, good=good) for a in argv])
    out, err = capsys.readouterr()
    _clean(rc, out, err, (bad.name,))


@pytest.mark.slow  # render draws the charts: about two seconds an example
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(text=hostile, where=st.sampled_from(REPORT_PLACES))
@example(text="\ud800\n\u202e", where=REPORT_PLACES[0])
@example(text="\ud800", where=REPORT_PLACES[3])
def test_render_of_a_hostile_report(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                    where: tuple[Any, ...]) -> None:
    bad = _hostile_report(tmp_path, "h200_small.json", where, text)
    if bad is None:
        return
    out_dir = tmp_path / "out"
    rc = cli.main(["render", str(bad), "--out", str(out_dir), "--format", "md,html", "--force"])
    out, err = capsys.readouterr()
    _clean(rc, out, err, (bad.name,))
    if rc == 0:
        for f in out_dir.iterdir():
            if f.suffix in (".md", ".html"):
                f.read_text(encoding="utf-8")


def test_a_lone_surrogate_in_a_snapshot_reaches_stdout_as_utf8(tmp_path: Path) -> None:
    """The process boundary: the real stdout encodes what the command writes."""
    snap = planted(A100, SNAPSHOT_PLACES[0], "\ud800\n")
    assert snap is not None
    path = _write(tmp_path / "snap.json", snap)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run([sys.executable, "-m", "envcheck", "check", "--replay", str(path), "--format", "json"],
                          capture_output=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 1 and b"Traceback" not in done.stderr, done.stderr[-2000:]
    report = model.loads(done.stdout.decode("utf-8"))
    assert "\ufffd" in (report.environment.gpus[0].get("name") or "")


def test_a_variable_that_is_not_utf8_is_recorded_and_probed_encodable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live seams: Python reads bytes that are not UTF-8 (a variable, a file name) as lone surrogates;
    ``snapshot`` and ``check`` write them as U+FFFD instead of ending in a UnicodeEncodeError."""
    from envcheck import snapshot
    from envcheck.probes import collect as collect_mod

    real = collect_mod.collect
    monkeypatch.setattr(collect_mod, "collect", lambda **kw: real(**{**kw, "runtime": False}))  # no torch child
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0\udcff\n")  # what os.environ holds for b"0\xff\n"
    snap = snapshot.capture(timeout=60)
    text = snapshot.dumps(snap)
    text.encode("utf-8")
    assert snapshot.loads(text).host["environ"]["CUDA_VISIBLE_DEVICES"] == "0\ufffd\n"
    env = collect_mod.collect(runtime=False)
    assert env.get("env", "variables")["CUDA_VISIBLE_DEVICES"] == "0\ufffd\n"
