"""``envcheck run`` end to end: the real command on this machine, and the command with a
scripted worker for the paths a healthy machine never takes (crash, Ctrl-C, no torch).
Also the dated, never-overwriting report names (the terminal summary is tested in test_terminal.py)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from fake_worker import command
from test_suite import cpu_env, with_facts

from envcheck import cli, model, reportname
from envcheck.checks.said import said
from envcheck.commands import publish as publish_cmd
from envcheck.commands import run as run_cmd
from envcheck.model import Check, StopCause, known

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- report names


def test_stamp_is_utc_to_the_minute():
    when = datetime(2026, 11, 21, 23, 15, 59, tzinfo=timezone.utc)
    assert reportname.stamp(when) == "2026-11-21_2315Z"


def test_stem_sanitises_host_and_gpu():
    when = datetime(2026, 11, 21, 22, 15, tzinfo=timezone.utc)
    assert reportname.report_stem(when, "GPU Box/1 (lab)", "NVIDIA GeForce RTX 4090") == \
        "2026-11-21_2215Z_gpu-box-1-lab_rtx-4090"
    assert reportname.report_stem(when, "", None) == "2026-11-21_2215Z_host_cpu"
    assert reportname.device_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert reportname.slug("../../etc", fallback="x") == "etc"


def test_a_node_run_is_named_for_its_gpus_not_like_one_gpu_s_run():
    when = datetime(2026, 11, 28, 20, 58, tzinfo=timezone.utc)
    assert reportname.node_stem(when, "vm", ["NVIDIA H200"] * 4) == "2026-11-28_2058Z_vm_4x-h200_node"
    assert reportname.node_stem(when, "vm", ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]) == "2026-11-28_2058Z_vm_2x-gpus_node"


def test_write_outputs_names_a_node_report_for_its_gpus(tmp_path):
    from envcheck.model import load

    node = load(Path(__file__).resolve().parent.parent / "evidence" / "2026-11-28_2058Z_vm_4x-h200_node_quick.json.gz")
    when = datetime(2026, 11, 29, 1, 2, tzinfo=timezone.utc)
    written = publish_cmd.publish(node, None, tmp_path, [], when, None, None, "run").written
    assert [p.name for p in written] == ["2026-11-29_0102Z_vm_4x-h200_node.json"]


def test_write_report_never_overwrites_and_respects_rendered_siblings(tmp_path):
    a = reportname.write_report(tmp_path, "s", "first")
    b = reportname.write_report(tmp_path, "s", "second")
    (tmp_path / "s-3.md").write_text("a rendering left by someone")
    c = reportname.write_report(tmp_path, "s", "third")
    assert [p.name for p in (a, b, c)] == ["s.json", "s-2.json", "s-4.json"]
    assert [p.read_text() for p in (a, b, c)] == ["first", "second", "third"]
    assert reportname.write_report(tmp_path, "s", "fourth").name == "s-5.json"


# --------------------------------------------------------------------------- the command, scripted


def parse(*argv: str):
    return cli.parse(["run", *argv])


def deps(tmp_path: Path, steps: list | None, env=None, checks=()) -> run_cmd.Collaborators:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps if steps is not None else [{"play_plan": True}, {"done": {}}]))

    def new_report(kind, e, c, benches=(), **sections):
        return model.Report("0.1.0", "2026-11-21T22:00:00Z", "box 1", kind, e, tuple(c), tuple(benches), **sections)

    return run_cmd.Collaborators(
        collect=lambda **kw: env if env is not None else cpu_env(),
        evaluate=lambda e: checks,
        new_report=new_report,
        worker_command=command(script),
    )


def execute(args, d):
    out, err = io.StringIO(), io.StringIO()
    rc = run_cmd.execute(args, d, stderr=err, stdout=out)
    return rc, out.getvalue(), err.getvalue()


def reports_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def test_scripted_run_writes_a_dated_report_renders_it_and_prints_the_summary(tmp_path):
    out_dir = tmp_path / "reports"
    rc, out, err = execute(parse("--quick", "--out-dir", str(out_dir), "--format", "json,html"), deps(tmp_path, None))
    assert rc == 0, err
    (path,) = reports_in(out_dir)
    assert path.name.endswith("_box-1_cpu.json")
    r = model.load(path)
    assert r.kind == "run" and r.bench.device.backend == "cpu" and not r.bench.partial
    assert {c.op for c in r.bench.cases} == {"vector_add", "relu", "matmul", "softmax", "row_sum"}
    assert path.with_suffix(".html").exists() and not path.with_suffix(".md").exists()
    assert str(path) in out and str(path.with_suffix(".html")) in out
    assert "vector_add" in out and "2.13.0+cpu" in out
    assert "[1/" in err  # plain progress lines when stderr is not a terminal


def test_a_run_analyses_its_report_once_for_the_documents_the_summary_and_the_exit_status(tmp_path, monkeypatch):
    import envcheck.analysis

    calls = []

    def counted(report):
        calls.append(report)
        return real(report)

    real = envcheck.analysis.analyse
    monkeypatch.setattr(envcheck.analysis, "analyse", counted)
    rc, _, err = execute(parse("--quick", "--ops", "relu", "--out-dir", str(tmp_path / "r"), "--format", "json,md,html"),
                         deps(tmp_path, None))
    assert rc == 0, err
    assert len(calls) == 1


def test_second_run_in_the_same_minute_does_not_overwrite(tmp_path):
    out_dir = tmp_path / "r"
    for _ in range(2):
        assert execute(parse("--quick", "--ops", "relu", "--out-dir", str(out_dir)), deps(tmp_path, None))[0] == 0
    names = [p.name for p in reports_in(out_dir)]
    assert len(names) == 2 and {n.replace("-2.json", ".json") for n in names} == {names[1]}
    assert len(list(out_dir.glob("*.md"))) == 2


def test_crash_writes_a_partial_report_and_exits_1(tmp_path):
    steps = [{"stderr": "Fatal Python error: Segmentation fault"}, {"signal": "SIGSEGV"}]
    rc, out, err = execute(parse("--quick", "--out-dir", str(tmp_path / "r")), deps(tmp_path, steps))
    assert rc == 1
    r = model.load(reports_in(tmp_path / "r")[0])
    assert r.bench.partial and r.bench.stop.cause is StopCause.CRASHED and r.bench.stop.signal == "SIGSEGV"
    assert r.bench.skipped and all(s.reason.key == "skip.not_run" for s in r.bench.skipped)
    assert "SIGSEGV" in out and "crashed" in err


def test_ctrl_c_writes_the_partial_report_then_exits_130(tmp_path, monkeypatch):
    real = run_cmd.ProgressView.__call__

    def interrupting(self, ev):
        real(self, ev)
        if self.done == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(run_cmd.ProgressView, "__call__", interrupting)
    steps = [{"play_plan": 2}, {"sleep": 30}]
    rc, out, _ = execute(parse("--quick", "--ops", "relu", "--out-dir", str(tmp_path / "r")), deps(tmp_path, steps))
    assert rc == 130
    r = model.load(reports_in(tmp_path / "r")[0])
    assert r.bench.stop.cause is StopCause.USER and (r.bench.stop.finished, r.bench.stop.planned) == (2, 5)
    assert len(r.bench.cases) == 2 and len(r.bench.skipped) == 3


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_to_envcheck_run_writes_the_partial_report_and_stops_the_worker(tmp_path, sig):
    """What a batch scheduler (SIGTERM) or a closed ssh session (SIGHUP) does: the real command, signalled."""
    pid_file = tmp_path / "worker.pid"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"pid_file": str(pid_file)}, {"play_plan": 1}, {"sleep": 60}]))
    code = ("import sys, json\n"
            "from test_suite import cpu_env\n"
            "from envcheck.commands import run as r\n"
            "from envcheck import cli, model\n"
            "from fake_worker import command\n"
            f"d = r.Collaborators(collect=lambda **kw: cpu_env(), evaluate=lambda e: (), "
            f"new_report=lambda k, e, c, benches=(), **s: model.Report('0', 't', 'h', k, e, tuple(c), tuple(benches), **s), "
            f"worker_command=command({str(script)!r}))\n"
            f"sys.exit(r.execute(cli.parse(['run', '--quick', '--ops', 'relu', '--out-dir', "
            f"{str(tmp_path / 'r')!r}, '--format', 'json']), d))\n")
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    r = model.load(reports_in(tmp_path / "r")[0])
    assert r.bench.stop.cause is StopCause.SIGNAL and r.bench.stop.signal == signal.Signals(sig).name
    worker = int(pid_file.read_text())
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)


def test_a_refused_out_dir_falls_back_and_says_where(tmp_path, monkeypatch):
    out_dir = tmp_path / "r"
    fallback = tmp_path / "state"
    monkeypatch.setattr(publish_cmd, "fallback_dirs", lambda: [fallback])
    real = reportname.write_report

    def full_disk(folder, stem, content):
        if folder == out_dir:
            raise OSError(28, "No space left on device")
        return real(folder, stem, content)

    monkeypatch.setattr(reportname, "write_report", full_disk)
    rc, out, err = execute(parse("--quick", "--ops", "relu", "--out-dir", str(out_dir), "--format", "json"),
                           deps(tmp_path, None))
    assert rc == 0, err
    (path,) = reports_in(fallback)
    assert f"saved it in {fallback}" in err and "No space left on device" in err
    assert not list(out_dir.glob("*")) and model.load(path).bench.cases


def test_nowhere_to_write_puts_the_json_on_stdout(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(publish_cmd, "fallback_dirs", lambda: [])

    def refuse(folder, stem, content):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(reportname, "write_report", refuse)
    report = model.Report("0", "t", "h", "run", cpu_env())
    assert publish_cmd.save_json(report, tmp_path, "s", io.StringIO()) is None
    assert model.loads(capsys.readouterr().out) == report


def test_failing_check_or_failing_case_exits_1(tmp_path):
    # As every rule says it now: keys and parameters (a check without them is re-said from the facts).
    bad = (said("driver.nvml", "fail", "nvml.cannot_start", "cmd", err="NVML cannot talk to the driver",
                cmd="sudo reboot"),)
    rc, out, _ = execute(parse("--quick", "--ops", "relu", "--out-dir", str(tmp_path / "a")),
                         deps(tmp_path, None, checks=bad))
    assert rc == 1 and "FAIL" in out and "sudo reboot" in out
    good = (Check("x", "warn", "W", "a warning"),)
    assert execute(parse("--quick", "--ops", "relu", "--out-dir", str(tmp_path / "b")),
                   deps(tmp_path, None, checks=good))[0] == 0


def test_without_torch_the_report_has_probes_checks_and_how_to_install(tmp_path):
    env = with_facts(cpu_env(), "torch", installed=known(False))
    rc, out, err = execute(parse("--out-dir", str(tmp_path / "r")), deps(tmp_path, [{"exit": 3}], env=env))
    assert rc == 1
    r = model.load(reports_in(tmp_path / "r")[0])
    assert r.bench.cases == () and [n.key for n in r.bench.notes] == ["bench.no_torch"]
    assert r.environment.get("torch", "installed") is False
    assert "pip install torch" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--format", "json,pdf"], "envcheck run: error: --format: unknown format 'pdf' (valid: json, md, html, junit, prometheus)"),
        (["--ops", "gemm"], "envcheck run: error: --ops: unknown op 'gemm'"),
        (["--sizes", "abc"], "envcheck run: error: --sizes: 'abc' is not a size"),
        (["--dtypes", "int8"], "envcheck run: error: --dtypes: unknown dtype 'int8'"),
    ],
)
def test_bad_options_fail_fast_with_one_line(tmp_path, capsys, argv, message):
    rc = cli.main(["run", "--out-dir", str(tmp_path / "r"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(message) and err.count("\n") == 1
    assert not reports_in(tmp_path / "r") if (tmp_path / "r").exists() else True


@pytest.mark.parametrize("gpus", ["0,x", "", "-1", "0,,"])
def test_a_malformed_gpus_list_is_refused_before_probing(tmp_path, capsys, monkeypatch, gpus):
    monkeypatch.setattr(run_cmd, "collaborators", lambda: pytest.fail("probed before --gpus was checked"))
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--gpus", gpus, "--out-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("envcheck run: error: argument --gpus: ") and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_out_dir_that_is_a_file_is_refused(tmp_path, capsys):
    f = tmp_path / "taken"
    f.write_text("a user's file")
    assert cli.main(["run", "--out-dir", str(f)]) == 2
    assert capsys.readouterr().err == f"envcheck run: error: --out-dir: {f} is a file, not a folder\n"
    assert f.read_text() == "a user's file"


# --------------------------------------------------------------------------- the real command


@pytest.mark.slow
def test_real_quick_run_on_this_machine(tmp_path):
    """``envcheck run --quick`` for real: probes, the real worker, the real renderers.

    On a machine without a CUDA GPU it measures PyTorch on the CPU and says why Triton was
    not measured; on a GPU machine it measures all three implementations.
    """
    out_dir = tmp_path / "reports"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "envcheck", "run", "--quick", "--out-dir", str(out_dir)]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert first.returncode in (0, 1), first.stderr
    assert "Traceback" not in first.stderr, first.stderr
    (path,) = reports_in(out_dir)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}_\d{4}Z_[a-z0-9.-]+_[a-z0-9.-]+\.json", path.name), path.name
    r = model.load(path)
    assert r.kind == "run" and r.bench is not None and not r.bench.partial, r.bench.stop
    cuda = r.bench.device.backend == "cuda"
    ops = {c.op for c in r.bench.cases}
    assert ops == {"vector_add", "relu", "matmul", "softmax", "row_sum"}
    if not cuda:
        assert path.name.endswith("_cpu.json")
        assert {c.impl for c in r.bench.cases} == {"torch"}
        from envcheck.analysis import analyse

        assert all(x.status == "pass" for x in analyse(r).bench.results)
        assert "bench.cpu_baseline" in [n.key for n in r.bench.notes]
        assert first.returncode == (1 if r.verdict == "fail" else 0)
    else:
        assert {"torch", "triton"} <= {c.impl for c in r.bench.cases}
    # A second run beside it writes a report of its own: test_second_run_in_the_same_minute_does_not_overwrite.


def test_plain_progress_counts_every_case():
    """Issue 38 item 6: the count jumped [1/8], [3/8], [5/8] (one line per group of implementations)."""
    from envcheck.bench.protocol import CaseStarted, Measured
    from envcheck.bench.suite import PlannedCase
    from envcheck.commands.run import ProgressView

    stream = io.StringIO()
    view = ProgressView(5, stream)
    started = []
    for i, impl in enumerate(("torch", "triton", "compile")):
        c = PlannedCase("vector_add", impl, "fp32", "fp32", (1 << 20,))
        started.append(c)
        view(CaseStarted(i, 5, c))
    for c in started:
        view(Measured(c.failed("run", "x")))
    for i, impl in enumerate(("torch", "triton"), start=3):
        view(CaseStarted(i, 5, PlannedCase("relu", impl, "fp32", "fp32", (1024,))))
    lines = stream.getvalue().splitlines()
    assert [ln.split("]")[0].split("[")[1] for ln in lines] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
    assert lines[1].startswith("envcheck run: [2/5] vector_add fp32 ") and " triton (" in lines[1]
    assert lines[4].startswith("envcheck run: [5/5] relu fp32 1") and " triton (" in lines[4]
