"""The worker runner against a scripted fake worker: normal runs, crashes, hangs, garbage,
Ctrl-C, SIGTERM / SIGHUP to ``envcheck run`` itself, and the Bench assembled from it all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from fake_worker import command

from envcheck import model
from envcheck.bench import protocol, runner
from envcheck.bench.suite import GPU_QUICK_SETTINGS, Plan, PlannedCase
from envcheck.model import BenchDevice, Case, CeilingRun, MonitorWindow, Note, Skip, StopCause, Timing

ROOT = Path(__file__).resolve().parents[1]

PLANNED = (
    PlannedCase("vector_add", "torch", "fp32", "fp32", (1024,)),
    PlannedCase("vector_add", "triton", "fp32", "fp32", (1024,)),
    PlannedCase("matmul", "torch", "fp32", "tf32", (512, 512, 512)),
    PlannedCase("matmul", "triton", "fp32", "tf32", (512, 512, 512)),
)
DEVICE = BenchDevice("cuda", "NVIDIA H200", 0, uuid="GPU-8d0ff531-a2cd-2527-7669-e66277d6bc28", sm_count=132,
                     l2_bytes=62914560, memory_total_bytes=150754820096, compute_capability="9.0",
                     pci_bus_id="00000000:19:00.0")
PLAN = Plan("cuda", 0, PLANNED, GPU_QUICK_SETTINGS, BenchDevice("cuda", "NVIDIA H200 (probed)", 0),
            notes=(Note("bench.compile_off"),))
CEILING = CeilingRun("copy", "fp32", (1 << 28,), Timing.from_samples("cuda_graph", [505.0, 507.5, 506.1], 2))
WINDOW = MonitorWindow(0.02, t_s=[0.0, 0.02], sm_mhz=[1980, 1755], power_w=[412.5, 699.0],
                       reasons=((), ("sw_power_cap",)))


def emit(ev: protocol.Event) -> dict:
    return {"emit": protocol.encode(ev)}


DONE = {"done": {}}


def measured(pc: PlannedCase, window: int | None = None) -> Case:
    return Case(pc.op, pc.impl, pc.dtype, pc.precision, pc.shape,
                gpu=Timing.from_samples("cuda_graph", [1.1, 1.2, 1.0], 500),
                launch=Timing.from_samples("cuda_events", [5.5, 5.7], 18),
                accuracy=model.Accuracy(0.0, 0.0, 0.0, 0, 1024), window=window)


def start() -> dict:
    return emit(protocol.Started(DEVICE, {"torch": "2.11.0+cu130", "triton": "3.6.0"}))


def play(cases, window: int | None = None) -> list:
    steps = []
    for pc in cases:
        steps.append(emit(protocol.CaseStarted(PLANNED.index(pc), len(PLANNED), pc)))
        steps.append(emit(protocol.Measured(measured(pc, window))))
    return steps


def run_script(tmp_path: Path, steps: list, timeout: float = 30.0, on_event=None, grace_s: float = 2.0,
               plan: Plan = PLAN, **kw):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    seen: list = []

    def record(ev):
        seen.append(ev)
        if on_event:
            on_event(ev)

    out = runner.run_worker(plan, record, timeout, command=command(script), grace_s=grace_s, **kw)
    return out, seen


def test_normal_run_collects_typed_events_and_feeds_the_plan(tmp_path):
    saved = tmp_path / "plan.json"
    steps = [{"save_plan": str(saved)}, start(), emit(protocol.CeilingMeasured(CEILING)),
             *play(PLANNED[:1]), emit(protocol.WindowSampled(0, WINDOW)), *play(PLANNED[1:3], window=0),
             emit(protocol.Skipped(PLANNED[3].skip(Note("skip.out_of_memory", {"need_bytes": 3, "free_bytes": 2})))),
             emit(protocol.Noted(Note("bench.l2_cold", {"l2_bytes": 62914560}))),
             {"stderr": "compiler chatter"}, DONE]
    out, seen = run_script(tmp_path, steps)
    assert protocol.decode_plan(json.loads(saved.read_text())) == protocol.WorkerPlan("cuda", 0, PLANNED,
                                                                                       GPU_QUICK_SETTINGS)
    assert out.stop is None and out.done and out.returncode in (0, -signal.SIGTERM) and not out.interrupted
    assert [c.key for c in out.cases] == [pc.key for pc in PLANNED[:3]]
    assert out.device == DEVICE and out.ceiling_runs == [CEILING] and out.windows == [WINDOW]
    assert out.versions == {"torch": "2.11.0+cu130", "triton": "3.6.0"}
    assert out.skips[0].reason.key == "skip.out_of_memory" and out.skips[0].precision == "tf32"
    assert out.notes == [Note("bench.l2_cold", {"l2_bytes": 62914560})]
    assert out.stderr_tail == "compiler chatter"
    assert sum(isinstance(e, protocol.CaseStarted) for e in seen) == 3 and isinstance(seen[-1], protocol.Noted)

    bench = runner.assemble(PLAN, out, "2026-11-22T22:00:00Z", 12.3456)
    assert bench.device == DEVICE and not bench.partial and bench.duration_s == 12.346
    assert bench.notes == (Note("bench.compile_off"), Note("bench.l2_cold", {"l2_bytes": 62914560}))
    assert bench.settings == GPU_QUICK_SETTINGS and bench.ceiling_runs == (CEILING,)
    assert bench.window_of(bench.cases[1]) == WINDOW and bench.window_of(bench.cases[0]) is None
    assert len(bench.skipped) == 1  # the worker's own skip; nothing unrun
    r = model.Report("0.1.0", "2026-11-22T22:00:00Z", "h", "run", model.Environment(), benches=(bench,))
    assert model.loads(model.dumps(r)) == r


def test_crash_mid_way_keeps_finished_cases_and_records_the_stop(tmp_path):
    steps = [start(), *play(PLANNED[:2]), emit(protocol.CaseStarted(2, 4, PLANNED[2])),
             {"stderr": "Fatal Python error: Segmentation fault"}, {"signal": "SIGSEGV"}]
    out, _ = run_script(tmp_path, steps)
    assert out.returncode == -signal.SIGSEGV and len(out.cases) == 2 and not out.interrupted
    assert out.stop == model.Stop(StopCause.CRASHED, finished=2, planned=4, during=PLANNED[2].key, signal="SIGSEGV",
                                  returncode=-signal.SIGSEGV, detail="Fatal Python error: Segmentation fault")
    bench = runner.assemble(PLAN, out, "2026-11-22T22:00:00Z", 1.0)
    assert bench.partial and bench.stop == out.stop
    unrun = [s for s in bench.skipped if s.reason.key == "skip.not_run"]
    assert [(s.op, s.impl, s.precision) for s in unrun] == [("matmul", "torch", "tf32"), ("matmul", "triton", "tf32")]
    assert unrun[0].reason.params == {"cause": "crashed"}


def test_nonzero_exit_before_done_is_an_exit_with_the_last_stderr_line(tmp_path):
    steps = [{"stderr": "Traceback (most recent call last):"}, {"stderr": "ImportError: libcudart.so.13"},
             {"exit": 1}]
    out, _ = run_script(tmp_path, steps)
    assert out.stop.cause == StopCause.EXITED and out.stop.returncode == 1 and out.stop.finished == 0
    assert out.stop.detail == "ImportError: libcudart.so.13" and out.stop.during is None


def test_timeout_stops_a_hung_worker(tmp_path):
    steps = [start(), *play(PLANNED[:1]), emit(protocol.CaseStarted(1, 4, PLANNED[1])), {"sleep": 60}]
    t0 = time.monotonic()
    out, _ = run_script(tmp_path, steps, timeout=2.5, grace_s=1.0)  # time for a busy machine to start it
    assert time.monotonic() - t0 < 45  # not the 60 s it sleeps
    assert out.stop.cause == StopCause.TIMEOUT and out.stop.timeout_s == 2.5 and out.stop.during == PLANNED[1].key
    assert len(out.cases) == 1 and out.returncode is not None  # reaped, not left running


def test_malformed_and_inconsistent_events_are_ignored_with_a_note_and_stray_output_goes_to_stderr(tmp_path):
    bad_window = protocol.encode(protocol.WindowSampled(3, WINDOW))  # sent as the first window
    dangling = protocol.encode(protocol.Measured(measured(PLANNED[0], window=0)))  # no window sent
    steps = [start(), {"raw": "Triton autotuning for function matmul_kernel finished"}, {"emit": {"event": 3}},
             {"emit": "text"}, {"emit": {"event": "case", "case": {"op": "relu"}}}, {"emit": bad_window},
             {"emit": dangling}, *play(PLANNED), DONE]
    out, _ = run_script(tmp_path, steps)
    assert out.stop is None and len(out.cases) == 4 and out.windows == []
    (note,) = out.notes
    assert note.key == "bench.ignored_output" and note.params["lines"] == 5
    assert note.params["examples"][0] == "{'event': 3}"
    assert "Triton autotuning for function matmul_kernel finished" in out.stderr_tail


def test_ctrl_c_stops_the_worker_and_keeps_what_finished(tmp_path):
    def interrupt_at_third(ev):
        if isinstance(ev, protocol.CaseStarted) and ev.i == 2:
            raise KeyboardInterrupt

    steps = [start(), *play(PLANNED[:2]), emit(protocol.CaseStarted(2, 4, PLANNED[2])), {"sleep": 60}]
    t0 = time.monotonic()
    out, _ = run_script(tmp_path, steps, on_event=interrupt_at_third, grace_s=1.0)
    assert time.monotonic() - t0 < 10
    assert out.interrupted and len(out.cases) == 2
    assert (out.stop.cause, out.stop.signal, out.stop.finished, out.stop.planned) == (StopCause.USER, "SIGINT", 2, 4)
    assert out.returncode is not None and out.returncode < 0  # terminated by signal
    bench = runner.assemble(PLAN, out, "2026-11-22T22:00:00Z", 1.0)
    assert sum(s.reason == Note("skip.not_run", {"cause": "user"}) for s in bench.skipped) == 2


def test_worker_that_cannot_start_is_reported_not_raised(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    out = runner.run_worker(PLAN, lambda ev: None, 5)
    assert out.stop.cause == StopCause.START_FAILED and out.stop.detail.startswith("FileNotFoundError")
    bench = runner.assemble(PLAN, out, "2026-11-22T22:00:00Z", 0.0)
    assert bench.device.name == "NVIDIA H200 (probed)"  # the worker never said: the probes' name
    assert len(bench.skipped) == 4


def test_a_worker_is_ended_once_it_sent_done_and_its_teardown_is_not_waited_for(tmp_path):
    """After "done" every case is reported: the worker's teardown (CUDA, Inductor's compile workers, once 2.3 s
    of a full run) is ended, not waited for, and how it exits then says nothing about the run."""
    for after in ({"sleep": 60}, {"exit": 3}):
        t0 = time.monotonic()
        out, _ = run_script(tmp_path, [start(), *play(PLANNED), DONE, after], timeout=120.0,
                            grace_s=1.0)
        assert time.monotonic() - t0 < 30  # not the sleep, nor the time limit
        assert out.done and out.stop is None and out.notes == [] and len(out.cases) == 4
        assert 0 <= out.phases["shutdown"] < 30
        bench = runner.assemble(PLAN, out, "2026-11-22T22:00:00Z", 1.0)
        assert not bench.partial and bench.skipped == ()


@pytest.mark.slow  # waits out a time limit on purpose: the full suite runs it
def test_a_helper_process_in_its_own_session_is_stopped_with_the_worker(tmp_path):
    """torch.compile and libraries start helpers; one that left the worker's process group must
    not outlive a stopped run."""
    pid_file = tmp_path / "child.pid"
    steps = [start(), {"spawn": str(pid_file)}, {"sleep": 60}]
    out, _ = run_script(tmp_path, steps, timeout=2.5, grace_s=1.0)
    assert out.stop.cause == StopCause.TIMEOUT
    child = int(pid_file.read_text())
    assert _gone(child), "the helper process outlived the worker"


def test_a_skip_of_one_precision_leaves_the_other_precision_unrun():
    """matmul fp32 as TF32 skipped for memory, then a crash before the IEEE fp32 case: the IEEE
    case must still show as not run (it was neither a case nor a skip)."""
    shape = (8192, 8192, 8192)
    tf32, ieee = PlannedCase("matmul", "torch", "fp32", "tf32", shape), PlannedCase("matmul", "torch", "fp32", "fp32",
                                                                                    shape)
    plan = Plan("cuda", 0, (tf32, ieee), GPU_QUICK_SETTINGS, DEVICE)
    out = runner.BenchOutcome(skips=[tf32.skip(Note("skip.out_of_memory"))],
                              stop=model.Stop(StopCause.CRASHED, 1, 2, signal="SIGSEGV"))
    (unrun,) = runner.unrun_skips(plan, out)
    assert unrun == ieee.skip(Note("skip.not_run", {"cause": "crashed"}))
    # A skip that names no precision (schema-1 workers) stands for every precision.
    legacy = runner.BenchOutcome(skips=[Skip("matmul", "torch", "fp32", shape, Note("x"))],
                                 stop=model.Stop(StopCause.USER))
    assert runner.unrun_skips(plan, legacy) == []


def _gone(pid: int, wait_s: float = 10.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


# --------------------------------------------------------------------------- signals to envcheck run

RUNNER_SCRIPT = """
import json, sys
sys.path[:0] = [{root!r}, {tests!r}]
from fake_worker import command
from envcheck.bench import runner
from envcheck.bench.suite import GPU_QUICK_SETTINGS, Plan, PlannedCase
from envcheck.model import BenchDevice
planned = tuple(PlannedCase("vector_add", impl, "fp32", "fp32", (n,))
                for n in (1024, 2048) for impl in ("torch", "triton"))
plan = Plan("cuda", 0, planned, GPU_QUICK_SETTINGS, BenchDevice("cuda", "GPU", 0))
def progress(ev):
    print(type(ev).__name__, flush=True)
out = runner.run_worker(plan, progress, 60, command=command({script!r}), grace_s=1.0)
stop = out.stop
print(json.dumps({{"cause": stop.cause.value, "signal": stop.signal, "finished": stop.finished,
                  "cases": len(out.cases), "interrupted": out.interrupted}}), flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_to_envcheck_run_stops_the_worker_and_keeps_what_finished(tmp_path, sig):
    """What a batch scheduler sends at the end of a job: the runner must stop the worker's
    process group (no orphan), keep the finished cases and record the signal."""
    pid_file = tmp_path / "worker.pid"
    planned = [PlannedCase("vector_add", impl, "fp32", "fp32", (n,)) for n in (1024, 2048) for impl in ("torch", "triton")]
    steps = [{"pid_file": str(pid_file)}, start(), {"play_plan": 2},
             emit(protocol.CaseStarted(2, 4, planned[2])), {"sleep": 60}]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    code = RUNNER_SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests"), script=str(script))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        assert proc.stdout is not None
        while len([s for s in seen if s == "CaseStarted"]) < 3:
            line = proc.stdout.readline()
            assert line, f"runner ended early: {proc.stderr.read() if proc.stderr else ''}"
            seen.append(line.strip())
        worker_pid = int(pid_file.read_text())
        assert psutil.pid_exists(worker_pid)
        os.kill(proc.pid, sig)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-2000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result == {"cause": "signal", "signal": signal.Signals(sig).name, "finished": 2, "cases": 2,
                      "interrupted": True}
    assert _gone(worker_pid), "the worker was orphaned"
