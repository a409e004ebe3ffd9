"""The tools of ``run --crosscheck`` on the CPU: which cases are headlines, the do_bench_cudagraph worker (its
logic with a CPU stand-in for the tool; its isolation with a scripted worker that finishes, crashes and hangs),
the plain torch copy and the torch.distributed loop as their events arrive, nccl-tests found, run in each mode
and read through a scripted launcher replaying its real output, and ``envcheck run --crosscheck`` end to end on
the CPU (not available: a note, exit 0; a failed tool: exit 1)."""

from __future__ import annotations

import io
import json
import stat
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from crosscheck_fakes import MATMUL, MiB, all_reduce, bench, captured, case, launch, node
from fake_crosscheck_worker import TOKEN, command

from envcheck import cli, model
from envcheck.crosscheck import kernel_worker, kernels, nccl_tests_run, tools
from envcheck.crosscheck.tools import CrosscheckRun, run_crosscheck
from envcheck.harness.failures import Crash, Outcome
from envcheck.model import Note
from envcheck.model.crosscheck import Crosscheck, ToolRun
from envcheck.model.node import Launch, Node

VEC = ("vector_add", "fp32")


# --------------------------------------------------------------------------- headline cases


def test_headlines_are_each_op_and_precisions_largest_case_for_torch_and_triton():
    b = bench(case(*VEC[:1], "torch", "fp32", (1 << 20,), 10.0), case("vector_add", "triton", "fp32", (1 << 20,), 10.0),
              case("vector_add", "torch", "fp32", (1 << 28,), 900.0), case("vector_add", "triton", "fp32", (1 << 28,),
                                                                            910.0),
              case("vector_add", "compile", "fp32", (1 << 28,), 905.0),
              case("vector_add", "torch", "fp16", (1 << 20,), 6.0),  # fp16's largest fits L2 (6 MiB < 3 x 60): timed too
              case("matmul", "torch", "fp16", (2048, 2048, 2048), 20.0), case("matmul", "torch", "fp16", MATMUL, 100.0),
              case("matmul", "triton", "fp16", MATMUL, 110.0))
    got = [(c.op, c.impl, c.dtype, c.shape) for c in kernels.headlines(b)]
    assert got == [("vector_add", "torch", "fp32", (1 << 28,)), ("vector_add", "triton", "fp32", (1 << 28,)),
                   ("vector_add", "torch", "fp16", (1 << 20,)),
                   ("matmul", "torch", "fp16", MATMUL), ("matmul", "triton", "fp16", MATMUL)]
    cpu = model.Bench(model.BenchDevice("cpu", "x"), cases=b.cases)
    assert kernels.headlines(cpu) == ()


def test_the_worker_builds_the_suites_call_and_times_it_with_the_tool_alone():
    """The worker's logic with torch on the CPU and a stand-in for do_bench_cudagraph: settles once (untimed),
    then ``rounds`` calls, every replay a sample in us; a row that cannot be built is that row's error."""
    import torch

    calls: list[tuple[int, str]] = []

    def tool(fn: Callable[[], object], rep: int, return_mode: str) -> object:
        fn()
        calls.append((rep, return_mode))
        return [0.002, 0.003] if return_mode == "all" else 0.0025

    events: list[dict] = []
    plan = {"gpu": 0, "rounds": 2, "rows": [
        {"op": "vector_add", "impl": "torch", "dtype": "fp32", "precision": "fp32", "shape": [1024], "rep_ms": 30.0,
         "settle_ms": 300.0},
        {"op": "vector_add", "impl": "jax", "dtype": "fp32", "precision": "fp32", "shape": [1024], "rep_ms": 30.0,
         "settle_ms": 300.0}]}
    kernel_worker.run(plan, events.append, torch=torch, bench=tool)
    assert events[0] == {"event": "ready", "torch": torch.__version__, "device": "cpu"}
    assert events[1] == {"event": "row", "i": 0, "samples_us": [2.0, 3.0, 2.0, 3.0]}
    assert events[2]["i"] == 1 and "jax" in events[2]["error"]
    assert calls == [(300, "median"), (30, "all"), (30, "all")]


def test_the_tool_times_every_headline_over_the_suites_sets_and_its_matmul_tile():
    """Issue 49, item 10: 18 of 32 rows were "not compared: fits L2" (envcheck kept L2 cold, the tool replayed
    one set of buffers), and the tool's own autotuning could time another matmul tile than the suite's."""
    import dataclasses

    import torch

    from envcheck.analysis.crosscheck import kernel_rows
    from envcheck.bench.kernels import tuning
    from envcheck.model.crosscheck import KernelTiming

    small = dataclasses.replace(case("relu", "torch", "fp32", (1 << 20,), 3.0), rotation_sets=45)
    tile = "tma_persistent 128x256x64 s4 w8"
    mm = dataclasses.replace(case("matmul", "triton", "fp16", MATMUL, 100.0), kernel=tile)
    p = kernels.plan_gpu(bench(small, case("matmul", "torch", "fp16", MATMUL, 99.0), mm))
    assert p is not None and [(r["op"], r["sets"], r["kernel"]) for r in p.plan["rows"]] == [
        ("relu", 45, None), ("matmul", 1, None), ("matmul", 1, tile)]
    # The worker: one call over the row's sets of fresh buffers, the tool's time divided by them.
    calls: list[int] = []

    def tool(fn: Callable[[], object], rep: int, return_mode: str) -> object:
        fn()
        return [0.09] if return_mode == "all" else 0.09

    events: list[dict] = []
    real = kernel_worker.build_call
    kernel_worker.build_call = lambda *a: (calls.append(a[3]), real(*a))[1]  # type: ignore[assignment]
    try:
        kernel_worker.run({"gpu": 0, "rounds": 1, "rows": [{**p.plan["rows"][0], "sets": 3}]}, events.append,
                          torch=torch, bench=tool)
    finally:
        kernel_worker.build_call = real
    assert calls == [0, 1, 2] and events[1]["samples_us"] == [pytest.approx(30.0)]
    # The race gives the suite's tile where it is a candidate, else races as the suite did.
    tiles = {tuning.Tile("pointer", 128, 128, 64, 4, 8): None, tuning.Tile("tma_persistent", 128, 256, 64, 4, 8): None}
    real_race = tuning.fastest
    tuning.fastest = lambda candidates, measure=None: next(iter(candidates))
    try:
        with kernel_worker.pinned(tile):
            assert tuning.fastest(tiles).label == tile
        with kernel_worker.pinned("pointer 1x1x1 s1 w1"):
            assert tuning.fastest(tiles).kind == "pointer"
        assert tuning.fastest(tiles).kind == "pointer"
    finally:
        tuning.fastest = real_race
    # The analysis: every row compared, the sets and kernel said; another tile is not compared, both named.
    timing = {"samples_us": [100.0] * 3, "rounds": 3, "rep_ms": 30.0, "settle_ms": 300.0}
    rows = kernel_rows(Crosscheck(kernels=(
        KernelTiming(0, "relu", "torch", "fp32", "fp32", (1 << 20,), sets=45, **{**timing, "samples_us": [3.0] * 3}),
        KernelTiming(0, "matmul", "triton", "fp16", "fp16", MATMUL, kernel=tile, **timing),
        KernelTiming(0, "matmul", "triton", "fp16", "fp16", MATMUL, kernel="pointer 128x128x64 s4 w8", **timing))),
        [bench(small, mm)])
    assert [r.status for r in rows[:2]] == ["within", "within"] and ("sets", "45") in rows[0].counterpart.settings
    assert ("kernel", tile) in rows[1].counterpart.settings
    assert (rows[2].reason, rows[2].detail) == ("kernel_differs", f"{tile} / pointer 128x128x64 s4 w8")


def _cuda_bench() -> model.Bench:
    return bench(case("vector_add", "torch", "fp32", (1 << 28,), 900.0), case("relu", "torch", "fp32", (1 << 10,), 3.0),
                 case("matmul", "torch", "fp16", MATMUL, 100.0), case("matmul", "triton", "fp16", MATMUL, 101.0))


def test_a_finished_worker_gives_every_row():
    got = kernels.run_kernels([_cuda_bench()], command=command("ok"))
    assert not got.stopped and len(got.runs) == 1 and got.runs[0].launch.returncode == 0
    rows = {(k.op, k.impl): k for k in got.rows}
    assert list(rows[("relu", "torch")].samples_us) == [kernels.REP_MS] * 3  # L2-sized: timed over its sets
    assert list(rows[("vector_add", "torch")].samples_us) == [kernels.REP_MS] * 3
    assert rows[("matmul", "triton")].rep_ms == kernels.SUSTAIN_REP_MS  # compute-bound: the sustained window
    assert rows[("matmul", "triton")].settle_ms == kernels.SUSTAIN_SETTLE_MS


def test_a_crashed_worker_keeps_its_rows_and_its_redacted_last_words(monkeypatch):
    secret = TOKEN  # which the worker never gets, and quotes all the same
    monkeypatch.setenv("HF_TOKEN", secret)
    got = kernels.run_kernels([_cuda_bench()], command=command("half"))
    (run,) = got.runs
    assert run.launch.returncode == 3 and "crashed with token" in run.launch.stderr_tail
    assert secret not in run.launch.stderr_tail
    status = [(k.op, k.impl, k.samples_us is not None, k.skipped) for k in got.rows]
    assert status == [("vector_add", "torch", True, None), ("relu", "torch", True, None),
                      ("matmul", "torch", False, "not_run"), ("matmul", "triton", False, "not_run")]


def test_what_a_worker_writes_is_outside_text():
    """Samples that are not finite positive numbers, a row index that is not one, a row reported twice: no sample
    a report could not hold back is kept, and nothing raises."""
    p = kernels.plan_gpu(_cuda_bench())
    assert p is not None and len(p.plan["rows"]) == 4
    bad = [[float("nan")], [float("inf")], [True], ["1"], [], "1.0", None, [-1.0]]
    for samples in bad:
        events = [{"event": "row", "i": 0, "samples_us": samples}, {"event": "row", "i": "1", "samples_us": [1.0]},
                  {"event": "row", "i": 2, "samples_us": [2.0]}, {"event": "row", "i": 2, "error": "again"}]
        rows, run = kernels.assemble(p, events, launch())
        assert [(k.error is not None, k.skipped) for k in rows] == [(True, None), (False, "not_run"), (True, None),
                                                                   (False, "not_run")]
        assert model.loads(model.dumps(model.Report("0", "2026-11-29T00:00:00Z", "h", "run", model.Environment(),
                                                    crosscheck=Crosscheck(kernels=rows, runs=(run,)))))


def test_a_hung_worker_is_stopped_at_its_limit():
    events, launch = kernels.run_one({"rows": [{"rep_ms": 1.0}, {"rep_ms": 2.0}]}, 1.5, command("hang"))
    assert launch.timed_out and launch.returncode is not None and launch.argv == kernels.ARGV
    assert [e["event"] for e in events] == ["ready", "row"][:len(events)]  # a busy machine: a prefix


def test_a_worker_that_cannot_start_is_a_launch_failure(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    _, launch = kernels.run_one({}, 5.0)
    assert launch.error and "could not start" in launch.error


# --------------------------------------------------------------------------- node tools through the launcher seam


class ReplayLauncher:
    """The launcher seam with no process: ``play(argv, env)`` returns (exit status or "timeout", output); the
    output goes to the job's log as the real launcher writes it, its last lines into the tail."""

    def __init__(self, play: Callable[[Sequence[str], Mapping[str, str]], tuple[int | str, str]]) -> None:
        self.play = play
        self.jobs: list[tuple[tuple[str, ...], dict[str, str]]] = []

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: float, *, log_path: str | None = None,
            orphans: Callable[[], Iterable[int]] | None = None, finished: Callable[[], bool] | None = None
            ) -> Launch:
        self.jobs.append((tuple(argv), dict(env)))
        rc, out = self.play(argv, env)
        if log_path:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(out)
        tail = "\n".join(out.splitlines()[-40:])
        if rc == "timeout":
            return Launch(tuple(argv), None, timeout, timeout, timed_out=True, stderr_tail=tail)
        return Launch(tuple(argv), int(rc), timeout, 0.5, stderr_tail=tail)

    def spawn(self, target: str, args: Any, env: Mapping[str, str], timeout: float,
              on_event: Callable[[Any], None]) -> Outcome:
        """A Python child: ``play((target,), env)`` gives its exit status and the events it sends."""
        self.jobs.append(((target,), dict(env)))
        rc, events = self.play((target,), env)
        for ev in events:
            on_event(ev)
        return Outcome(done=rc == 0, returncode=int(rc), failure=None if rc == 0 else Crash(int(rc)), wall_s=0.5)


def _binaries(folder: Path, names: Iterable[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        p = folder / n
        p.write_text("#!/bin/sh\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR)


def test_nccl_tests_is_found_in_its_folder_its_build_or_on_path(tmp_path):
    _binaries(tmp_path / "nt" / "build", ["all_reduce_perf", "alltoall_perf"])
    (tmp_path / "nt" / "build" / "all_gather_perf").write_text("not executable")
    found = nccl_tests_run.find_binaries(["all_reduce", "all_gather", "all_to_all"], {"NCCL_TESTS_DIR": str(tmp_path / "nt")})
    assert found == {"all_reduce": str(tmp_path / "nt/build/all_reduce_perf"),
                     "all_to_all": str(tmp_path / "nt/build/alltoall_perf")}
    on_path = nccl_tests_run.find_binaries(["all_reduce", "broadcast"], {},
                                           which=lambda n: f"/opt/x/{n}" if n == "broadcast_perf" else None)
    assert on_path == {"broadcast": "/opt/x/broadcast_perf"}
    none = nccl_tests_run.run_nccl_tests(["all_reduce"], [MiB], (0, 1), tmp_path / "w", ReplayLauncher(lambda a, e: (0, "")),
                                         {"NCCL_TESTS_DIR": str(tmp_path / "empty")})
    assert not none.runs and none.notes == (Note("crosscheck.nccl_tests_not_found",
                                                 {"variable": "NCCL_TESTS_DIR", "folder": str(tmp_path / "empty")}),)


def test_size_arguments_cover_the_sweep():
    assert nccl_tests_run.size_args([MiB, 4 * MiB, 16 * MiB]) == ("-b", "1048576", "-e", "16777216", "-f", "4")
    assert nccl_tests_run.size_args([MiB]) == ("-b", "1048576", "-e", "1048576", "-f", "2")
    assert nccl_tests_run.size_args([MiB, 3 * MiB, 8 * MiB]) == ("-b", "1048576", "-e", "8388608", "-f", "2")


def test_nccl_tests_runs_each_mode_and_reads_its_real_output(tmp_path):
    """The 2 x H100 capture of 19:49Z replayed per binary: every mode gives the rows nccl-tests printed; a mode
    that hangs is kept with its limit and its tail; the report names each binary, never its folder."""
    _binaries(tmp_path / "nt", nccl_tests_run.BINARIES.values())
    eager = captured("2026-11-26_1949Z_2x-h100_nccl-tests.tgz")["nccl_tests/nccl_tests_eager.txt"]
    blocks = {b.split("\n", 1)[0]: "# Collective test starting: " + b for b in eager.split("# Collective test starting: ")[1:]}

    def play(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int | str, str]:
        name = Path(argv[0]).name
        if name == "alltoall_perf" and "-G" in argv and env.get("NCCL_GRAPH_REGISTER") == "0":
            return "timeout", "# nccl-tests version 2.19.6\nNCCL WARN stuck"
        return 0, "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n" + blocks[name]

    lau = ReplayLauncher(play)
    got = nccl_tests_run.run_nccl_tests(["all_reduce", "all_to_all"], [MiB, 4 * MiB], (2, 5), tmp_path / "w", lau,
                                        {"NCCL_TESTS_DIR": str(tmp_path / "nt"), "PATH": "/bin"})
    assert [(r.op, r.mode) for r in got.runs] == [(op, m.name) for op in ("all_reduce", "all_to_all")
                                                  for m in nccl_tests_run.MODES]
    argv, env = lau.jobs[1]
    # Graph mode below 256 MiB: 40 calls launched 100 times, buffers spanning 3x the largest size (a cold L2).
    assert argv[1:] == ("-b", "1048576", "-e", "12582912", "-f", "4", "-g", "2", "-w", "5", "-n", "40", "-G", "100")
    assert env["CUDA_VISIBLE_DEVICES"] == "2,5" and env["NCCL_NVLS_ENABLE"] == "0"
    assert env["NCCL_GRAPH_MIXING_SUPPORT"] == "0"
    assert "NCCL_GRAPH_REGISTER" not in env and lau.jobs[2][1]["NCCL_GRAPH_REGISTER"] == "0"
    first = got.runs[0]
    assert first.argv[0] == "all_reduce_perf" and first.launch.argv == first.argv  # no folder of this machine
    assert first.version == "2.19.6 (NCCL 22809)" and len(first.rows) == 7  # the capture's 1 MiB .. 4 GiB
    hung = got.runs[-1]
    assert (hung.op, hung.mode, hung.launch.timed_out, hung.rows) == ("all_to_all", "graph_unregistered", True, ())
    assert hung.env == {"NCCL_GRAPH_MIXING_SUPPORT": "0", "NCCL_GRAPH_REGISTER": "0"}
    assert "NCCL WARN stuck" in hung.launch.stderr_tail
    assert all(r.size_bytes < nccl_tests_run.LARGE_BYTES for r in got.runs[1].rows)  # the small run's sizes only


def test_nccl_tests_runs_the_sizes_envcheck_measured():
    from envcheck.crosscheck.tools import nccl_tests_sweep
    from envcheck.model.node import CollectiveResult, Collectives

    results = (all_reduce(MiB, 70.0, 12.0), all_reduce(4 * MiB, 90.0, 40.0),
               CollectiveResult("all_reduce", 16 * MiB, 4 * MiB, "float32", (0, 1), skipped="out_of_memory"))
    sweep = Collectives("node", "nccl", 2, settings={"sizes": [MiB, 4 * MiB, 16 * MiB]}, results=results)
    assert nccl_tests_sweep(sweep) == (("all_reduce",), (MiB, 4 * MiB))


def test_the_plain_copy_rows_name_the_machines_gpus(tmp_path):
    def play(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, list]:
        assert argv == (f"{tools.COPY_WORKER}:run",) and env == {"CUDA_VISIBLE_DEVICES": "2,5"}
        return 0, [{"event": "copy", "src": 0, "dst": 1, "size_bytes": MiB, "calls": 20, "samples_us": [3.0, 3.1]},
                   {"event": "copy", "src": 1, "dst": 0, "size_bytes": MiB, "calls": 20, "error": "RuntimeError: x"},
                   {"event": "copy", "src": 7, "dst": 0, "size_bytes": MiB, "samples_us": [1.0]}]

    rows, run = tools.run_copies((2, 5), MiB, ReplayLauncher(play))
    assert [(r.src, r.dst, r.samples_us is not None, r.error) for r in rows] == [(2, 5, True, None),
                                                                                 (5, 2, False, "RuntimeError: x")]
    assert run.tool == "torch_copy" and run.launch.argv == ("python", "-m", tools.COPY_WORKER)


def test_the_loops_the_ranks_wrote_are_gathered_per_op_and_size(tmp_path):
    def events(rank: int, *extra: dict) -> str:
        lines = [{"event": "start", "rank": rank}, {"event": "result", "op": "all_reduce"}, *extra, {"event": "done"}]
        return "\n".join(json.dumps(x) for x in lines) + "\ncut sho"

    ev = {"event": "crosscheck_loop", "op": "all_reduce", "size_bytes": MiB, "ranks": [0, 1], "calls": 20,
          "method": "cuda_events"}
    (tmp_path / "rank0.jsonl").write_text(events(0, {**ev, "samples_us": [30.0, 31.0]},
                                                 {**ev, "size_bytes": 4 * MiB, "skipped": "out_of_memory"}))
    (tmp_path / "rank1.jsonl").write_text(events(1, {**ev, "samples_us": [29.0, 29.5]},
                                                 {**ev, "size_bytes": 4 * MiB, "skipped": "out_of_memory"}))
    (tmp_path / "learn.rank0.jsonl").write_text(events(0, {**ev, "samples_us": [1.0]}))
    got = tools.read_loops(tmp_path)
    assert [(x.op, x.size_bytes, [t.rank for t in x.timings], x.skipped) for x in got] == [
        ("all_reduce", MiB, [0, 1], None), ("all_reduce", 4 * MiB, [], "out_of_memory")]
    assert list(got[0].timings[1].timing.samples_us) == [29.0, 29.5] and got[0].calls == 20
    assert tools.read_loops(tmp_path / "missing") == ()


# --------------------------------------------------------------------------- the steps together


def test_not_available_without_cuda_or_under_the_interpreter_or_on_one_gpu(tmp_path):
    cpu = model.Bench(model.BenchDevice("cpu", "x"))
    assert run_crosscheck([cpu]).crosscheck.notes == (Note("crosscheck.no_cuda"),)
    interp = run_crosscheck([_cuda_bench()], environ={"TRITON_INTERPRET": "1"})
    assert interp.crosscheck.notes == (Note("crosscheck.interpreted", {"variable": "TRITON_INTERPRET"}),)
    assert not interp.crosscheck.kernels and not interp.crosscheck.runs
    one = run_crosscheck([_cuda_bench()], Node("vm", (0,)), tmp_path, environ={},
                         kernel_command=command("ok"))
    assert one.crosscheck.notes == (Note("crosscheck.single_gpu"),) and len(one.crosscheck.kernels) == 4


def test_a_node_run_crosschecks_copies_loops_and_nccl_tests(tmp_path):
    (tmp_path / "collectives").mkdir()
    (tmp_path / "collectives" / "rank0.jsonl").write_text(json.dumps(
        {"event": "crosscheck_loop", "op": "all_reduce", "size_bytes": MiB, "ranks": [0], "calls": 20,
         "samples_us": [30.0]}) + "\n")

    def play(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, Any]:
        if argv == (f"{tools.COPY_WORKER}:run",):
            return 0, [{"event": "copy", "src": 0, "dst": 1, "size_bytes": 256 * MiB, "calls": 20, "samples_us": [700.0]}]
        return 0, ""

    n = node(all_reduce(MiB, 70.0, 12.0), copy_us=690.0)
    got = run_crosscheck([_cuda_bench()], n, tmp_path, launcher=ReplayLauncher(play), environ={},
                         kernel_command=command("ok")).crosscheck
    assert [r.tool for r in got.runs] == ["do_bench_cudagraph", "torch_copy"]
    assert len(got.copies) == 1 and len(got.loops) == 1
    assert got.notes[0].key == "crosscheck.nccl_tests_not_found"  # the PATH of {} holds none
    a = model.loads(model.dumps(model.Report("0", "2026-11-29T00:00:00Z", "vm", "run", model.Environment(),
                                             benches=(_cuda_bench(),), node=n, crosscheck=got)))
    from envcheck.analysis import analyse

    kinds = {(r.kind, r.quantity) for r in analyse(a).crosscheck.rows}
    assert kinds == {("kernel", "gpu_time_us"), ("copy", "copy_gbps"), ("collective", "call_time_us")}


# --------------------------------------------------------------------------- envcheck run --crosscheck


def _run(tmp_path: Path, *argv: str, crosscheck: Callable[..., CrosscheckRun] | None = None) -> tuple[int, str, str]:
    from test_cli_run import deps

    from envcheck.commands import run as run_cmd

    d = deps(tmp_path, None)
    if crosscheck is not None:
        import dataclasses

        d = dataclasses.replace(d, crosscheck=crosscheck)
    out, err = io.StringIO(), io.StringIO()
    args = cli.parse(["run", "--quick", "--ops", "relu", "--out-dir", str(tmp_path / "r"), *argv])
    return run_cmd.execute(args, d, stderr=err, stdout=out), out.getvalue(), err.getvalue()


def test_run_crosscheck_on_the_cpu_says_not_available_and_passes(tmp_path):
    rc, out, err = _run(tmp_path, "--crosscheck", "--format", "json,md")
    assert rc == 0, err
    (path,) = sorted((tmp_path / "r").glob("*.json"))
    r = model.load(path)
    assert r.crosscheck is not None and r.crosscheck.notes == (Note("crosscheck.no_cuda"),)
    assert "Cross-checks not available: no CUDA GPU" in out
    assert "## Cross-checks" in path.with_suffix(".md").read_text()


def test_run_without_the_flag_has_no_crosscheck(tmp_path):
    rc, out, _ = _run(tmp_path)
    assert rc == 0 and model.load(next((tmp_path / "r").glob("*.json"))).crosscheck is None
    assert "Cross-checks" not in out


def test_a_failed_tool_fails_the_run(tmp_path):
    def failing(benches, node_, work):
        cc = Crosscheck(runs=(ToolRun("do_bench_cudagraph", launch(returncode=-11, stderr_tail="Segmentation fault"),
                                      0),))
        return CrosscheckRun(cc)

    rc, out, _ = _run(tmp_path, "--crosscheck", crosscheck=failing)
    assert rc == 1
    assert "triton.testing.do_bench_cudagraph on GPU 0 failed" in out and "Segmentation fault" in out


def test_a_bug_in_the_crosschecks_keeps_the_finished_run_and_fails_it(tmp_path):
    def broken(benches, node_, work):
        raise ZeroDivisionError("division by zero")

    rc, out, err = _run(tmp_path, "--crosscheck", crosscheck=broken)
    assert rc == 1 and "Traceback" not in err
    r = model.load(next((tmp_path / "r").glob("*.json")))
    assert r.bench is not None and r.bench.cases  # the suite's results are kept
    assert "envcheck's cross-check step failed (it raised an error" in out and "ZeroDivisionError" in out


def test_fleet_takes_the_flag():
    args = cli.parse(["fleet", "--crosscheck"])
    assert args.crosscheck is True


@pytest.mark.parametrize("argv", [["run", "--crosscheck=yes"], ["run", "--crosscheck", "extra"]])
def test_the_flag_takes_no_value(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(argv)
    assert e.value.code == 2 and "Traceback" not in capsys.readouterr().err



# --------------------------------------------------------------------------- envcheck fleet --crosscheck


def test_fleet_passes_each_ranks_and_leaders_crosschecks_to_its_node(tmp_path):
    """Every rank times its own GPU again after its suite (with its CUDA index), each node's leader its node
    after the node tests; rank 0 joins them per node. A node whose tool failed, or whose cross-check step
    raised, does not pass; the other node does, and the fleet's documents show a section per node."""
    import threading

    from in_lang import render_markdown
    from node_fakes import MemoryTransport, bench_with_bandwidth

    from envcheck.analysis import analyse
    from envcheck.analysis.verdict import verdict
    from envcheck.commands.fleet import fleet_report
    from envcheck.model import Environment
    from envcheck.node.collective_run import SweepPlan
    from envcheck.node.fleet_rank import FleetDeps, FleetOptions, RankContext, run_rank

    world, per_node = 4, 2
    transports = MemoryTransport.fleet(world)
    result: dict[int, object] = {}
    seen: list[tuple[int | None, int]] = []

    def gpu_cross(b: model.Bench, ordinal: int) -> Crosscheck:
        seen.append((b.device.index, ordinal))
        bad = b.device.index == 3
        return Crosscheck(runs=(ToolRun("do_bench_cudagraph", launch(returncode=1 if bad else 0,
                                                                     stderr_tail="CUDA error" if bad else ""),
                                        b.device.index),))

    def node_cross(n: Node, work: str) -> Crosscheck:
        if n.host == "host1":
            raise RuntimeError("a bug")
        return Crosscheck(notes=(Note("crosscheck.nccl_tests_not_found", {"variable": "NCCL_TESTS_DIR",
                                                                          "folder": "-"}),))

    def run(rank: int) -> None:
        ctx = RankContext(rank, world, rank % per_node, per_node, rank // per_node, world // per_node, "127.0.0.1", 1,
                          "torchrun", f"host{rank // per_node}")
        deps = FleetDeps(transports[rank], lambda gpu, r=rank: bench_with_bandwidth(r, 4200.0),
                         lambda: (Environment(), ()), lambda gpus, d, c=ctx: Node(c.host, gpus),
                         lambda *a: ((), None), gpu_crosscheck=gpu_cross, node_crosscheck=node_cross)
        opts = FleetOptions(str(tmp_path), SweepPlan(), world=False, rank_timeout_s=10.0, join_timeout_s=5.0,
                            world_timeout_s=1.0)
        result[rank] = run_rank(ctx, opts, deps, (0, 1))

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(world)]
    for th in threads:
        th.start()
    threads[0].join(30)
    transports[0].put("done", "1")
    for th in threads[1:]:
        th.join(10)
    fleet = result[0]
    assert sorted(seen) == [(0, 0), (1, 1), (2, 0), (3, 1)]
    by_host = {n.host: n.crosscheck for n in fleet.nodes}  # type: ignore[attr-defined]
    assert [r.gpu for r in by_host["host0"].runs] == [0, 1] and by_host["host0"].notes[0].key.endswith("not_found")
    assert [n.key for n in by_host["host1"].notes] == ["crosscheck.crashed"]
    report = model.loads(model.dumps(fleet_report(fleet, Environment())))  # type: ignore[arg-type]
    a = analyse(report)
    assert [(h, c.ok) for h, c in a.fleet_crosschecks] == [("host0", True), ("host1", False)]
    reasons = [r for r in verdict(a).reasons if r.key == "fleet_crosscheck"]
    assert [r.values["host"] for r in reasons] == ["host1"]
    md = render_markdown(report, "en", analysis=a)
    assert "## Cross-checks: node host0" in md and "## Cross-checks: node host1" in md
    assert "envcheck's cross-check step failed (it raised an error, exit status –): RuntimeError: a bug" in md
    assert md.count("RuntimeError: a bug") == 1


def test_graph_modes_split_the_default_sweep_at_256_mib_and_time_the_large_sizes_in_two_processes():
    sizes = [MiB << (2 * k) for k in range(7)]  # 1 MiB .. 4 GiB, x4
    eager, graph, unregistered = nccl_tests_run.MODES
    assert nccl_tests_run._parts(eager, sizes) == [(("-b", str(MiB), "-e", str(4096 * MiB), "-f", "4"), eager.small,
                                                    1, (0, 1 << 62))]
    small, large = nccl_tests_run._parts(graph, sizes)
    assert small[0] == ("-b", str(MiB), "-e", str(192 * MiB), "-f", "4") and small[1][-2:] == ("-G", "100")
    assert small[2:] == (1, (0, 256 * MiB))
    assert large[0] == ("-b", str(256 * MiB), "-e", str(4096 * MiB), "-f", "4") and large[1][-2:] == ("-G", "5")
    assert large[2] == 2 and unregistered.env["NCCL_GRAPH_REGISTER"] == "0"
