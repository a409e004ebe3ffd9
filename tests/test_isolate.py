"""isolate.run_python: a crash, a hang or an exception in the child comes back as data."""

from __future__ import annotations

import sys

import pytest

from envcheck.probes.host import Host, RunResult
from envcheck.probes.isolate import MARKER, TAIL_LINES, exception_line, parse_output, run_python, signal_name
from tests.fakes import FakeHost


@pytest.fixture(scope="module")
def host() -> Host:
    h = Host()
    h.python_executable = sys.executable
    return h


def test_reports_are_merged_in_order(host: Host) -> None:
    iso = run_python(host, 'emit({"a": 1, "b": 1})\nprint("chatter")\nemit({"b": 2})', timeout=30)
    assert iso.ok and iso.error is None
    assert iso.data == {"a": 1, "b": 2}
    assert iso.returncode == 0 and iso.signal is None and not iso.timed_out
    assert "chatter" in iso.output_tail and MARKER.strip() not in iso.output_tail
    assert iso.wall_s > 0


def test_segfault_keeps_what_was_reported_before(host: Host) -> None:
    code = 'emit({"import_ok": True})\nimport ctypes\nctypes.string_at(0)'
    iso = run_python(host, code, timeout=30)
    assert not iso.ok
    assert iso.signal == "SIGSEGV"
    assert iso.error == "crashed with SIGSEGV"
    assert iso.data == {"import_ok": True}


def test_timeout_is_an_error_not_an_exception(host: Host) -> None:
    iso = run_python(host, 'emit({"started": True})\nimport time\ntime.sleep(30)', timeout=1.0)
    assert iso.timed_out and not iso.ok
    assert iso.error == "timed out after 1 s"
    assert iso.wall_s < 10


def test_exception_names_the_last_traceback_line(host: Host) -> None:
    iso = run_python(host, "import envcheck_no_such_module_xyz", timeout=30)
    assert iso.returncode == 1 and not iso.ok
    assert iso.error == "exited 1: ModuleNotFoundError: No module named 'envcheck_no_such_module_xyz'"
    assert "Traceback" in iso.output_tail


def test_exit_zero_without_a_report_is_not_ok(host: Host) -> None:
    iso = run_python(host, "pass", timeout=30)
    assert not iso.ok and iso.error == "exited 0 without reporting"


def test_missing_interpreter() -> None:
    fake = FakeHost(python_executable="/nowhere/python")
    iso = run_python(fake, "pass", timeout=5)
    assert not iso.ok and iso.returncode is None
    assert iso.error == "could not start /nowhere/python: not found"


def test_output_tail_keeps_the_last_lines() -> None:
    lines = "\n".join(f"line {i}" for i in range(100))
    fake = FakeHost(commands={"/home/user/project/.venv/bin/python": RunResult(("python",), 1, lines, "")})
    iso = run_python(fake, "pass", timeout=5)
    tail = iso.output_tail.splitlines()
    assert len(tail) == TAIL_LINES and tail[-1] == "line 99" and tail[0] == f"line {100 - TAIL_LINES}"
    assert iso.error == "exited 1: line 99"


def test_parse_output_skips_a_report_cut_by_a_crash() -> None:
    data, other = parse_output(f'{MARKER}{{"a": 1}}\n{MARKER}{{"b": 2, "c\nplain')
    assert data == {"a": 1}
    assert other[-1] == "plain"


@pytest.mark.parametrize(("rc", "name"), [(-11, "SIGSEGV"), (-6, "SIGABRT"), (-9, "SIGKILL"), (1, None), (None, None)])
def test_signal_name(rc: int | None, name: str | None) -> None:
    assert signal_name(rc) == name


def test_exception_line_finds_warnings_and_errors() -> None:
    text = ("Traceback (most recent call last):\n  File \"<string>\", line 1\n"
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\n")
    assert exception_line(text).startswith("RuntimeError: The NVIDIA driver")
    assert exception_line("just text\n") is None
