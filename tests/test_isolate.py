"""A probe's child through the host seam: a crash, a hang or an exception comes back as data, and a run
recorded by ``envcheck snapshot`` replays as it ran."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from envcheck.probes.host import MARKER, Host, RunResult
from envcheck.probes.isolate import EXCEPTION_LINE, TAIL_LINES, last_line, parse_reports, run_python
from envcheck.probes.recording import RecordingHost
from envcheck.probes.replay import ReplayHost
from tests.fakes import FakeHost

HERE = str(Path(__file__).parent)


@pytest.fixture(scope="module")
def host() -> Host:
    h = Host()
    h.python_executable = sys.executable
    return h


def probe(host: Host, name: str, timeout: float = 30, **kw):
    return run_python(host, f"harness_targets:{name}", timeout, name, paths=[HERE], **kw)


def test_reports_are_merged_in_order(host: Host) -> None:
    iso = probe(host, "reports")
    assert iso.error is None and iso.data == {"a": 1, "b": 2}
    assert "chatter" in iso.output_tail and MARKER.strip() not in iso.output_tail


def test_segfault_keeps_what_was_reported_before(host: Host) -> None:
    iso = probe(host, "crash")
    assert iso.error == "crashed with SIGSEGV" and iso.data == {"before": True}


def test_timeout_is_an_error_not_an_exception(host: Host) -> None:
    t0 = time.monotonic()
    iso = probe(host, "sleep", timeout=1.0, args={"s": 30})
    assert iso.error == "timed out after 1 s" and time.monotonic() - t0 < 20


def test_exception_names_the_last_traceback_line(host: Host) -> None:
    iso = probe(host, "fails_import")
    assert iso.error == "exited 1: ModuleNotFoundError: No module named 'envcheck_no_such_module_xyz'"
    assert "Traceback" in iso.output_tail


def test_exit_zero_without_a_report_is_not_ok(host: Host) -> None:
    assert probe(host, "nothing").error == "exited 0 without reporting"


def test_missing_interpreter(tmp_path) -> None:
    fake = FakeHost(python_executable="/nowhere/python")
    assert probe(fake, "nothing", timeout=5).error == "could not start /nowhere/python: not found"
    real = Host()
    real.python_executable = str(tmp_path / "python")
    assert probe(real, "nothing", timeout=5).error == f"could not start {tmp_path / 'python'}: not found"


def test_output_tail_keeps_the_last_lines() -> None:
    lines = "\n".join(f"line {i}" for i in range(100))
    fake = FakeHost(commands={"/home/user/project/.venv/bin/python": RunResult(("python",), 1, lines, "")})
    iso = probe(fake, "nothing", timeout=5)
    tail = iso.output_tail.splitlines()
    assert len(tail) == TAIL_LINES and tail[-1] == "line 99" and tail[0] == f"line {100 - TAIL_LINES}"
    assert iso.error == "exited 1: line 99"


def test_a_recorded_run_replays_as_it_ran() -> None:
    rec = RecordingHost()
    live = probe(rec, "crash")
    replayed = probe(ReplayHost.from_section(rec.section()), "crash")
    assert replayed == live and live.error == "crashed with SIGSEGV"
    assert rec.section()["runs"]["crash"]["argv"] == [rec.python_executable]


def test_a_report_cut_by_a_crash_is_skipped() -> None:
    data, other = parse_reports(f'{MARKER}{{"a": 1}}\n{MARKER}{{"b": 2, "c\nplain')
    assert data == {"a": 1} and other[-1] == "plain"


def test_exception_line_finds_warnings_and_errors() -> None:
    text = ("Traceback (most recent call last):\n  File \"<string>\", line 1\n"
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\n")
    assert last_line(text, EXCEPTION_LINE).startswith("RuntimeError: The NVIDIA driver")
    assert last_line("just text\n", EXCEPTION_LINE) is None
