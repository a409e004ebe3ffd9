"""The worker runner against a scripted fake worker: normal runs, crashes, hangs, garbage, Ctrl-C."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from envcheck import model
from envcheck.bench import runner
from envcheck.bench.suite import Plan, PlannedCase
from envcheck.model import BenchDevice, Case, Ceiling, Skip, Timing

FAKE = str(Path(__file__).with_name("fake_worker.py"))

PLANNED = (
    PlannedCase("vector_add", "torch", "fp32", "fp32", (1024,)),
    PlannedCase("vector_add", "triton", "fp32", "fp32", (1024,)),
    PlannedCase("matmul", "torch", "fp32", "tf32", (512, 512, 512)),
    PlannedCase("matmul", "triton", "fp32", "tf32", (512, 512, 512)),
)
PLAN = Plan("cuda", 0, PLANNED, {"warmup_ms": 1, "rep_ms": 1, "min_samples": 1, "max_samples": 2,
                                 "cold_l2": True, "seed": 0},
            {"name": "NVIDIA H200", "theoretical_bandwidth_gbps": 4814.3},
            notes=("planned note",), recorded={"quick": True})
DEVICE = BenchDevice("cuda", "NVIDIA H200", 0, 132, 62914560, 150754820096, "9.0")
CEILING = Ceiling("bandwidth", "theoretical", 4814.3, "GB/s", "NVML: 2 x 3201 MHz x 6016 bit / 8")


def case_json(pc: PlannedCase, status: str = "pass") -> dict:
    c = Case(pc.op, pc.impl, pc.dtype, pc.precision, pc.shape, "small", 12288, 1024, status,
             gpu=Timing.from_samples("cuda_graph", [1.1, 1.2, 1.0]), tf32=pc.precision == "tf32")
    return model.to_dict(c)


def start() -> dict:
    return {"emit": {"event": "start", "device": model.to_dict(DEVICE), "versions": {"torch": "2.11.0+cu130",
                                                                                     "triton": "3.6.0"}}}


def run_script(tmp_path: Path, steps: list, timeout: float = 30.0, on_event=None, grace_s: float = 2.0):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    seen: list[dict] = []

    def record(ev):
        seen.append(ev)
        if on_event:
            on_event(ev)

    out = runner.run_worker(PLAN, record, timeout, command=[sys.executable, FAKE, str(script)], grace_s=grace_s)
    return out, seen


def play(cases, status="pass") -> list:
    steps = []
    for i, pc in enumerate(cases):
        steps.append({"emit": {"event": "case_start", "i": i + 1, "n": len(PLANNED), "label": pc.label}})
        steps.append({"emit": {"event": "case", "case": case_json(pc, status)}})
    return steps


def test_normal_run_collects_every_event_and_feeds_the_plan(tmp_path):
    saved = tmp_path / "plan.json"
    steps = [{"save_plan": str(saved)}, start(), {"emit": {"event": "ceiling", "ceiling": model.to_dict(CEILING)}},
             *play(PLANNED[:3]),
             {"emit": {"event": "skip", "skip": model.to_dict(Skip("matmul", "triton", "fp32", (512, 512, 512),
                                                                   "TF32 arithmetic: no tensor cores"))}},
             {"emit": {"event": "note", "text": "L2 flushed\nbetween samples"}},
             {"stderr": "compiler chatter"}, {"emit": {"event": "done"}}]
    out, seen = run_script(tmp_path, steps)
    assert json.loads(saved.read_text()) == PLAN.worker_input()
    assert not out.partial and out.interrupted is None and out.done and out.returncode == 0
    assert [c.key for c in out.cases] == [pc.key for pc in PLANNED[:3]]
    assert out.device == DEVICE and out.ceilings == [CEILING] and out.versions["triton"] == "3.6.0"
    assert out.skips[0].reason == "TF32 arithmetic: no tensor cores"
    assert out.notes == ["L2 flushed between samples"]
    assert out.stderr_tail == "compiler chatter"
    assert [e["event"] for e in seen].count("case_start") == 3 and seen[-1] == {"event": "done"}

    bench = runner.assemble(PLAN, out, "2026-11-21T22:00:00Z", 12.3456)
    assert bench.device == DEVICE and not bench.partial and bench.duration_s == 12.346
    assert bench.notes == ("planned note", "L2 flushed between samples")
    assert bench.settings["quick"] is True and bench.settings["rep_ms"] == 1
    assert len(bench.skipped) == 1  # the worker's own skip; nothing unrun
    r = model.Report("0.1.0", "2026-11-21T22:00:00Z", "h", "run", model.Environment(), bench=bench)
    assert model.loads(model.dumps(r)) == r


def test_crash_mid_way_keeps_finished_cases_and_names_the_signal(tmp_path):
    steps = [start(), *play(PLANNED[:2]),
             {"emit": {"event": "case_start", "i": 3, "n": 4, "label": PLANNED[2].label}},
             {"stderr": "Fatal Python error: Segmentation fault"}, {"signal": "SIGSEGV"}]
    out, _ = run_script(tmp_path, steps)
    assert out.partial and out.returncode == -signal.SIGSEGV
    assert out.interrupted == (f"benchmark worker crashed with SIGSEGV during {PLANNED[2].label!r} after 2 of 4 cases: "
                               "Fatal Python error: Segmentation fault")
    assert len(out.cases) == 2
    bench = runner.assemble(PLAN, out, "2026-11-21T22:00:00Z", 1.0)
    assert bench.partial and bench.interrupted == out.interrupted
    unrun = [s for s in bench.skipped if "not run" in s.reason]
    assert [(s.op, s.impl) for s in unrun] == [("matmul", "torch"), ("matmul", "triton")]
    assert unrun[0].reason == "TF32 arithmetic: not run: benchmark worker crashed with SIGSEGV during " \
                              f"{PLANNED[2].label!r}"


def test_nonzero_exit_before_done_is_a_crash_with_the_last_stderr_line(tmp_path):
    steps = [{"stderr": "Traceback (most recent call last):"}, {"stderr": "ImportError: libcudart.so.13"},
             {"exit": 1}]
    out, _ = run_script(tmp_path, steps)
    assert out.partial and out.interrupted == "benchmark worker exited with status 1 after 0 of 4 cases: " \
                                              "ImportError: libcudart.so.13"


def test_timeout_stops_a_hung_worker(tmp_path):
    steps = [start(), *play(PLANNED[:1]), {"sleep": 60}]
    t0 = time.monotonic()
    out, _ = run_script(tmp_path, steps, timeout=1.5, grace_s=1.0)
    assert time.monotonic() - t0 < 10
    assert out.partial and len(out.cases) == 1
    assert out.interrupted == "benchmark worker timed out after 1.5 s after 1 of 4 cases (raise --timeout)"
    assert out.returncode is not None  # reaped, not left running


def test_malformed_lines_are_ignored_with_a_note(tmp_path):
    steps = [start(), {"raw": "Triton autotuning for function matmul_kernel finished"}, {"raw": "{\"event\": 3}"},
             {"emit": {"event": "case", "case": {"op": "relu"}}}, *play(PLANNED), {"emit": {"event": "done"}}]
    out, _ = run_script(tmp_path, steps)
    assert not out.partial and len(out.cases) == 4
    assert len(out.notes) == 1
    assert out.notes[0].startswith("ignored 3 lines of benchmark worker output that were not protocol events: "
                                   "'Triton autotuning")


def test_ctrl_c_stops_the_worker_and_keeps_what_finished(tmp_path):
    def interrupt_at_third(ev):
        if ev["event"] == "case_start" and ev["i"] == 3:
            raise KeyboardInterrupt

    steps = [start(), *play(PLANNED[:2]), {"emit": {"event": "case_start", "i": 3, "n": 4, "label": "x"}},
             {"sleep": 60}]
    t0 = time.monotonic()
    out, _ = run_script(tmp_path, steps, on_event=interrupt_at_third, grace_s=1.0)
    assert time.monotonic() - t0 < 10
    assert out.by_user and out.partial and len(out.cases) == 2
    assert out.interrupted == "interrupted by the user (Ctrl-C) after 2 of 4 cases"
    assert out.returncode is not None and out.returncode < 0  # terminated by signal
    bench = runner.assemble(PLAN, out, "2026-11-21T22:00:00Z", 1.0)
    assert sum("not run: interrupted by the user (Ctrl-C)" in s.reason for s in bench.skipped) == 2


def test_worker_that_cannot_start_is_reported_not_raised(tmp_path):
    out = runner.run_worker(PLAN, lambda ev: None, 5, command=[str(tmp_path / "no-such-program")])
    assert out.partial and out.interrupted.startswith("benchmark worker could not start (FileNotFoundError")


def test_exit_description_names_signals_and_statuses():
    assert runner._exit_description(-11) == "crashed with SIGSEGV"
    assert runner._exit_description(-9) == "crashed with SIGKILL"
    assert runner._exit_description(3) == "exited with status 3"
    assert runner._exit_description(0) == "exited before finishing"


@pytest.mark.parametrize("device, name", [(None, "NVIDIA H200"), (DEVICE, "NVIDIA H200")])
def test_assemble_falls_back_to_the_planned_device(device, name):
    out = runner.BenchOutcome(device=device)
    assert runner.assemble(PLAN, out, "2026-11-21T22:00:00Z", 0.0).device.name == name


def test_worker_hanging_at_exit_after_done_is_stopped_and_the_run_is_complete(tmp_path):
    """CUDA teardown can hang a worker that has reported everything: after "done" it gets a short
    drain, then is stopped; the run is neither timed out nor partial."""
    steps = [start(), *play(PLANNED), {"emit": {"event": "done"}}, {"sleep": 60}]
    t0 = time.monotonic()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    out = runner.run_worker(PLAN, lambda ev: None, 8.0, command=[sys.executable, FAKE, str(script)], grace_s=1.0,
                            done_drain_s=0.5)
    assert time.monotonic() - t0 < 6  # well before the 8 s timeout
    assert out.done and not out.partial and out.interrupted is None and not out.by_user
    assert len(out.cases) == 4 and out.returncode is not None  # stopped and reaped
    assert any("did not exit after reporting all cases" in n for n in out.notes)
    bench = runner.assemble(PLAN, out, "2026-11-21T22:00:00Z", 1.0)
    assert not bench.partial and bench.interrupted is None and bench.skipped == ()


def test_worker_timing_out_after_done_is_not_partial(tmp_path):
    steps = [start(), *play(PLANNED), {"emit": {"event": "done"}}, {"sleep": 60}]
    out, _ = run_script(tmp_path, steps, timeout=1.5, grace_s=1.0)
    assert out.done and not out.partial and out.interrupted is None and len(out.cases) == 4


def test_a_skip_of_one_precision_leaves_the_other_precision_unrun():
    """matmul fp32 as TF32 skipped for memory, then a crash before the IEEE fp32 case: the IEEE
    case must still show as not run (it was neither a case nor a skip)."""
    shape = (8192, 8192, 8192)
    planned = (PlannedCase("matmul", "torch", "fp32", "tf32", shape),
               PlannedCase("matmul", "torch", "fp32", "fp32", shape))
    plan = Plan("cuda", 0, planned, dict(PLAN.settings), dict(PLAN.gpu))
    out = runner.BenchOutcome(skips=[Skip("matmul", "torch", "fp32", shape, "out of memory", precision="tf32")],
                              interrupted="benchmark worker crashed with SIGSEGV after 1 of 2 cases", partial=True)
    (unrun,) = runner.unrun_skips(plan, out)
    assert (unrun.op, unrun.dtype, unrun.precision, unrun.shape) == ("matmul", "fp32", "fp32", shape)
    assert unrun.reason == "not run: benchmark worker crashed with SIGSEGV"
    # The TF32 case left unrun is named with its precision too.
    out2 = runner.BenchOutcome(skips=[Skip("matmul", "torch", "fp32", shape, "oom", precision="fp32")],
                               interrupted="stopped after 1 of 2 cases", partial=True)
    (unrun2,) = runner.unrun_skips(plan, out2)
    assert unrun2.precision == "tf32" and unrun2.reason == "TF32 arithmetic: not run: stopped"
    # A skip that names no precision (older workers) still stands for every precision.
    legacy = runner.BenchOutcome(skips=[Skip("matmul", "torch", "fp32", shape, "oom")], interrupted="x", partial=True)
    assert runner.unrun_skips(plan, legacy) == []
