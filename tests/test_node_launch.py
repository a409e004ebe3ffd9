"""The launcher seam and the per-GPU workers in parallel: NVLink multicast off in every child,
time limits that stop a job with everything it started, GPUs measured at the same time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_worker import command
from node_fakes import ScriptedLauncher

from envcheck.bench import parallel, runner
from envcheck.bench.suite import Plan, PlannedCase
from envcheck.commands.options import Gpus
from envcheck.errors import UsageError
from envcheck.harness.env import NO_MULTICAST, clean_env
from envcheck.model import BenchDevice, Settings, StopCause
from envcheck.node.collective_run import WORKER_MODULE, Placement, SweepPlan, launch_sweep, workers_done
from envcheck.node.launch import SubprocessLauncher, torchrun_argv
from envcheck.node.peer import PeerPlan, run_peer_copies

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def test_child_env_turns_multicast_off_whatever_it_is_given():
    env = clean_env({"NCCL_NVLS_ENABLE": "1", "FOO": "bar"}, base={"NVSHMEM_DISABLE_NVLS": "0", "PATH": "/bin"})
    assert {k: env[k] for k in MULTICAST_OFF} == MULTICAST_OFF == NO_MULTICAST
    assert env["FOO"] == "bar" and env["PATH"] == "/bin"


def test_child_env_orders_cuda_devices_as_nvml_does_unless_the_user_chose_an_order():
    # CUDA's default order (fastest first) can differ from NVML's: a child's cuda:i must be NVML GPU i.
    assert clean_env(base={"PATH": "/bin"})["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert clean_env(base={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"
    assert clean_env({"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}, base={})["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"


def test_collective_and_peer_jobs_carry_multicast_off(tmp_path):
    launcher = ScriptedLauncher()
    launch_sweep(SweepPlan(), Placement(2, (0, 2)), tmp_path / "c", launcher, 10)
    launcher.play = lambda argv, env: []
    run_peer_copies(PeerPlan(), (0, 2), launcher, 10)
    (sweep_argv, sweep_env), (peer_argv, peer_env) = launcher.jobs
    assert sweep_argv[1:5] == ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2")
    assert sweep_argv[5:7] == ("-m", "envcheck.node.collective_worker")
    assert peer_argv == ("envcheck.node.peer_worker:run",)  # a Python child: the harness sets its environment
    assert {k: sweep_env[k] for k in MULTICAST_OFF} == MULTICAST_OFF
    assert sweep_env["CUDA_VISIBLE_DEVICES"] == peer_env["CUDA_VISIBLE_DEVICES"] == "0,2"
    plan = json.loads((tmp_path / "c" / "plan.json").read_text())
    assert plan["sizes"][-1] == 4 << 30 and plan["narrow"]["enabled"]


def test_torchrun_across_nodes_uses_a_static_rendezvous():
    argv = torchrun_argv(4, "m", ["--x"], nnodes=2, node_rank=1, master_addr="n0", master_port=2950, python="py")
    assert argv == ["py", "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=4", "--node-rank=1",
                    "--master-addr=n0", "--master-port=2950", "-m", "m", "--x"]


def test_a_job_sees_the_environment_it_was_given(tmp_path):
    out = tmp_path / "env.json"
    code = f"import json, os; json.dump(dict(os.environ), open({str(out)!r}, 'w'))"
    launch = SubprocessLauncher().run([sys.executable, "-c", code], clean_env(), 30)
    assert launch.returncode == 0 and not launch.timed_out
    seen = json.loads(out.read_text())
    assert {k: seen[k] for k in MULTICAST_OFF} == MULTICAST_OFF


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_job_past_its_time_is_stopped_with_its_children_and_its_own_sessions(tmp_path):
    pids = tmp_path / "pids"
    # The child starts a grandchild in its own session (as torchrun starts its workers), then hangs.
    code = ("import os, subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
            f"open({str(pids)!r}, 'w').write(str(p.pid))\n"
            "time.sleep(60)\n")
    t0 = time.monotonic()
    launch = SubprocessLauncher(grace_s=1.0).run([sys.executable, "-c", code], clean_env(), 3,
                                                 log_path=str(tmp_path / "log"),
                                                 orphans=lambda: [int(pids.read_text())] if pids.exists() else [])
    assert launch.timed_out and launch.returncode is not None
    assert time.monotonic() - t0 < 15
    time.sleep(0.2)
    assert not _alive(int(pids.read_text()))


def test_a_job_whose_workers_all_finished_is_not_held_by_torchruns_exit_barrier(tmp_path):
    """torchrun whose workers all said done waits in its exit barrier for the other nodes' agents, 300 s for a
    node that was lost: the launcher stops it after its grace, and the job counts as its workers' success."""
    marker, pid = tmp_path / "workers_done", tmp_path / "pid"
    code = (f"import os, time; open({str(pid)!r}, 'w').write(str(os.getpid())); open({str(marker)!r}, 'w')\n"
            "time.sleep(600)\n")
    launch = SubprocessLauncher(grace_s=0.2).run([sys.executable, "-c", code], clean_env(), 300,
                                                 finished=marker.exists)
    assert launch.returncode == 0 and not launch.timed_out and not launch.ended_early
    assert not _alive(int(pid.read_text()))


def test_a_nodes_workers_are_done_once_each_said_done_and_ended(tmp_path):
    # A live process running the worker module (by its command line), as torchrun's worker would.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", WORKER_MODULE])
    deadline = time.monotonic() + 60  # a real worker is past its exec when it writes its pid
    while WORKER_MODULE.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)

    def events(pid: int, done: bool) -> str:
        return json.dumps({"event": "start", "pid": pid}) + ('\n{"event":"done"}\n' if done else "\n")
    try:
        (tmp_path / "rank0.jsonl").write_text(events(os.getpid(), True))
        (tmp_path / "rank1.jsonl").write_text(events(proc.pid, False))
        (tmp_path / "learn.rank1.jsonl").write_text('{"event":"done"}\n')  # the learning launch's: not this one's
        assert not workers_done(tmp_path, "", 2)  # rank 1 has not said done
        (tmp_path / "rank1.jsonl").write_text(events(proc.pid, True))
        assert not workers_done(tmp_path, "", 2)  # said done, still running
        assert not workers_done(tmp_path, "", 3)  # a rank never started
    finally:
        proc.kill()
        proc.wait()
    assert workers_done(tmp_path, "", 2) and not workers_done(tmp_path, "learn.", 2)


def test_a_program_that_cannot_start_is_a_launch_error():
    launch = SubprocessLauncher().run(["/nonexistent/envcheck-test-binary"], clean_env(), 5)
    assert launch.returncode is None and "could not start" in launch.error


# --------------------------------------------------------------------------- per-GPU suites in parallel


def _plan(index: int) -> Plan:
    cases = (PlannedCase("vector_add", "torch", "fp32", "fp32", (1024,)),)
    return Plan("cuda", index, cases, Settings(warmup_ms=1, rep_ms=1, min_samples=1, max_samples=2),
                BenchDevice("cuda", "NVIDIA H200", index))


def test_gpus_run_at_the_same_time_each_in_its_own_worker(tmp_path):
    # Each worker waits at a barrier for the other two: run one after another, none would pass it.
    met = tmp_path / "met"
    met.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"barrier": [str(met), 3]}, {"play_plan": True}, {"done": {}}]))
    seen: list[tuple[int, str]] = []
    done = parallel.run_gpus([_plan(0), _plan(1), _plan(2)], 300, lambda g, ev: seen.append((g, ev.kind)),
                             command=command(script))
    assert len(list(met.iterdir())) == 3
    assert [r.gpu for r in done.runs] == [0, 1, 2] and done.stopped is None
    assert all(len(r.bench.cases) == 1 and not r.bench.partial for r in done.runs)
    assert {g for g, kind in seen if kind == "case"} == {0, 1, 2}


def test_workers_get_multicast_off(tmp_path):
    dump = tmp_path / "env.json"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"save_env": str(dump)}, {"done": {}}]))
    parallel.run_gpus([_plan(0)], 30, command=command(script))
    seen = json.loads(dump.read_text())
    assert {k: seen[k] for k in MULTICAST_OFF} == MULTICAST_OFF


def test_a_single_worker_gets_multicast_off_without_any_wrapper(tmp_path):
    # envcheck run (one GPU) and each fleet rank start their worker through run_worker: the harness alone
    # gives it the child environment.
    dump = tmp_path / "env.json"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"save_env": str(dump)}, {"done": {}}]))
    runner.run_worker(_plan(0), lambda ev: None, 30, command=command(script))
    seen = json.loads(dump.read_text())
    assert {k: seen[k] for k in MULTICAST_OFF} == MULTICAST_OFF
    assert seen["CUDA_DEVICE_ORDER"] == os.environ.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def test_one_crashing_gpu_costs_only_its_own_results(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps([{"play_plan": True}, {"done": {}}]))
    bad.write_text(json.dumps([{"stderr": "CUDA error: uncorrectable ECC error encountered"}, {"exit": 3}]))
    runs = [parallel.run_gpus([_plan(i)], 30, command=command(bad if i == 1 else good)).runs[0]
            for i in (0, 1)]
    assert not runs[0].bench.partial and runs[1].bench.partial
    stop = runs[1].bench.stop
    assert stop.cause is StopCause.EXITED and stop.returncode == 3 and "ECC" in (stop.detail or "")


@pytest.mark.slow
def test_sigterm_stops_every_gpu_worker_and_keeps_what_finished(tmp_path):
    """The main thread turns SIGTERM into stopping every worker (the workers' threads cannot see it)."""
    script = tmp_path / "script.json"
    pids = tmp_path / "pids"
    script.write_text(json.dumps([{"pid_file": str(pids) + "-{pid}"}, {"play_plan": 1}, {"sleep": 60}]))
    code = ("import json, sys\n"
            f"sys.path[:0] = [{str(Path(__file__).parent)!r}]\n"
            "from test_node_launch import _plan\n"
            "from fake_worker import command\n"
            "from envcheck.bench import parallel\n"
            f"done = parallel.run_gpus([_plan(0), _plan(1)], 60, command=command({str(script)!r}))\n"
            "print(json.dumps([done.stopped.value, done.signal, [r.bench.stop.cause.value for r in done.runs]]))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("pids*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert json.loads(out.splitlines()[-1]) == ["signal", "SIGTERM", ["signal", "signal"]], err
    for f in tmp_path.glob("pids*"):
        with pytest.raises(ProcessLookupError):
            os.kill(int(f.read_text()), 0)


@pytest.mark.parametrize(("text", "expected"), [("all", (0, 1, 2, 3)), ("0,2", (0, 2)), ("2, 0,2", (2, 0))])
def test_gpu_selection(text, expected):
    assert Gpus.parse(text).pick(4) == expected


@pytest.mark.parametrize("text", ["4", "x", ""])
def test_bad_gpu_selection_is_a_usage_error(text):
    with pytest.raises(UsageError, match="--gpus"):
        Gpus.parse(text).pick(4)


def test_probe_subprocesses_get_multicast_off_too(tmp_path):
    """The probes' Host seam starts nvidia-smi, ldconfig and the torch/Triton children: with the same
    environment rule as every other child of envcheck, even when a caller passes its own."""
    from envcheck.probes.host import Host

    res = Host().run([sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"], timeout=30,
                     env={"PATH": os.environ.get("PATH", ""), "NCCL_NVLS_ENABLE": "1"})
    seen = json.loads(res.stdout)
    assert {k: seen[k] for k in MULTICAST_OFF} == MULTICAST_OFF
