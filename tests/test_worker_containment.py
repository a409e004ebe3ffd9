"""What a user's code does inside the worker (or while its file is imported) stays there: its
secrets are redacted from everything read back, what it starts is ended with it, what it writes
and allocates cannot take the parent's memory, and a slow start-up is not a case's hang."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from envcheck import model
from envcheck.bench import protocol
from envcheck.bench import runner as resume
from envcheck.errors import UsageError
from envcheck.harness import spawn as harness_spawn
from envcheck.harness.lines import CUT_EDGE, LineCutter
from envcheck.harness.spawn import spawn
from envcheck.model import Note, StopCause
from envcheck.redact import REDACTED
from envcheck.userbench import discover as disc
from tests.fake_worker import command
from tests.test_runner import DONE, PLAN, PLANNED, _gone, emit, play, run_script, start

FAKE = str(Path(__file__).with_name("fake_worker.py"))
HERE = str(Path(__file__).parent)
SECRET = "s3cr3t-value-of-the-token-0123456789"

DECLARES = """
from envcheck.userbench import Op
X = Op(name="double", impls={"torch": lambda x: x * 2}, reference=lambda x: x * 2,
       inputs=lambda s, d, dev, g: (), shapes=[(64,)], bytes=lambda s, d: 8 * s[0])
"""


def _kill(pid_file: Path) -> None:
    """Cleanup, even when the test failed: the orphan it started must not outlive it."""
    if pid_file.exists() and pid_file.read_text().strip():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


# --------------------------------------------------------------------------- 3. secrets


def test_a_secret_the_worker_writes_is_redacted_from_everything_read_back(tmp_path, monkeypatch):
    """The worker never gets the secret (an allow-listed environment); one it finds elsewhere (a file, the
    user's code) is redacted from everything read back."""
    monkeypatch.setenv("HF_TOKEN", SECRET)
    failed = PLANNED[0].failed("first_call", f"RuntimeError: token {SECRET} refused")
    steps = [start(), emit(protocol.CaseStarted(0, 4, PLANNED[0])), emit(protocol.Measured(failed)),
             emit(protocol.Noted(Note("bench.worker_failed", {"detail": f"KeyError: {SECRET}"}))),
             {"emit": {"event": f"stray {SECRET}"}}, {"raw": f"stray {SECRET} on stdout"},
             {"stderr": f"Traceback: HF_TOKEN={SECRET}"}, {"exit": 1}]
    out, seen = run_script(tmp_path, steps)
    assert out.cases[0].failure.detail == f"RuntimeError: token {REDACTED} refused"
    assert out.stop.cause == StopCause.EXITED and out.stop.detail == f"Traceback: HF_TOKEN={REDACTED}"
    everything = repr((out.cases, out.notes, out.stop, out.stderr_tail, seen))
    assert SECRET not in everything and f"stray {REDACTED} on stdout" in out.stderr_tail
    ignored = next(n for n in out.notes if n.key == "bench.ignored_output")
    assert ignored.params["examples"] == (str({"event": f"stray {REDACTED}"}),)


@pytest.mark.parametrize("text", [
    "import os\nraise RuntimeError('token ' + os.environ.get('HF_TOKEN', SECRET))\n",
    "import os, sys\nsys.stderr.write('leaked ' + os.environ.get('HF_TOKEN', SECRET) + '\\n')\nsys.stderr.flush()\n"
    "os._exit(3)\n",
])
def test_importing_a_file_that_quotes_a_secret_says_so_without_it(tmp_path, monkeypatch, text):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    (tmp_path / "mine.py").write_text(f"SECRET = {SECRET[:10]!r} + {SECRET[10:]!r}\n" + text)
    with pytest.raises(UsageError) as got:
        disc.discover(str(tmp_path / "mine.py"), timeout=120)
    assert SECRET not in str(got.value) and REDACTED in str(got.value)


# --------------------------------------------------------------------------- 4. orphans


def test_what_a_worker_leaves_running_in_a_session_of_its_own_is_ended_with_it(tmp_path):
    """A grandchild in a new session, whose parent exited, holding the worker's pipes: the worker
    finishing normally must neither wait on those pipes (no hang at exit) nor leave it running."""
    pid_file = tmp_path / "orphan.pid"
    try:
        steps = [start(), *play(PLANNED), {"orphan": str(pid_file)}, DONE]
        out, _ = run_script(tmp_path, steps)
        assert out.done and out.stop is None
        assert out.notes == []
        assert _gone(int(pid_file.read_text())), "the orphan outlived the worker"
    finally:
        _kill(pid_file)


def test_importing_a_file_that_leaves_a_process_holding_the_pipes_does_not_wait_for_it(tmp_path):
    pid_file = tmp_path / "orphan.pid"
    fake = Path(FAKE).read_text()
    orphan = fake[fake.index('ORPHAN = """') + len('ORPHAN = """'):fake.index('"""\nHELD')]
    (tmp_path / "mine.py").write_text(
        f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {orphan!r}, {str(pid_file)!r}], check=True)\n"
        + DECLARES)
    try:
        specs = disc.discover(str(tmp_path / "mine.py"), timeout=60)  # before: waited the whole 60 s, then failed
        assert [s.name for s in specs] == ["double"]
        assert _gone(int(pid_file.read_text())), "the orphan outlived the import"
    finally:
        _kill(pid_file)


# --------------------------------------------------------------------------- 5. memory


def test_endless_lines_and_carriage_return_progress_bars_are_read_bounded(tmp_path):
    steps = [start(), {"progress": 20000}, {"stderr": ""}, {"flood": [2, 24, ""]}, {"stderr": ""},
             {"flood": [1, 24, ""]}, {"raw": ""}, *play(PLANNED), DONE, {"stderr": "last words"}]
    out, _ = run_script(tmp_path, steps)
    assert out.stop is None and len(out.cases) == 4
    lines = out.stderr_tail.split("\n")
    assert max(len(ln) for ln in lines) < (64 << 10) + 100  # 48 MiB written without a line break
    cut = next(ln for ln in lines if "bytes cut]" in ln)
    assert cut.startswith("x" * 1000) and cut.endswith("x" * 1000)
    assert "progress 19999/20000" in lines and lines[-1] == "last words" and out.notes == []


def test_a_worker_over_its_host_memory_limit_is_stopped_with_that_cause(tmp_path, monkeypatch):
    monkeypatch.setattr(harness_spawn, "memory_limit", lambda: 150 << 20)
    steps = [start(), emit(protocol.CaseStarted(0, 4, PLANNED[0])), {"allocate_mb": 400}, {"sleep": 60}]
    out, _ = run_script(tmp_path, steps, timeout=120.0, grace_s=1.0)
    assert out.stop.cause == StopCause.CRASHED and out.stop.signal == "SIGKILL"
    assert out.stop.detail.startswith("memory: the worker used ") and "(limit 0.1 GiB)" in out.stop.detail
    assert out.stop.during == PLANNED[0].key
    assert resume._cause(out) == model.Failure("crash", out.stop.detail)  # what the case then fails with


def test_a_line_keeps_its_head_and_tail_and_says_how_much_was_cut():
    cutter = LineCutter(8 * CUT_EDGE)
    body = b"A" * 5000 + b"s3cret" + b"B" * 20000 + b"Z" * 5000
    lines = [*cutter.feed(b"short\r\n"), *(ln for k in range(0, len(body), 777) for ln in cutter.feed(body[k:k + 777])),
             *cutter.feed(b"\rbar 1\rbar 2\n\n")]
    assert lines[0] == "short" and lines[-2:] == ["bar 1", "bar 2"] and cutter.close() is None
    head, tail = lines[1].split(" [envcheck: ")
    assert head == "A" * (4 * CUT_EDGE - CUT_EDGE) and tail.endswith("Z" * (4 * CUT_EDGE - CUT_EDGE))
    assert tail.startswith(f"{len(body) - 6 * CUT_EDGE} bytes cut] ")
    assert cutter.feed(b"no end") == [] and cutter.close() == "no end"


# --------------------------------------------------------------------------- 6. start-up is no case's hang


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_the_case_timeout_starts_when_the_worker_has_started(tmp_path):
    """A loaded machine takes long to import torch and open the device: that is not a hang of
    the first case (the case limit is far shorter than the start-up here)."""
    steps = [{"sleep": 2}, start(), *play(PLANNED), DONE]
    out, _ = run_script(tmp_path, steps, stall_s=1.0)
    assert out.stop is None and not out.stalled and len(out.cases) == 4


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_a_slow_start_under_bench_fails_no_case(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"sleep": 2}, start(), {"play_plan": True}, DONE]))
    out = resume.run_resuming(PLAN, lambda ev: None, 120.0, 1.0, command=command(script))
    assert out.stop is None and [c.failure for c in out.cases] == [None] * 4


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_a_start_up_past_its_own_limit_stops_the_run_not_a_case(tmp_path):
    steps = [{"sleep": 60}, start(), *play(PLANNED), DONE]
    out, _ = run_script(tmp_path, steps, stall_s=1.0, startup_s=2.0, grace_s=1.0)
    assert out.stop.cause == StopCause.TIMEOUT and out.stop.timeout_s == 2.0 and not out.stalled
    assert out.stop.during is None and out.cases == []



# --------------------------------------------------------------------------- hostile text from a user's code

def test_a_failure_detail_with_a_lone_surrogate_reaches_the_parent(tmp_path):
    failed = PLANNED[0].failed("first_call", "RuntimeError: bad \ud800 text")
    out, _ = run_script(tmp_path, [start(), emit(protocol.CaseStarted(0, 4, PLANNED[0])), emit(protocol.Measured(failed)),
                                   DONE])
    assert out.cases[0].failure.detail == "RuntimeError: bad ? text"  # before, emitting it killed the worker


def test_a_leftover_that_cleared_its_environment_is_still_found_by_its_session(tmp_path):
    """No ENVCHECK_SCOPE (env={}), parent gone, but still in the worker's session: ended too."""
    pid_file = tmp_path / "orphan.pid"
    code = ("import subprocess, sys\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], env={}, "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            f"open({str(pid_file)!r}, 'w').write(str(c.pid))\n")
    (tmp_path / "leave.py").write_text(f"def main(args, out):\n    exec({code!r})\n")
    try:
        got = spawn("leave:main", timeout=60, paths=[str(tmp_path)])
        assert got.done and got.returncode == 0  # the worker exited; what it left is ended with it
        assert _gone(int(pid_file.read_text())), "the leftover outlived the worker"
    finally:
        _kill(pid_file)
