"""The child-process harness: every way a child's run can end, the isolation it starts in, and that no child
outlives envcheck, whatever ends envcheck."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from envcheck.harness import command, messages
from envcheck.harness.env import NO_MULTICAST, clean_env
from envcheck.harness.failures import (
    ChildError,
    Crash,
    Garbage,
    Hang,
    Outcome,
    SpawnFailed,
    Stopped,
    Timeout,
    to_launch,
    to_stop,
)
from envcheck.harness.signals import together
from envcheck.harness.spawn import spawn
from envcheck.model import StopCause
from envcheck.redact import REDACTED

HERE = str(Path(__file__).parent)
ROOT = Path(__file__).resolve().parents[1]
SECRET = "s3cr3t-value-of-the-token-0123456789"


def run(name: str, args=None, **kw) -> Outcome:
    kw.setdefault("timeout", 60)
    return spawn(f"harness_targets:{name}", args, paths=[HERE], **kw)


def gone(pid: int, wait_s: float = 10.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def wait_for_file(path: Path, wait_s: float = 60.0) -> str:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


# --------------------------------------------------------------------------- what a run comes to


def test_a_run_streams_its_events_and_returns_its_result():
    seen = []
    out = run("echo", {"plan": [1, 2]}, on_event=seen.append)
    assert out.done and out.failure is None and out.returncode == 0
    assert out.result == {"args": {"plan": [1, 2]}} and seen == [{"step": 1}]
    assert out.phase == "working" and "stray text on stdout" in out.tail


def test_a_crash_keeps_what_was_sent_before_it():
    seen = []
    out = run("crash", on_event=seen.append)
    assert out.failure == Crash(-signal.SIGSEGV) and out.failure.signal == "SIGSEGV" and not out.done
    assert seen == [{"before": True}] and out.last_words == "Fatal Python error: Segmentation fault"
    stop = to_stop(out, 1, 3)
    assert (stop.cause, stop.signal, stop.detail) == (StopCause.CRASHED, "SIGSEGV", out.last_words)


@pytest.mark.parametrize("status", [0, 3])
def test_an_exit_without_a_last_message_is_a_crash(status):
    out = run("exit_quietly", status)
    assert out.failure == Crash(status) and out.failure.signal is None
    assert to_stop(out, 0, 1).cause is StopCause.EXITED


def test_an_exception_comes_back_as_data_redacted():
    out = run("raises")
    assert isinstance(out.failure, ChildError) and out.returncode == 1
    assert out.failure.line == f"RuntimeError: cannot fetch https://{REDACTED}@pypi.example/simple/"
    assert "s3cr3t-Pa55word" not in repr(out) and "Traceback" in out.failure.traceback


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_a_child_still_talking_at_its_time_limit_times_out():
    t0 = time.monotonic()
    out = run("sleep", {"s": 120}, timeout=2.0, grace_s=1.0)
    assert time.monotonic() - t0 < 60
    assert out.failure == Timeout(2.0, "sleeping") and out.returncode is not None
    assert to_launch(out, ("python",), 2.0).timed_out and to_stop(out, 0, 1).timeout_s == 2.0


def test_a_silent_child_hangs():
    out = run("freeze", heartbeat=1.5, grace_s=0.5)
    assert out.failure == Hang(1.5, "frozen") and out.returncode == -signal.SIGKILL


def test_the_callers_idle_limit_counts_events_not_heartbeats():
    seen = []
    out = run("events", {"n": 2, "then_s": 60}, heartbeat=2.0, idle=lambda: 1.5 if seen else None,
              on_event=seen.append, grace_s=0.5)
    assert out.failure == Hang(1.5, "start", idle=True) and len(seen) == 2
    assert to_stop(out, 2, 4, idle=StopCause.TIMEOUT).cause is StopCause.TIMEOUT
    assert to_stop(out, 2, 4).cause is StopCause.HUNG


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_a_slow_start_is_no_hang_while_it_beats():
    out = run("events", {"n": 1, "every_s": 2.0}, heartbeat=1.5)
    assert out.done and out.failure is None


def test_garbage_on_the_message_fd_stops_the_child():
    out = run("garbage", grace_s=0.5)
    assert isinstance(out.failure, Garbage) and out.failure.sample == "this is not a message"
    assert to_stop(out, 0, 1).detail.startswith("protocol: JSON is malformed")


def test_a_child_that_lingers_after_done_is_ended_and_its_result_kept():
    out = run("linger", exit_s=0.5, grace_s=0.5)
    assert out.done and out.result == 1 and out.failure == Hang(0.5, "exit")
    assert to_stop(out, 1, 1) is None


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_a_timeout_after_done_keeps_the_result():
    out = run("linger", timeout=2.0, exit_s=60, grace_s=0.5)
    assert out.done and out.result == 1 and isinstance(out.failure, Timeout)


def test_text_json_cannot_carry_arrives_readable():
    seen = []
    out = run("surrogate", on_event=seen.append)
    assert out.done and out.result == "?" and seen == [{"text": "bad ? text", "nan": "nan"}]


def test_a_child_that_cannot_start_is_a_failure_not_an_exception(tmp_path):
    out = spawn("harness_targets:echo", timeout=10, python=str(tmp_path / "no-python"))
    assert isinstance(out.failure, SpawnFailed) and out.failure.error.startswith("FileNotFoundError")
    assert to_stop(out, 0, 2).cause is StopCause.START_FAILED
    assert to_launch(out, ("python",), 10).error.startswith("could not start (FileNotFoundError")


def test_another_thread_stops_it_and_a_stop_signal_stops_them_all(tmp_path):
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    out = run("sleep", {}, stop=stop, grace_s=0.5)
    assert out.failure == Stopped() and to_stop(out, 0, 1).cause is StopCause.USER

    got: list[Outcome] = []
    pid_files = [tmp_path / f"{k}.pid" for k in range(2)]

    def job(k):
        return lambda stop: got.append(run("sleep", {"pid_file": str(pid_files[k])}, stop=stop, grace_s=0.5))

    def signal_when_started():
        for p in pid_files:
            wait_for_file(p)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=signal_when_started, daemon=True).start()
    assert together([job(0), job(1)]) == Stopped("SIGTERM")
    assert [o.failure for o in got] == [Stopped(), Stopped()]
    assert all(gone(int(p.read_text())) for p in pid_files)


def test_ctrl_c_in_the_main_thread_stops_the_child_and_returns(tmp_path):
    pid_file = tmp_path / "pid"
    threading.Thread(target=lambda: (wait_for_file(pid_file), signal.raise_signal(signal.SIGINT)),
                     daemon=True).start()
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        out = run("sleep", {"pid_file": str(pid_file)}, grace_s=0.5)
    finally:
        signal.signal(signal.SIGINT, old)
    assert out.failure == Stopped("SIGINT") and gone(int(pid_file.read_text()))
    assert to_stop(out, 0, 1).cause is StopCause.USER


def test_the_protocol_is_strict():
    assert isinstance(messages.decode(b'{"kind":"Beat","seq":1,"phase":"x"}'), messages.Beat)
    for bad in (b'{"kind":"Beat","seq":1,"phase":"x","extra":1}', b'{"kind":"Nope"}', b'{"seq":1}'):
        with pytest.raises(Exception, match="Object|Invalid|missing"):
            messages.decode(bad)


# --------------------------------------------------------------------------- isolation


def test_nothing_is_imported_from_the_current_folder_or_pythonpath(tmp_path, monkeypatch):
    """A json.py, a torch.py and an envcheck/ where envcheck runs, and the same on PYTHONPATH: none is imported
    (each would leave a mark)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    for folder in (tmp_path / "cwd", tmp_path / "pp"):
        (folder / "envcheck" / "harness").mkdir(parents=True)
        for name in ("json.py", "torch.py", "envcheck/__init__.py", "envcheck/harness/__init__.py"):
            (folder / name).write_text(f"open({str(marks / name.replace('/', '_'))!r}, 'w').write('imported')\n")
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'pp'}{os.pathsep}.{os.pathsep}")
    out = run("where")
    assert out.done, out.stderr_tail
    assert list(marks.iterdir()) == []
    found = out.result
    assert not any(str(tmp_path) in (found[k] or "") for k in ("json", "envcheck", "torch"))
    assert Path(found["envcheck"]).resolve().parent.parent == ROOT
    assert "" not in found["path"] and str(tmp_path / "cwd") not in found["path"]


def test_a_child_gets_no_secret_and_multicast_off(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p@db/app")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.setenv("NCCL_IB_PKEY", "0x8001")
    env = run("where").result["environ"]
    assert "HF_TOKEN" not in env and "DATABASE_URL" not in env and SECRET not in json.dumps(env)
    assert {k: env[k] for k in NO_MULTICAST} == NO_MULTICAST and env["NCCL_IB_PKEY"] == "0x8001"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and env["PATH"] == os.environ["PATH"]


def test_the_environment_rule():
    env = clean_env({"CUDA_VISIBLE_DEVICES": "1"}, base={"PATH": "/bin", "TRITON_CACHE_DIR": "/c", "AWS_SECRET": "x",
                                                         "TORCH_HUB_TOKEN": "t", "FOO": "1", "SLURM_JOB_ID": "7",
                                                         "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}, allow=("SLURM_*",))
    assert env == {"PATH": "/bin", "TRITON_CACHE_DIR": "/c", "SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "1",
                   "CUDA_DEVICE_ORDER": "FASTEST_FIRST", **NO_MULTICAST}


def test_a_program_is_killed_at_its_limit_with_its_group_and_gets_the_same_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    ran = command.run([sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"], 30)
    env = json.loads(ran.stdout)
    assert ran.returncode == 0 and "HF_TOKEN" not in env and env["NCCL_NVLS_ENABLE"] == "0"
    pid_file = tmp_path / "pid"
    code = (f"import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']);"
            f"open({str(pid_file)!r}, 'w').write(str(c.pid)); time.sleep(120)")
    ran = command.run([sys.executable, "-c", code], 3)
    assert ran.timed_out and ran.returncode == -signal.SIGKILL and ran.error == "timed out after 3 s"
    assert gone(int(pid_file.read_text()))
    assert command.run([str(tmp_path / "nothing")], 5).error == "not found"


# --------------------------------------------------------------------------- no child outlives envcheck

PARENT = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # also under a parent that ignores Ctrl-C
sys.path[:0] = [{root!r}, {here!r}]
from envcheck.harness.spawn import spawn
out = spawn("harness_targets:{target}", {args!r}, timeout=120, paths=[{here!r}], grace_s=1.0)
print(type(out.failure).__name__, flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_the_child_and_its_group_die_with_envcheck_whatever_ends_it(tmp_path, sig):
    pid_file = tmp_path / "grandchild.pid"
    code = PARENT.format(root=str(ROOT), here=HERE, target="grandchild", args=str(pid_file))
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        grandchild = int(wait_for_file(pid_file))
        child = psutil.Process(grandchild).ppid()
        parent.send_signal(sig)
        out, _ = parent.communicate(timeout=60)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert gone(child), "the child outlived envcheck"
    if sig != signal.SIGKILL:  # a catchable signal: envcheck ends the child's whole group, then goes on
        assert out.strip() == "Stopped" and gone(grandchild), "the child's own child outlived envcheck"
    else:
        os.kill(grandchild, signal.SIGKILL) if not gone(grandchild, 0.1) else None


def test_each_job_speaks_the_command_s_language():
    """The per-GPU threads run in the caller's context: a zh-CN burn's progress lines are Chinese (a thread started
    without it read the default language: the phase names came out English)."""
    from envcheck.render.i18n import language, word

    said: list[str] = []
    with language("zh-CN"):
        together([lambda stop: said.append(word("burn.phase.", "gemm"))] * 2)
    together([lambda stop: said.append(word("burn.phase.", "gemm"))])
    assert said[0] == said[1] != said[2] == "GEMM with its correctness checks"
