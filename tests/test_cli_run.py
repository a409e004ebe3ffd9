"""``envcheck run`` end to end: the real command on this machine, and the command with a
scripted worker for the paths a healthy machine never takes (crash, Ctrl-C, no torch).
Also the dated, never-overwriting report names (the terminal summary is tested in test_terminal.py)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from test_suite import cpu_env, with_facts

from envcheck import cli, model, reportname
from envcheck.commands import run as run_cmd
from envcheck.model import Check, known

FAKE = str(Path(__file__).with_name("fake_worker.py"))
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


def test_write_report_never_overwrites_and_respects_rendered_siblings(tmp_path):
    a = reportname.write_report(tmp_path, "s", "first")
    b = reportname.write_report(tmp_path, "s", "second")
    (tmp_path / "s-3.md").write_text("a rendering left by someone")
    c = reportname.write_report(tmp_path, "s", "third")
    assert [p.name for p in (a, b, c)] == ["s.json", "s-2.json", "s-4.json"]
    assert [p.read_text() for p in (a, b, c)] == ["first", "second", "third"]
    assert reportname.free_path(tmp_path, "s").name == "s-5.json"


# --------------------------------------------------------------------------- the command, scripted


def parse(*argv: str):
    return cli.build_parser().parse_args(["run", *argv])


class Recorder:
    """Fake renderer: writes the requested formats beside the JSON, like the real one."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, report, json_path, formats, lang="en", out_dir=None, force=False):
        self.calls.append((json_path, tuple(formats), lang))
        out = []
        for f in formats:
            p = json_path.with_suffix(f".{f}")
            model.write_new(p, f"{f} of {json_path.name}")
            out.append(p)
        return out


def deps(tmp_path: Path, steps: list | None, env=None, checks=()) -> run_cmd.Collaborators:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps if steps is not None else [{"play_plan": True}, {"emit": {"event": "done"}}]))
    return run_cmd.Collaborators(
        collect=lambda **kw: env if env is not None else cpu_env(),
        evaluate=lambda e: checks,
        new_report=lambda kind, e, c, b: model.Report("0.1.0", "2026-11-21T22:00:00Z", "box 1", kind, e, c, b),
        write_documents=Recorder(),
        worker_command=(sys.executable, FAKE, str(script)),
    )


def execute(args, d):
    out, err = io.StringIO(), io.StringIO()
    rc = run_cmd.execute(args, d, stderr=err, stdout=out)
    return rc, out.getvalue(), err.getvalue()


def reports_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def test_scripted_run_writes_a_dated_report_renders_it_and_prints_the_summary(tmp_path):
    out_dir = tmp_path / "reports"
    d = deps(tmp_path, None)
    rc, out, err = execute(parse("--quick", "--out-dir", str(out_dir), "--format", "json,html"), d)
    assert rc == 0, err
    (path,) = reports_in(out_dir)
    assert path.name.endswith("_box-1_cpu.json")
    r = model.load(path)
    assert r.kind == "run" and r.bench.device.backend == "cpu" and not r.bench.partial
    assert {c.op for c in r.bench.cases} == {"vector_add", "relu", "matmul", "softmax", "row_sum"}
    assert d.write_documents.calls == [(path, ("html",), "en")]
    assert str(path) in out and str(path.with_suffix(".html")) in out
    assert "Summary" in out and "vector_add" in out and "PyTorch is a CPU-only build (2.13.0+cpu)" in out
    assert "[1/" in err  # plain progress lines when stderr is not a terminal


def test_second_run_in_the_same_minute_does_not_overwrite(tmp_path):
    out_dir = tmp_path / "r"
    for _ in range(2):
        assert execute(parse("--quick", "--ops", "relu", "--out-dir", str(out_dir)), deps(tmp_path, None))[0] == 0
    names = [p.name for p in reports_in(out_dir)]
    assert len(names) == 2 and {n.replace("-2.json", ".json") for n in names} == {names[1]}
    assert len(list(out_dir.glob("*.md"))) == 2


def test_crash_writes_a_partial_report_and_exits_1(tmp_path):
    steps = [{"emit": {"event": "case_start", "i": 1, "n": 9, "label": "vector_add torch fp32 1024"}},
             {"stderr": "Fatal Python error: Segmentation fault"}, {"signal": "SIGSEGV"}]
    rc, out, err = execute(parse("--quick", "--out-dir", str(tmp_path / "r")), deps(tmp_path, steps))
    assert rc == 1
    r = model.load(reports_in(tmp_path / "r")[0])
    assert r.bench.partial and "crashed with SIGSEGV" in r.bench.interrupted
    assert r.bench.skipped and all("not run" in s.reason for s in r.bench.skipped)
    assert "PARTIAL RESULTS" in out and "crashed with SIGSEGV" in err


def test_ctrl_c_writes_the_partial_report_then_exits_130(tmp_path, monkeypatch):
    real = run_cmd.ProgressView.__call__

    def interrupting(self, ev):
        real(self, ev)
        if ev.get("event") == "case" and self.done == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(run_cmd.ProgressView, "__call__", interrupting)
    steps = [{"play_plan": 2}, {"sleep": 30}]
    rc, out, _ = execute(parse("--quick", "--ops", "relu", "--out-dir", str(tmp_path / "r")), deps(tmp_path, steps))
    assert rc == 130
    r = model.load(reports_in(tmp_path / "r")[0])
    assert r.bench.partial and r.bench.interrupted == "interrupted by the user (Ctrl-C) after 2 of 4 cases"
    assert len(r.bench.cases) == 2 and len(r.bench.skipped) == 2
    assert "PARTIAL RESULTS: interrupted by the user" in out


def test_failing_check_or_failing_case_exits_1(tmp_path):
    bad = (Check("driver.nvml", "fail", "NVML", "NVML cannot talk to the driver", fix="sudo reboot"),)
    rc, out, _ = execute(parse("--quick", "--ops", "relu", "--out-dir", str(tmp_path / "a")),
                         deps(tmp_path, None, checks=bad))
    assert rc == 1 and "FAIL" in out and "fix: sudo reboot" in out
    good = (Check("x", "warn", "W", "a warning"),)
    assert execute(parse("--quick", "--ops", "relu", "--out-dir", str(tmp_path / "b")),
                   deps(tmp_path, None, checks=good))[0] == 0


def test_without_torch_the_report_has_probes_checks_and_how_to_install(tmp_path):
    env = with_facts(cpu_env(), "torch", installed=known(False))
    rc, out, err = execute(parse("--out-dir", str(tmp_path / "r")), deps(tmp_path, [{"exit": 3}], env=env))
    assert rc == 1
    r = model.load(reports_in(tmp_path / "r")[0])
    assert r.bench.cases == () and any("pip install torch" in n for n in r.bench.notes)
    assert r.environment.get("torch", "installed") is False
    assert "pip install torch" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--format", "json,pdf"], "envcheck run: error: --format: unknown format 'pdf' (valid: json, md, html)"),
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
    assert r.kind == "run" and r.bench is not None and not r.bench.partial, r.bench.interrupted
    cuda = r.bench.device.backend == "cuda"
    ops = {c.op for c in r.bench.cases}
    assert ops == {"vector_add", "relu", "matmul", "softmax", "row_sum"}
    if not cuda:
        assert path.name.endswith("_cpu.json")
        assert {c.impl for c in r.bench.cases} == {"torch"}
        assert all(c.status == "pass" for c in r.bench.cases), [c.message for c in r.bench.cases]
        assert any("Triton and torch.compile were not measured" in n for n in r.bench.notes)
        assert first.returncode == (1 if r.verdict == "fail" else 0)
    else:
        assert {"torch", "triton"} <= {c.impl for c in r.bench.cases}
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert second.returncode in (0, 1), second.stderr
    assert len(reports_in(out_dir)) == 2
    assert model.load(path) == r  # the first report is untouched


def test_plain_progress_names_each_group_once():
    from envcheck.commands.run import ProgressView

    stream = io.StringIO()
    view = ProgressView(5, stream)
    for i, impl in enumerate(("torch", "triton", "compile")):
        view({"event": "case_start", "i": i, "n": 5, "label": f"vector_add fp32 1048576 {impl}"})
    for _ in range(3):
        view({"event": "case", "case": {}})
    for i, impl in enumerate(("torch", "triton"), start=3):
        view({"event": "case_start", "i": i, "n": 5, "label": f"relu fp32 1024 {impl}"})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("envcheck run: [1/5] vector_add fp32 1048576 (")
    assert lines[1].startswith("envcheck run: [4/5] relu fp32 1024 (")
