"""A verdict survives its pipe (issue 46, item 4).

Real ``envcheck`` processes check a replayed machine whose checks fail, with standard output gone in every
way a pipeline or a node can lose it: the exit status is the verdict's (1), never 0; at most one line
reaches standard error, never a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAILING = ROOT / "tests" / "fixtures" / "snapshots" / "corpus" / "linux-libcuda-so-missing.json"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def envcheck(args: list[str], sink: str, env: dict[str, str] = ENV) -> tuple[int, str, bytes]:
    """(exit status, standard error, what reached standard output) of ``envcheck ARGS`` writing to ``sink``."""
    argv = [sys.executable, "-m", "envcheck", *args]
    if sink == "/dev/full":
        with open("/dev/full", "wb") as full:
            proc = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, env=env, timeout=300)
        return proc.returncode, proc.stderr.decode(), b""
    if sink == "closed":  # ``>&-``
        proc = subprocess.run(argv, stderr=subprocess.PIPE, env=env, timeout=300, preexec_fn=lambda: os.close(1))
        return proc.returncode, proc.stderr.decode(), b""
    popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if sink == "reader gone":  # ``| true``: the reader is gone before the first line
        popen.stdout.close()  # type: ignore[union-attr]
        err = popen.stderr.read()  # type: ignore[union-attr]
        return popen.wait(timeout=300), err.decode(), b""
    out, err = popen.communicate(timeout=300)
    return popen.returncode, err.decode(), out


def assert_one_line_at_most(err: str) -> None:
    assert "Traceback" not in err and len(err.splitlines()) <= 1, err


@pytest.mark.parametrize("fmt", ["health", "text", "json"])
@pytest.mark.parametrize("sink", ["reader gone", "closed", "/dev/full"])
def test_a_failing_verdict_keeps_its_exit_status_whatever_happens_to_stdout(sink: str, fmt: str) -> None:
    code, err, _ = envcheck(["check", "--replay", str(FAILING), "--format", fmt], sink)
    assert code == 1, err
    assert_one_line_at_most(err)


@pytest.mark.parametrize("fmt", ["health", "text"])
def test_a_stdout_that_is_not_utf8_gets_escapes_and_the_verdicts_exit_status(fmt: str) -> None:
    env = {**ENV, "PYTHONIOENCODING": "ascii", "LANG": "C", "LC_ALL": "C"}
    code, err, out = envcheck(["check", "--replay", str(FAILING), "--format", fmt, "--lang", "zh-CN"], "pipe", env)
    assert code == 1, err
    assert_one_line_at_most(err)
    assert out.decode("ascii")  # every character written, as an escape where ASCII has none


def test_help_into_a_pipe_whose_reader_is_gone_is_no_traceback() -> None:
    code, err, _ = envcheck(["--help"], "reader gone")
    assert code == 0 and err == ""
