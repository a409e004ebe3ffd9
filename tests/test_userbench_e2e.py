"""``envcheck bench`` end to end on the CPU, with the real isolated worker: a user's failures
become failed cases with their cause while the rest is measured; the worked example runs its
Triton kernel under the interpreter and its report goes through ``render``, ``diff`` and
``history`` like any other."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
from pathlib import Path

import pytest

from envcheck import cli, model
from envcheck.bench import runner
from envcheck.commands import bench as bench_cmd
from envcheck.commands import run as run_cmd
from tests.test_suite import cpu_env

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def deps(host: str = "box") -> run_cmd.Collaborators:
    def new_report(kind, e, c, benches=(), **sections):
        return model.Report("0.1.0", "2026-11-25T22:00:00Z", host, kind, e, tuple(c), tuple(benches), **sections)

    return run_cmd.Collaborators(collect=lambda **kw: cpu_env(), evaluate=lambda e: (), new_report=new_report,
                                 worker_command=runner.WORKER_COMMAND)


def bench(tmp_path: Path, source: str, *extra: str, host: str = "box") -> tuple[int, model.Report, str]:
    out_dir = tmp_path / "reports"
    args = cli.parse(["bench", source, "--quick", "--out-dir", str(out_dir), "--format", "json",
                                          *extra])
    err, out = io.StringIO(), io.StringIO()
    rc = bench_cmd.execute(args, deps(host), stderr=err, stdout=out)
    (path,) = sorted(out_dir.glob("*.json"))
    return rc, model.load(path), err.getvalue()


def test_every_way_a_user_s_code_fails_is_that_case_s_failure_and_the_rest_is_measured(tmp_path):
    # The hanging case waits out its whole limit; every other case is a 256-element op that takes milliseconds.
    rc, report, err = bench(tmp_path, str(ROOT / "tests" / "userbench_files" / "hazards.py"), "--case-timeout", "15")
    assert rc == 1  # failed cases: the exit status says so
    cases = {(c.op, c.impl): c for c in report.bench.cases}
    assert len(cases) == 14 and not report.bench.skipped and report.bench.stop is None
    for op in ("fine", "raises", "lazy_import", "crashes", "hangs", "wrong_shape"):
        assert cases[(op, "torch")].measured, op  # the baseline of every group still measured
    assert cases[("fine", "bad")].measured
    failure = {op: cases[(op, "bad")].failure for op in ("raises", "lazy_import", "crashes", "hangs", "wrong_shape")}
    assert (failure["raises"].stage, failure["raises"].detail) == ("first_call", "RuntimeError: kernel exploded")
    assert failure["lazy_import"].detail == "ModuleNotFoundError: No module named 'no_such_module_for_envcheck'"
    assert (failure["crashes"].stage, failure["crashes"].detail) == ("crash", "about to die")
    assert (failure["hangs"].stage, failure["hangs"].detail) == ("hang", "no result within 15 s")
    assert failure["wrong_shape"].stage == "check" and "reference of shape (256,)" in failure["wrong_shape"].detail
    for impl in ("torch", "bad"):
        assert cases[("bad_inputs", impl)].failure.detail == "ValueError: no inputs today"
    assert "Traceback" not in err
    from envcheck.analysis import analyse

    statuses = {(r.case.op, r.case.impl): r.status for r in analyse(report).bench.results}
    assert statuses[("fine", "bad")] == "pass" and statuses[("crashes", "bad")] == "error"


def test_the_worked_example_end_to_end_and_its_report_renders_diffs_and_has_a_history(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    rc, report, err = bench(tmp_path, str(ROOT / "examples" / "softmax_wsum.py"))
    from envcheck.analysis import analyse

    results = list(analyse(report).bench.results)
    assert {(r.case.impl, r.case.dtype) for r in results} == {(i, d) for i in ("torch", "triton")
                                                             for d in ("fp32", "fp16")}
    assert all(r.status == "pass" for r in results), [(r.case.key, r.case.failure, r.verdict) for r in results]
    assert rc == 0, err
    triton = [r for r in results if r.case.impl == "triton"]
    # Triton ran in its interpreter (TRITON_INTERPRET=1 on a CPU): judged against torch, never given a speedup.
    assert triton and all(r.verdict.relative is not None and r.interpreted and r.speedup is None for r in triton)
    assert all(r.traffic.bytes == (2 * r.case.shape[0] * r.case.shape[1] + r.case.shape[0]) *
               (4 if r.case.dtype == "fp32" else 2) for r in results)
    # Interpreted kernels are checked, not timed: a rate only where something was timed.
    assert all(bool(r.gbps) != r.interpreted for r in results)
    assert report.bench.ops[0].name == "softmax_wsum"

    (first,) = sorted((tmp_path / "reports").glob("*.json"))
    second = tmp_path / "reports" / "2026-11-26_0000Z_box_cpu.json"
    shutil.copy(first, second)
    for argv in (["render", str(first), "--format", "md,html"],
                 ["diff", str(first), str(second), "--format", "md", "--out", str(tmp_path / "d.md")],
                 ["history", str(first), str(second), "--format", "md", "--out", str(tmp_path / "h.md")]):
        assert cli.main(argv) == 0, argv
    for written in (first.with_suffix(".md"), first.with_suffix(".html"), tmp_path / "d.md", tmp_path / "h.md"):
        assert "softmax_wsum" in written.read_text().replace("\\_", "_"), written  # Markdown escapes _
    # Every case matched its copy; torch's were timed on the host only (a CPU) with no floor learned: not judged.
    said = (tmp_path / "d.md").read_text()
    # The interpreted Triton rows were checked, not timed: nothing to compare; torch's rows have no floor.
    assert "4 not comparable" in said and "4 not judged: no noise floor" in said


def test_anonymize_leaves_no_host_name_in_a_bench_report(tmp_path, monkeypatch):
    """The host is replaced in the report and its renders, and the same key gives the same pseudonym again."""
    host = "qzhostbench"
    src = tmp_path / "my_ops.py"
    src.write_text("import torch\nfrom envcheck.userbench import Op\n\n"
                   "def inputs(shape, dtype, device, generator):\n"
                   "    return (torch.randn(*shape, generator=generator, device=device).to(dtype),)\n\n"
                   "OPS = [Op(name='twice', impls={'torch': lambda x: x * 2, 'mine': lambda x: x + x},\n"
                   "          reference=lambda x: x * 2, inputs=inputs, shapes=[(256,)], bytes=lambda s, d: 8 * s[0])]\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    rc, plain, _ = bench(tmp_path / "plain", str(src), host=host)
    assert rc == 0 and plain.host == host and not plain.anonymized
    rc, report, err = bench(tmp_path, str(src), "--anonymize", "--format", "json,md,html", host=host)
    assert rc == 0, err
    assert report.anonymized and report.host.startswith("host-")
    assert report.bench.ops[0].name == "twice" and all(c.measured for c in report.bench.cases)
    rendered = [p for p in (tmp_path / "reports").iterdir() if p.is_file()]
    assert {p.suffix for p in rendered} == {".json", ".md", ".html"}
    for path in rendered:
        assert host not in path.name and host not in path.read_text(encoding="utf-8"), path.name
    # Another --anonymize run reads the key the first one kept (command_key, as bench does): the same pseudonym.
    from envcheck.anonymize import command_key, for_this_machine

    assert for_this_machine(host, command_key()).host(host) == report.host


LEAKY = '''
import os, subprocess, sys
import torch
from envcheck.userbench import Op


def inputs(shape, dtype, device, generator):
    return (torch.randn(*shape, generator=generator, device=device).to(dtype),)


def _leak(x):
    raise RuntimeError("token " + os.environ.get("HF_TOKEN", SECRET) + " refused\\nsecond line")


def _say_and_die(x):
    print("HF_TOKEN=" + os.environ.get("HF_TOKEN", SECRET), file=sys.stderr, flush=True)
    os._exit(3)


def _leave_a_daemon(x):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    with open(PID_FILE, "a") as f:
        f.write(f"{child.pid}\\n")
    return x * 2


def _op(name, bad):
    return Op(name=name, impls={"torch": lambda x: x * 2, "bad": bad}, reference=lambda x: x * 2, inputs=inputs,
              shapes=[(256,)], bytes=lambda s, d: 8 * s[0])


OPS = [_op("leaks", _leak), _op("dies", _say_and_die), _op("daemon", _leave_a_daemon)]
'''
SECRET = "s3cr3t-value-of-the-token-0123456789"


def test_a_user_s_code_quoting_a_secret_or_leaving_a_daemon_reaches_no_report_and_outlives_nothing(
        tmp_path, monkeypatch):
    """Issue 36, items 3 and 4 end to end: the secret (which the worker never gets, and quotes from elsewhere)
    is in no file of the report set, and every process an implementation left in a session of its own is
    gone when ``bench`` returns."""
    monkeypatch.setenv("HF_TOKEN", SECRET)
    pid_file = tmp_path / "daemons.pid"
    source = tmp_path / "leaky.py"
    source.write_text(f"PID_FILE = {str(pid_file)!r}\nSECRET = {SECRET[:9]!r} + {SECRET[9:]!r}\n" + LEAKY)
    try:
        rc, report, err = bench(tmp_path, str(source), "--format", "json,md,html,junit")
        cases = {(c.op, c.impl): c for c in report.bench.cases}
        assert cases[("leaks", "bad")].failure.detail == "RuntimeError: token <redacted> refused"
        assert cases[("dies", "bad")].failure.detail == "HF_TOKEN=<redacted>"
        assert cases[("daemon", "bad")].measured
        written = [p for p in (tmp_path / "reports").rglob("*") if p.is_file()]
        assert {p.suffix for p in written} >= {".json", ".md", ".html", ".xml"}
        assert not [p.name for p in written if SECRET in p.read_text(errors="replace")]
        assert SECRET not in err
        import psutil

        for pid in map(int, pid_file.read_text().split()):
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid
    finally:
        for pid in map(int, pid_file.read_text().split() if pid_file.exists() else []):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
