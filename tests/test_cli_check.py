"""``envcheck probe`` and ``envcheck check`` end to end, as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from envcheck import model

# One pytest-xdist worker runs this module: its check of this machine (a module fixture, seconds) runs once.
pytestmark = pytest.mark.xdist_group("cli_check")
ROOT = Path(__file__).resolve().parents[1]


def envcheck(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("COLUMNS", None)
    return subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def check_json() -> subprocess.CompletedProcess[str]:
    return envcheck("check", "--format", "json")


def test_probe_json_is_a_probe_report() -> None:
    res = envcheck("probe", "--format", "json")
    assert res.returncode == 0, res.stderr
    report = model.loads(res.stdout)
    assert report.kind == "probe" and report.checks == ()
    assert report.environment.get("torch_runtime", "import_ok") is None
    assert report.environment.fact("torch_runtime", "import_ok").reason.startswith("not run")
    assert set(report.environment.sections) >= {"system", "driver", "torch", "triton", "wsl", "cuda", "env"}
    assert res.stderr == ""


def test_probe_text_is_plain_in_a_pipe() -> None:
    res = envcheck("probe")
    assert res.returncode == 0, res.stderr
    assert "\x1b[" not in res.stdout
    lines = res.stdout.splitlines()
    assert lines[0].startswith("Environment (the probes took")
    for label in ("System", "Driver", "PyTorch", "Triton"):
        assert any(line.startswith(label) for line in lines), label
    assert all(len(line) <= 120 for line in lines)
    assert all(line == line.rstrip() for line in lines)


def test_probe_never_imports_torch() -> None:
    code = ("import sys, io, contextlib; from envcheck.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): rc = main(['probe', '--format', 'json'])\n"
            "print(rc, sorted(m for m in ('torch', 'triton', 'matplotlib') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.stdout.strip() == "0 []", res.stderr


@pytest.mark.slow
def test_probe_runs_and_its_time_beside_collect_env_is_recorded(record_property: Callable[[str, object], None]) -> None:
    """``probe`` and ``collect_env`` wall times go to the test report's properties (``pytest --junitxml``):
    recorded, never asserted (a busy machine decides them; that probe imports no torch is
    test_probe_never_imports_torch's to say)."""
    walls = []
    for _ in range(3):
        t = time.perf_counter()
        assert envcheck("probe", "--format", "json").returncode == 0
        walls.append(time.perf_counter() - t)
    probe_s = min(walls)
    try:
        import importlib.util

        has_torch = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        has_torch = False
    if has_torch:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "torch.utils.collect_env"], capture_output=True, timeout=300)
        collect_s = time.perf_counter() - t
        record_property("probe_s", round(probe_s, 3))
        record_property("collect_env_s", round(collect_s, 3))


def test_check_json_exit_status_matches_the_checks(check_json: subprocess.CompletedProcess[str]) -> None:
    report = model.loads(check_json.stdout)
    assert report.kind == "check" and report.checks
    failed = any(c.status == "fail" for c in report.checks)
    assert check_json.returncode == (1 if failed else 0), check_json.stderr
    # The runtime probes ran in their subprocesses.
    assert not report.environment.fact("torch_runtime", "error").reason or \
        not report.environment.fact("torch_runtime", "error").reason.startswith("not run")
    assert "Traceback" not in check_json.stderr


@pytest.mark.slow
def test_check_text_has_a_verdict(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "check.json"
    res = envcheck("check", "--out", str(out))
    assert res.returncode in (0, 1), res.stderr
    lines = res.stdout.splitlines()
    assert "Health" in lines
    verdict = [line for line in lines if line.startswith(("FAIL:", "OK:", "OK with warnings:"))]
    assert verdict and (verdict[0].startswith("FAIL") == (res.returncode == 1))
    assert f"report written to {out}" in res.stdout
    assert model.load(out).kind == "check"
    assert "\x1b[" not in res.stdout


def test_check_out_never_overwrites(tmp_path: Path) -> None:
    out = tmp_path / "mine.json"
    out.write_text("user data")
    res = envcheck("check", "--out", str(out))
    assert res.returncode == 2
    assert res.stderr.strip() == (f"envcheck check: error: {out} already exists: choose a new file name "
                                  "(envcheck never overwrites a report)")
    assert out.read_text() == "user data"


@pytest.mark.parametrize("args", [["--help"], ["probe", "--help"], ["check", "--help"]])
def test_help(args: list[str]) -> None:
    res = envcheck(*args)
    assert res.returncode == 0 and "usage: envcheck" in res.stdout


def test_version() -> None:
    from envcheck import __version__

    res = envcheck("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"envcheck {__version__}"


@pytest.mark.parametrize("args", [["check", "--timeout", "-5"], ["check", "--timeout", "soon"],
                                  ["probe", "--format", "xml"], ["check", "--bogus"]])
def test_bad_arguments(args: list[str]) -> None:
    res = envcheck(*args)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("envcheck") and "error:" in last
    assert res.stdout == ""


def test_check_json_is_valid_json_with_format_marker(check_json: subprocess.CompletedProcess[str]) -> None:
    data = json.loads(check_json.stdout)
    assert data["format"] == "envcheck-report" and data["schema_version"] == model.SCHEMA_VERSION


def test_terminal_rendering_of_a_failing_report() -> None:
    """The text a user reads: environment lines, the failing check with its fix, the captured output, the verdict."""
    import dataclasses
    import io

    from in_lang import print_checks, print_environment

    from envcheck.checks import evaluate
    from envcheck.model import known
    from envcheck.render.terminal.console import make_console

    base = model.load(ROOT / "tests" / "fixtures" / "torch" / "h200_check_report.json").environment
    sections = {k: dict(v) for k, v in base.sections.items()}
    sections["torch_runtime"].update(import_ok=known(False), error=known("crashed with SIGSEGV"),
                                     output_tail=known("Fatal Python error: Segmentation fault\n[bracketed] text"))
    env = dataclasses.replace(base, sections=sections)
    buf = io.StringIO()
    console = make_console(buf)
    print_environment(console, env)
    checks = evaluate(env)
    print_checks(console, checks, env.probe_s)
    text = buf.getvalue()
    assert "\x1b[" not in text
    assert "GPU 0    NVIDIA H200, 140.4 GiB, cc 9.0, 132 SMs" in text
    assert "`import torch` failed: crashed with SIGSEGV" in text
    assert "fix: python -X faulthandler" in text
    assert "torch.import output:" in text and "[bracketed] text" in text  # machine text is never read as markup
    passed = sum(c.status == "pass" for c in checks)
    assert [c.status for c in checks].count("fail") == 1 and passed >= 24
    assert text.rstrip().splitlines()[-1].startswith(f"FAIL: 1 failed, {passed} passed, 1 skipped in ")
