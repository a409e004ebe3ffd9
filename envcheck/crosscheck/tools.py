"""``--crosscheck``: the same work timed again by independent tools, each in a child with a time limit, kept raw (each
GPU's headline cases; on a node the copies, the sweep's plain loop and nccl-tests). One that does not apply is a
note; Ctrl-C keeps what the others measured."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from envcheck.model import Bench, Note
from envcheck.model.crosscheck import CopyTiming, Crosscheck, KernelTiming, LoopTiming, NcclTestsRun, ToolRun
from envcheck.model.node import Collectives, Node
from envcheck.node.launch import Launcher
from envcheck.probes.collect import utc_now

INTERPRET_VAR = "TRITON_INTERPRET"
SWEEP_FOLDER = "collectives"  # where node/steps.py's run_node puts the sweep's files in the node's work folder


@dataclass(frozen=True)
class CrosscheckRun:
    crosscheck: Crosscheck
    stopped: bool = False


def unavailable(benches: Sequence[Bench], environ: Mapping[str, str]) -> Note | None:
    """Why the cross-checks do not apply to this run (a note, not a failure), or None."""
    if not any(b.device.backend == "cuda" for b in benches):
        return Note("crosscheck.no_cuda")
    if environ.get(INTERPRET_VAR, "").strip() not in ("", "0"):
        return Note("crosscheck.interpreted", {"variable": INTERPRET_VAR})
    return None


def _copy_size(node: Node) -> int | None:
    """The size envcheck's copy-engine peer copies used, where they ran."""
    if node.peer is None or not any(c.kind == "d2d" and c.method == "copy_engine" for c in node.peer.copies):
        return None
    size = node.peer.settings.get("size_bytes")
    return int(size) if isinstance(size, int) and size > 0 else None


def run_crosscheck(benches: Sequence[Bench], node: Node | None = None, work_dir: str | os.PathLike[str] | None = None,
                   *, launcher: Launcher | None = None, environ: Mapping[str, str] | None = None,
                   kernel_command: Sequence[str] | None = None) -> CrosscheckRun:
    """The GPUs' cross-checks, then the node's (``work_dir``: the node tests' folder, the sweep's events there)."""
    environ = os.environ if environ is None else environ
    gpus = kernel_crosscheck(benches, environ=environ, command=kernel_command)
    if gpus.stopped or node is None or gpus.crosscheck.notes:  # stopped, no node, or not available here
        return gpus
    return merged(gpus, node_crosscheck(node, work_dir, launcher=launcher, environ=environ))


def kernel_crosscheck(benches: Sequence[Bench], *, environ: Mapping[str, str] | None = None,
                      command: Sequence[str] | None = None,
                      cuda_indices: Mapping[int, int] | None = None) -> CrosscheckRun:
    """Each GPU bench's headline cases against do_bench_cudagraph (``cuda_indices``: for a fleet rank's GPU)."""
    from envcheck.crosscheck.kernels import run_kernels

    environ = os.environ if environ is None else environ
    got = _Parts()
    why = unavailable(benches, environ)
    if why is not None:
        got.notes.append(why)
        return got.done()
    kernels = run_kernels(benches, command, cuda_indices=cuda_indices)
    got.kernels, got.runs = kernels.rows, list(kernels.runs)
    return got.done(kernels.stopped)


def node_crosscheck(node: Node, work_dir: str | os.PathLike[str] | None, *, launcher: Launcher | None = None,
                    environ: Mapping[str, str] | None = None) -> CrosscheckRun:
    """The node's copies, collectives' loop and nccl-tests (a fleet node's leader runs it after the node tests)."""
    environ = os.environ if environ is None else environ
    got = _Parts()
    if node.settings.get("device", "cuda") != "cuda":
        got.notes.append(Note("crosscheck.no_cuda"))
        return got.done()
    if len(node.gpus) < 2:
        got.notes.append(Note("crosscheck.single_gpu"))
        return got.done()
    if launcher is None:
        from envcheck.node.launch import SubprocessLauncher

        launcher = SubprocessLauncher()
    from envcheck.crosscheck.copies import run_copies
    from envcheck.crosscheck.loops import read_loops
    from envcheck.crosscheck.nccl_tests_run import run_nccl_tests
    from envcheck.redact import Redactor

    work = Path(work_dir) if work_dir is not None else Path.cwd()
    size = _copy_size(node)
    if size is not None:
        got.copies, run = run_copies(node.gpus, size, launcher)
        got.runs.append(run)
        if run.launch.interrupted:
            return got.done(True)
    got.loops = read_loops(work / SWEEP_FOLDER, Redactor(environ).text)
    sweep = next((c for c in node.collectives if c.scope == "node"), None)
    if sweep is None or sweep.backend != "nccl":
        return got.done()
    ops, sizes = nccl_tests_sweep(sweep)
    if not (ops and sizes):
        return got.done()
    nccl = run_nccl_tests(ops, sizes, node.gpus, work / "crosscheck" / "nccl_tests", launcher, environ)
    got.nccl = nccl.runs
    got.notes += nccl.notes
    return got.done(nccl.stopped)


def nccl_tests_sweep(sweep: Collectives) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The ops and sizes nccl-tests runs: those the sweep measured (a size it skipped would fail there too)."""
    from envcheck.analysis.collectives import layout

    measured = {(r.op, r.size_bytes) for r in sweep.results if not r.skipped and r.timings}
    ops = tuple(dict.fromkeys(r.op for r in sweep.results if (r.op, r.size_bytes) in measured))
    planned = sorted({s for s in sweep.settings.get("sizes") or () if isinstance(s, int) and s > 0})
    sizes = tuple(s for s in planned
                  if any((op, layout(op, s, sweep.world_size, 4).size_bytes) in measured for op in ops))
    return ops, sizes


def merged(*parts: CrosscheckRun) -> CrosscheckRun:
    """Several parts' cross-checks as one (``Crosscheck.joined``), stopped where any part was."""
    return CrosscheckRun(Crosscheck.joined(*(p.crosscheck for p in parts)), any(p.stopped for p in parts))


@dataclass
class _Parts:
    """What one part's steps gathered so far (a stop keeps it), and when it started."""

    kernels: tuple[KernelTiming, ...] = ()
    copies: tuple[CopyTiming, ...] = ()
    loops: tuple[LoopTiming, ...] = ()
    nccl: tuple[NcclTestsRun, ...] = ()
    runs: list[ToolRun] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    started: str = field(default_factory=utc_now)
    t0: float = field(default_factory=time.monotonic)

    def done(self, stopped: bool = False) -> CrosscheckRun:
        from envcheck.crosscheck.kernels import ROUNDS
        from envcheck.crosscheck.nccl_tests_run import MODES

        settings: dict[str, object] = {"kernel_rounds": ROUNDS} if self.kernels else {}
        if self.nccl:
            settings["nccl_tests_modes"] = {m.name: " ".join(m.args) for m in MODES}
        return CrosscheckRun(Crosscheck(self.kernels, self.copies, self.loops, self.nccl, tuple(self.runs),
                                        tuple(self.notes), settings, self.started,
                                        round(time.monotonic() - self.t0, 3)), stopped)
