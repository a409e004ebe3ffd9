"""``envcheck run --repeat N`` and ``--control``: N independent repeats kept in one report (each a
fresh worker, the sample cap shared), merged without losing a failure; the positive control's
kernel (4% more bytes, the same result) and its record in the report."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_run import deps, execute, parse, reports_in

from envcheck import cli, model
from envcheck.bench import runner as repeat
from envcheck.bench.runner import BenchOutcome
from envcheck.model import Accuracy, Case, Failure, MonitorWindow, Note, ReportError, Settings, Stop, StopCause, Timing

ROOT = Path(__file__).resolve().parents[1]


def case(samples, *, rel=0.0, window=None, failure=None, notes=()) -> Case:
    if failure is not None:
        return Case("relu", "torch", "fp32", "fp32", (1024,), failure=failure)
    return Case("relu", "torch", "fp32", "fp32", (1024,), gpu=Timing("cuda_graph", samples),
                launch=Timing("cuda_events", [x * 2 for x in samples]), accuracy=Accuracy(rel, rel),
                window=window, notes=notes)


# --------------------------------------------------------------------------- merging


def test_repeats_join_in_order_with_each_repeats_count_and_the_worst_error():
    merged = repeat.merge_cases([(1, case([1.0, 1.1], rel=1e-7, notes=(Note("a"),))),
                                 (2, case([2.0, 2.1, 2.2], rel=1e-3, notes=(Note("a"), Note("b"))))])
    assert list(merged.gpu.samples_us) == pytest.approx([1.0, 1.1, 2.0, 2.1, 2.2])
    assert merged.gpu.passes == (2, 3) and merged.launch.passes == (2, 3)
    assert merged.accuracy.rel_l2 == pytest.approx(1e-3)  # a verdict never passes what failed once
    assert merged.notes == (Note("a"), Note("b"))


def test_a_repeat_that_failed_is_a_note_on_the_case_measured_in_the_others():
    merged = repeat.merge_cases([(1, case([1.0, 1.1])), (2, case(None, failure=Failure("sample", "boom"))),
                                 (3, case([1.2, 1.3]))])
    assert merged.gpu.passes == (2, 2)
    assert Note("case.repeat_failed", {"repeat": 2, "stage": "sample"}) in merged.notes
    only_failed = repeat.merge_cases([(1, case(None, failure=Failure("compile", "x")))])
    assert only_failed.failure == Failure("compile", "x")


def test_merged_outcomes_keep_every_window_and_point_each_case_at_its_first_repeats():
    w = MonitorWindow(0.1, [0.0, 0.1])
    one = BenchOutcome(cases=[case([1.0, 1.1], window=0)], windows=[w], done=True)
    two = BenchOutcome(cases=[case([1.2, 1.3], window=0)], windows=[w], done=True)
    merged = repeat.merge([one, two])
    assert len(merged.windows) == 2 and merged.cases[0].window == 0 and merged.done
    stopped = BenchOutcome(cases=[case([1.2], window=0)], windows=[w], stop=Stop(StopCause.USER))
    assert repeat.merge([one, stopped]).stop == Stop(StopCause.USER)


# --------------------------------------------------------------------------- the report


def test_passes_round_trip_and_a_wrong_split_is_refused_at_load(tmp_path):
    t = Timing("cuda_graph", [1.0, 2.0, 3.0], 1, (1, 2))
    with pytest.raises(ValueError, match="add up"):
        Timing("cuda_graph", [1.0, 2.0, 3.0], 1, (1, 1))
    r = model.loads(model.dumps(_report_with(t)))
    assert r.benches[0].cases[0].gpu.passes == (1, 2)
    bad = json.loads(model.dumps(_report_with(t)))
    bad["benches"][0]["cases"][0]["gpu"]["passes"] = [2, 2]
    with pytest.raises(ReportError, match="passes"):
        model.loads(json.dumps(bad))
    bad["benches"][0]["cases"][0]["gpu"]["passes"] = [1, 2]
    bad["benches"][0]["settings"]["control"] = "make_it_fast"
    with pytest.raises(ReportError, match="control"):
        model.loads(json.dumps(bad))


def _report_with(t: Timing) -> model.Report:
    from test_suite import cpu_env

    bench = model.Bench(model.BenchDevice("cpu", "cpu"), Settings(repeat=2, control="vector_add_extra_bytes"),
                        cases=(dataclasses.replace(case([1.0]), gpu=t, launch=None),))
    return model.Report("0.1.0", "2026-11-25T22:00:00Z", "box", "run", cpu_env(), (), (bench,))


# --------------------------------------------------------------------------- envcheck run --repeat


def test_run_repeat_keeps_every_repeat_of_every_case_in_one_report(tmp_path):
    out_dir = tmp_path / "r"
    plans = tmp_path / "plans"
    plans.mkdir()
    steps = [{"pid_file": str(plans / "{pid}.pid")}, {"save_plan": str(tmp_path / "plan.json")},
             {"play_plan": True}, {"done": {}}]
    rc, _, err = execute(parse("--quick", "--ops", "relu", "--repeat", "3", "--out-dir", str(out_dir)),
                         deps(tmp_path, steps))
    assert rc == 0, err
    assert "3 independent repeats" in err
    assert len(list(plans.glob("*.pid"))) == 3  # a fresh worker for each repeat
    r = model.load(reports_in(out_dir)[0])
    b = r.benches[0]
    assert b.settings.repeat == 3
    sent = json.loads((tmp_path / "plan.json").read_text())["settings"]
    assert sent["max_samples"] == b.settings.max_samples and sent["repeat"] == 3
    assert b.cases and all(c.launch.passes == (5, 5, 5) for c in b.cases)
    assert len({c.key for c in b.cases}) == len(b.cases)


def test_a_repeat_that_stops_ends_the_repeats_and_keeps_what_finished(tmp_path):
    steps = [{"play_plan": 1}, {"exit": 3}]
    rc, _, err = execute(parse("--quick", "--ops", "relu", "--repeat", "3", "--out-dir", str(tmp_path / "r")),
                         deps(tmp_path, steps))
    assert rc == 1
    r = model.load(reports_in(tmp_path / "r")[0])
    assert r.benches[0].stop is not None and len(r.benches[0].cases) == 1
    assert r.benches[0].cases[0].launch.passes == ()  # only the first repeat ran


@pytest.mark.parametrize("value", ["0", "x", "21", "-1"])
def test_a_bad_repeat_count_is_one_line_and_exit_2(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--repeat", value, "--out-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--repeat" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_repeat_with_several_gpus_is_refused(tmp_path, capsys):
    rc = cli.main(["run", "--repeat", "2", "--gpus", "all", "--out-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and "--repeat" in err and err.count("\n") == 1


def test_the_control_is_recorded_in_the_report_and_shows_in_a_diff(tmp_path):
    from envcheck.compare import diff

    out_a, out_b = tmp_path / "a", tmp_path / "b"
    assert execute(parse("--quick", "--ops", "relu", "--out-dir", str(out_a)), deps(tmp_path, None))[0] == 0
    assert execute(parse("--quick", "--ops", "relu", "--control", "vector_add_extra_bytes", "--out-dir", str(out_b)),
                   deps(tmp_path, None))[0] == 0
    a, b = model.load(reports_in(out_a)[0]), model.load(reports_in(out_b)[0])
    assert a.benches[0].settings.control is None
    assert b.benches[0].settings.control == "vector_add_extra_bytes"
    cmp = diff.diff([("a.json", a), ("b.json", b)]).comparisons[0]
    assert "setting.control" in {e.key for e in cmp.env}


# --------------------------------------------------------------------------- the control's kernel

_CHILD = """
import json, math, torch
from envcheck.bench.kernels.vector_add import vector_add, extra_buffer, EXTRA_SHARE
out = {}
for dt in (torch.float32, torch.float16, torch.bfloat16):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1025, generator=g).to(dt); y = torch.randn(1025, generator=g).to(dt)
    plain = vector_add(x, y, torch.full_like(x, float("nan")))
    e = extra_buffer(x)
    slow = vector_add(x, y, torch.full_like(x, float("nan")), e)
    out[str(dt)] = {"same": bool(torch.equal(plain, slow)), "extra": e.numel(),
                    "want": math.ceil(1025 * EXTRA_SHARE), "finite": bool(torch.isfinite(slow).all())}
print(json.dumps(out))
"""


def test_the_positive_controls_kernel_reads_twelve_percent_more_elements_and_gives_the_same_result():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, text=True, capture_output=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for dt, r in got.items():
        assert r["same"] and r["finite"], dt  # bit for bit the plain kernel's output, every element written
        assert r["extra"] == r["want"] == math.ceil(1025 * 0.12)


@pytest.mark.parametrize("control", [None, "vector_add_extra_bytes"])
def test_the_worker_binds_the_control_only_in_a_run_that_set_it(monkeypatch, control):
    from types import SimpleNamespace

    from envcheck.bench import group, impls
    from envcheck.bench.code import BuiltinCode
    from envcheck.bench.suite import PlannedCase

    seen = []
    monkeypatch.setattr(impls, "triton_impl", lambda *a, **kw: seen.append(kw) or (lambda: None))
    settings = Settings(control=control)
    # The runtime hands out the op's code with the run's control, as Runtime.code does.
    rt = SimpleNamespace(settings=settings, code=lambda op: BuiltinCode(op, settings.control))
    g = SimpleNamespace(inputs={}, out=None, extra_sets=[({}, None)])
    group._bound(rt, PlannedCase("vector_add", "triton", "fp32", "fp32", (1024,)), g)
    assert seen == [{"control": control}] * 2 if control else seen == [{}, {}]


def test_the_command_line_offers_exactly_the_controls_the_model_knows():
    from envcheck.model.bench import CONTROLS

    run = next(a for a in cli.build_parser()._subparsers._group_actions[0].choices["run"]._actions
               if a.dest == "control")
    assert tuple(run.choices) == CONTROLS
