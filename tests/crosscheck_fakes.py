"""Recorded numbers for the cross-check tests: a GPU's bench, a 2-GPU node, and what the independent tools
measured of them (``envcheck.model.crosscheck``), with every number chosen so each ratio is known."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

from envcheck.model import Accuracy, Bench, BenchDevice, Case, Environment, Report, Timing
from envcheck.model.crosscheck import Crosscheck, KernelTiming, LoopTiming, NcclTestsRow, NcclTestsRun, Placement
from envcheck.model.node import CollectiveResult, Collectives, Copy, Launch, Node, PeerCopies, RankTiming

LOGS = Path(__file__).resolve().parents[1] / "evidence" / "device-logs"
MATMUL = (4096, 4096, 4096)
MiB = 1 << 20


def case(op: str, impl: str, dtype: str, shape: tuple[int, ...], gpu_us: float) -> Case:
    """A measured case whose numbers pass (an error well within fp16's tolerance, a launch time above the GPU time)."""
    return Case(op, impl, dtype, dtype, shape, gpu=Timing.from_samples("cuda_graph", [gpu_us] * 5),
                launch=Timing.from_samples("cuda_events", [gpu_us * 1.2] * 5),
                accuracy=Accuracy(1e-4, 1e-3, 1e-4, 0, 1 << 20, 1e-5))


def bench(*cases: Case, index: int = 0) -> Bench:
    return Bench(BenchDevice("cuda", "NVIDIA H200", index=index, l2_bytes=60 * MiB), cases=cases)


def kernel(impl: str, us: float, gpu: int = 0, shape: tuple[int, ...] = MATMUL) -> KernelTiming:
    return KernelTiming(gpu, "matmul", impl, "fp16", "fp16", shape, samples_us=[us] * 30, rounds=3, rep_ms=100.0,
                        settle_ms=400.0)


def ranks(method: str, us: float, n: int = 2) -> tuple[RankTiming, ...]:
    return tuple(RankTiming(r, Timing.from_samples(method, [us] * 12)) for r in range(n))


def all_reduce(size: int, call_us: float, gpu_us: float) -> CollectiveResult:
    return CollectiveResult("all_reduce", size, size // 4, "float32", (0, 1), ranks("cuda_events", call_us), 0,
                            gpu_timings=ranks("cuda_graph", gpu_us))


def nccl_row(size: int, busbw: float) -> NcclTestsRow:
    """An all_reduce row of nccl-tests on 2 GPUs whose in-place busbw is ``busbw`` (out of place 1% lower)."""
    t = size / (busbw * 1e9) * 1e6  # busbw = algbw x 2(n-1)/n = algbw on 2 GPUs
    return NcclTestsRow("all_reduce", size, size // 4, "float", Placement(t * 1.01, busbw / 1.01, busbw / 1.01, 0),
                        Placement(t, busbw, busbw, 0))


def launch(**kw: object) -> Launch:
    return Launch(("all_reduce_perf",), kw.pop("returncode", 0), 180.0, 2.0, **kw)  # type: ignore[arg-type]


def node(*results: CollectiveResult, copy_us: float | None = None) -> Node:
    peer = None
    if copy_us is not None:
        peer = PeerCopies((Copy("d2d", "copy_engine", 0, 1, 256 * MiB,
                                timing=Timing.from_samples("cuda_events", [copy_us] * 20)),),
                          settings={"size_bytes": 256 * MiB})
    sweep = Collectives("node", "nccl", 2, ("vm", "vm"), {"sizes": [r.size_bytes for r in results]}, results)
    return Node("vm", (0, 1), peer=peer, collectives=(sweep,))


def report(cc: Crosscheck, benches: tuple[Bench, ...] = (), n: Node | None = None) -> Report:
    return Report("0.1.0", "2026-11-29T00:00:00Z", "vm", "run", Environment(), benches=benches, node=n, crosscheck=cc)


def loop(size: int, us: float) -> LoopTiming:
    return LoopTiming("all_reduce", size, (0, 1), 20, ranks("cuda_events", us))


def nccl_run(mode: str, rows: tuple[NcclTestsRow, ...], **kw: object) -> NcclTestsRun:
    env = {"NCCL_GRAPH_REGISTER": "0"} if mode == "graph_unregistered" else {}
    return NcclTestsRun("all_reduce", mode, ("all_reduce_perf", "-b", "1048576", "-g", "2"), launch(**kw), rows, env)


def captured(name: str) -> dict[str, str]:
    """The text of a committed nccl-tests capture: ``{name: text}`` for a .txt.gz, each member for a .tgz."""
    path = LOGS / name
    if name.endswith(".tgz"):
        with tarfile.open(path) as tar:
            return {m.name: tar.extractfile(m).read().decode("utf-8", "replace")  # type: ignore[union-attr]
                    for m in tar.getmembers() if m.isfile()}
    return {name: gzip.decompress(path.read_bytes()).decode("utf-8", "replace")}


def h100_1949z_with_its_nccl_tests() -> tuple[Report, Report]:
    """The 2 x H100 node run of 2026-11-26 19:49Z, and the same with that call's nccl-tests outputs (graph mode with
    registration off, and the eager loop) put in its cross-checks, as ``envcheck run --crosscheck`` records them."""
    import dataclasses

    from envcheck import model
    from envcheck.node import nccl_tests

    r = model.load(LOGS.parent / "2026-11-26_1949Z_vm_2x-h100_node.json.gz")
    files = captured("2026-11-26_1949Z_2x-h100_nccl-tests.tgz")
    runs = []
    for mode, member in (("graph_unregistered", "nccl_tests/nccl_tests_graph.txt"),
                         ("eager", "nccl_tests/nccl_tests_eager.txt")):
        rows = nccl_tests.parse(files[member])
        runs += [NcclTestsRun(op, mode, (op,), launch(), tuple(x for x in rows if x.op == op),
                              {"NCCL_GRAPH_REGISTER": "0"} if mode != "eager" else {})
                 for op in sorted({x.op for x in rows})]
    return r, dataclasses.replace(r, crosscheck=Crosscheck(nccl_tests=tuple(runs)))


def nccl_captures() -> list[tuple[str, str]]:
    """(where, text) of every committed nccl-tests output (the outputs the device scripts saved)."""
    out = []
    for p in sorted(LOGS.glob("*nccl*tests*")):
        if p.name.endswith((".txt.gz", ".tgz")):
            for member, text in captured(p.name).items():
                if "nccl_tests" in member or member == p.name:
                    out.append((f"{p.name}:{member}", text))
    return out



def full_report() -> Report:
    """Every kind of row: kernels within and outside, a copy, collectives against each nccl-tests mode and the
    plain loop, a tool that hung, a note."""
    from envcheck.model import Note
    from envcheck.model.crosscheck import CopyTiming, ToolRun

    head = bench(case("matmul", "torch", "fp16", MATMUL, 100.0), case("matmul", "triton", "fp16", MATMUL, 110.0),
                 case("relu", "torch", "fp32", (1 << 20,), 5.0))
    g = MiB / 12.0e-6 / 1e9
    us = 256 * MiB / 390e9 * 1e6
    cc = Crosscheck(
        kernels=(kernel("torch", 101.0), kernel("triton", 100.0),
                 KernelTiming(0, "relu", "torch", "fp32", "fp32", (1 << 20,), skipped="fits_l2")),
        copies=(CopyTiming(0, 1, 256 * MiB, 20, [us] * 5),),
        loops=(loop(MiB, 29.75),),
        nccl_tests=(nccl_run("graph_unregistered", (nccl_row(MiB, g),)), nccl_run("eager", (nccl_row(MiB, 40.0),)),
                    nccl_run("graph", (), returncode=None, timed_out=True, stderr_tail="NCCL WARN | stuck")),
        runs=(ToolRun("do_bench_cudagraph", launch(), 0),),
        notes=(Note("crosscheck.nccl_tests_missing", {"binaries": ("alltoall_perf",)}),))
    return report(cc, (head,), node(all_reduce(MiB, 71.0, 12.0), copy_us=us))
