"""``--crosscheck``: the same work timed again by independent tools, each in a child with a time limit, kept raw (each
GPU's headline cases; on a node the copies, the sweep's plain loop and nccl-tests). One that does not apply is a
note; Ctrl-C keeps what the others measured."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.crosscheck import good_samples
from envcheck.harness.failures import ChildError, to_launch
from envcheck.model import Bench, Note
from envcheck.model.bench import Timing
from envcheck.model.crosscheck import CopyTiming, Crosscheck, KernelTiming, LoopTiming, NcclTestsRun, ToolRun
from envcheck.model.node import COLLECTIVES, Collectives, Node, RankTiming
from envcheck.node.collective_run import RankOutput, read_outputs
from envcheck.node.crosscheck_loop import EVENT as LOOP_EVENT
from envcheck.node.events import read_events
from envcheck.node.launch import Launcher
from envcheck.probes.collect import utc_now

if TYPE_CHECKING:
    from envcheck.outside_json import Json

INTERPRET_VAR = "TRITON_INTERPRET"
SWEEP_FOLDER = "collectives"  # where node/steps.py's run_node puts the sweep's files in the node's work folder
COPY_WORKER = "envcheck.crosscheck.copy_worker"  # a plain torch copy between every ordered pair of the node's GPUs
COPY_CALLS = 20  # copies back to back per loop, as tools/evidence/compare_node.py
COPY_LOOPS = 5
COPY_WARMUP = 3
COPY_TIMEOUT_S = 240.0  # as the peer copies' own worker (node/steps.py)


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
    gpus = kernel_crosscheck(benches, environ=environ, command=kernel_command)
    if gpus.stopped or node is None or gpus.crosscheck.notes:  # stopped, no node, or not available here
        return gpus
    return merged(gpus, node_crosscheck(node, work_dir, launcher=launcher, environ=environ))


def kernel_crosscheck(benches: Sequence[Bench], *, environ: Mapping[str, str] | None = None,
                      command: Sequence[str] | None = None,
                      cuda_indices: Mapping[int, int] | None = None) -> CrosscheckRun:
    """Each GPU bench's headline cases against do_bench_cudagraph (``cuda_indices``: for a fleet rank's GPU)."""
    from envcheck.crosscheck.kernels import run_kernels

    got = _Parts()
    why = unavailable(benches, os.environ if environ is None else environ)
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


def copy_rows(events: list[dict[str, Json]], gpus: tuple[int, ...],
              clean: Callable[[str], str] = str) -> tuple[CopyTiming, ...]:
    """``CopyTiming`` rows from the copy worker's events; ``gpus[i]`` is the machine's index of CUDA device i."""
    out = []
    for ev in events:
        if ev.get("event") != "copy":
            continue
        src, dst = ev.get("src"), ev.get("dst")
        if not (isinstance(src, int) and isinstance(dst, int) and 0 <= src < len(gpus) and 0 <= dst < len(gpus)):
            continue
        samples = good_samples(ev.get("samples_us"))
        size, calls = ev.get("size_bytes"), ev.get("calls")
        out.append(CopyTiming(gpus[src], gpus[dst], size if isinstance(size, int) and size > 0 else 0,
                              calls if isinstance(calls, int) and calls >= 1 else 1, samples,  # type: ignore[arg-type]
                              None if samples is not None else clean(str(ev.get("error") or "no samples"))))
    return tuple(out)


def run_copies(gpus: tuple[int, ...], size_bytes: int, launcher: Launcher,
               timeout: float = COPY_TIMEOUT_S) -> tuple[tuple[CopyTiming, ...], ToolRun]:
    events: list[Json] = []
    plan = {"size_bytes": size_bytes, "calls": COPY_CALLS, "loops": COPY_LOOPS, "warmup": COPY_WARMUP}
    out = launcher.spawn(f"{COPY_WORKER}:run", plan, {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus)},
                         timeout, events.append)
    launch = to_launch(out, ("python", "-m", COPY_WORKER), timeout)
    if isinstance(out.failure, ChildError) and not launch.stderr_tail:
        launch = replace(launch, stderr_tail=out.failure.line)
    return copy_rows([e for e in events if isinstance(e, dict)], gpus), ToolRun("torch_copy", launch)


def loop_rows(outputs: Sequence[RankOutput], clean: Callable[[str], str] = str) -> tuple[LoopTiming, ...]:
    """One ``LoopTiming`` per (op, size) any rank of the sweep's plain loop (node.crosscheck_loop) reported, in the
    order they ran, each rank's samples kept; ``clean`` redacts errors."""
    got: dict[tuple[str, int], dict[int, dict[str, Json]]] = {}
    for o in outputs:
        for ev in read_events(o.events_text):
            if ev["event"] != LOOP_EVENT or ev.get("op") not in COLLECTIVES or not isinstance(ev.get("size_bytes"), int):
                continue
            got.setdefault((str(ev["op"]), int(ev["size_bytes"])), {})[o.rank] = ev
    out = []
    for (op, size), by_rank in got.items():
        first = next(iter(by_rank.values()))
        ranks = tuple(int(r) for r in first.get("ranks") or sorted(by_rank) if isinstance(r, int))
        method = "host_clock" if first.get("method") == "host_clock" else "cuda_events"
        timings = tuple(RankTiming(r, Timing.from_samples(method, s))
                        for r, ev in sorted(by_rank.items()) if (s := good_samples(ev.get("samples_us"))) is not None)
        error = next((clean(str(ev["error"])) for ev in by_rank.values() if ev.get("error")), None)
        skipped = next((str(ev["skipped"]) for ev in by_rank.values() if ev.get("skipped")), None)
        if error is None and skipped is None and len(timings) < len(ranks):
            error = f"ranks without samples: {sorted(set(ranks) - {t.rank for t in timings})}"
        calls = first.get("calls")
        out.append(LoopTiming(op, size, ranks, int(calls) if isinstance(calls, int) and calls >= 1 else 1, timings,
                              error, skipped))
    return tuple(out)


def read_loops(sweep_dir: str | os.PathLike[str], clean: Callable[[str], str] = str) -> tuple[LoopTiming, ...]:
    """The loops the sweep's ranks ran (none when the folder or the events are missing)."""
    return loop_rows(read_outputs(sweep_dir), clean) if os.path.isdir(sweep_dir) else ()


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
