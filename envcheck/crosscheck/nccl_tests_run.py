"""nccl-tests, where found (``$NCCL_TESTS_DIR`` or its ``build/``, else ``PATH``), on the node's GPUs in each of
``MODES`` at the sweep's sizes, one process driving every GPU, each run through the node's launcher with a time
limit; a run that hangs or fails is kept with its exit status and its output's tail.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from envcheck.harness.env import clean_env
from envcheck.model import Note
from envcheck.model.crosscheck import NcclTestsRun
from envcheck.node import nccl_tests
from envcheck.node.launch import Launcher

ENV_DIR = "NCCL_TESTS_DIR"
BINARIES = {op: binary for binary, op in nccl_tests.BINARIES.items()}  # envcheck's op -> nccl-tests' binary
TIMEOUT_S = 180.0  # one binary in one mode, 1 MiB .. 4 GiB: about 10 s on 2 x H200 in graph mode
WARMUP = ("-w", "5")


@dataclass(frozen=True)
class Mode:
    """One way nccl-tests times a collective: its arguments (``small`` below ``LARGE_BYTES``, ``large`` from it),
    its NCCL settings, and how many processes time the large sizes."""

    name: str  # model.crosscheck.NCCL_TESTS_MODES
    small: tuple[str, ...]
    large: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    large_runs: int = 1


LARGE_BYTES = 256 << 20
# The eager loop, graph mode with NCCL's defaults (buffers registered) and with registration off, the counterpart
# of torch's unregistered buffers (docs/node.md). Below LARGE_BYTES a graph's start is shared by 4000 calls and
# the buffers span 3x the largest size (a cold L2); from it, ``large_runs`` processes, each allocating once.
_GRAPH_SMALL = (*WARMUP, "-n", "40", "-G", "100")
_GRAPH_LARGE = (*WARMUP, "-n", "20", "-G", "5")
_GRAPH_ENV = {"NCCL_GRAPH_MIXING_SUPPORT": "0"}
MODES = (
    Mode("eager", (*WARMUP, "-n", "20"), (*WARMUP, "-n", "20")),
    Mode("graph", _GRAPH_SMALL, _GRAPH_LARGE, _GRAPH_ENV, large_runs=2),
    Mode("graph_unregistered", _GRAPH_SMALL, _GRAPH_LARGE, {**_GRAPH_ENV, "NCCL_GRAPH_REGISTER": "0"}, large_runs=2),
)


def find_binaries(ops: Sequence[str], environ: Mapping[str, str] | None = None,
                  which: Callable[[str], str | None] = shutil.which) -> dict[str, str]:
    """op -> the path of its nccl-tests binary, for each op of ``ops`` found."""
    environ = os.environ if environ is None else environ
    folder = environ.get(ENV_DIR, "").strip()
    found: dict[str, str] = {}
    for op in ops:
        name = BINARIES.get(op)
        if name is None:
            continue
        if folder:
            for d in (Path(folder), Path(folder) / "build"):
                p = d / name
                if p.is_file() and os.access(p, os.X_OK):
                    found[op] = str(p)
                    break
        else:
            path = which(name)
            if path:
                found[op] = path
    return found


def size_args(sizes: Sequence[int]) -> tuple[str, ...]:
    """``-b``, ``-e`` and ``-f`` covering ``sizes``: their own factor where they grow by one, else doubling."""
    lo, hi = min(sizes), max(sizes)
    ordered = sorted(set(sizes))
    factor = 2
    if len(ordered) > 1 and ordered[1] % ordered[0] == 0:
        f = ordered[1] // ordered[0]
        if all(b == a * f for a, b in zip(ordered, ordered[1:], strict=False)):
            factor = f
    return ("-b", str(lo), "-e", str(hi), "-f", str(factor))


@dataclass(frozen=True)
class NcclTestsChecks:
    runs: tuple[NcclTestsRun, ...] = ()
    notes: tuple[Note, ...] = ()
    stopped: bool = False


def run_nccl_tests(ops: Sequence[str], sizes: Sequence[int], gpus: tuple[int, ...], work_dir: str | os.PathLike[str],
                   launcher: Launcher, environ: Mapping[str, str] | None = None,
                   timeout: float = TIMEOUT_S) -> NcclTestsChecks:
    """Every op's binary in every mode, one after another; Ctrl-C (a launch ``interrupted``) stops the rest."""
    environ = os.environ if environ is None else environ
    found = find_binaries(ops, environ)
    notes: list[Note] = []
    missing = tuple(BINARIES[op] for op in ops if op in BINARIES and op not in found)
    if not found:
        return NcclTestsChecks(notes=(Note("crosscheck.nccl_tests_not_found",
                                           {"variable": ENV_DIR, "folder": environ.get(ENV_DIR, "").strip() or "-"}),))
    if missing:
        notes.append(Note("crosscheck.nccl_tests_missing", {"binaries": missing}))
    d = Path(work_dir)
    d.mkdir(parents=True, exist_ok=True)
    runs: list[NcclTestsRun] = []
    for op, mode in itertools.product([o for o in ops if o in found], MODES):
        for part, extra, times, (lo, hi) in _parts(mode, sizes):
            for k in range(times):
                args = (*part, "-g", str(len(gpus)), *extra)
                env = clean_env({"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus), **mode.env}, base=environ)
                log = d / f"{BINARIES[op]}.{mode.name}.{part[1]}.{k}.log"
                log.unlink(missing_ok=True)  # the launcher appends: the output parsed is this run's alone
                launch = launcher.run([found[op], *args], env, timeout, log_path=str(log))
                text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
                argv = (BINARIES[op], *args)  # the binary's name: its folder is this machine's
                rows = tuple(r for r in nccl_tests.parse(text) if r.size_bytes >= lo and r.size_bytes < hi)
                runs.append(NcclTestsRun(op, mode.name, argv, replace(launch, argv=argv), rows, dict(mode.env),
                                         nccl_tests.version(text)))
                if launch.interrupted:
                    return NcclTestsChecks(tuple(runs), tuple(notes), True)
    return NcclTestsChecks(tuple(runs), tuple(notes))


def _parts(mode: Mode, sizes: Sequence[int]) -> list[tuple[tuple[str, ...], tuple[str, ...], int, tuple[int, int]]]:
    """(size arguments, mode arguments, processes, [lowest, highest) size kept) of each run ``mode`` takes."""
    if mode.small == mode.large:
        return [(size_args(sizes), mode.small, 1, (0, 1 << 62))]
    small = [s for s in sizes if s < LARGE_BYTES]
    large = [s for s in sizes if s >= LARGE_BYTES]
    out = []
    if small:
        b, lo, e, _hi, f, factor = size_args(small)
        out.append(((b, lo, e, str(3 * max(small)), f, factor), mode.small, 1, (0, LARGE_BYTES)))
    if large:
        out.append((size_args(large), mode.large, mode.large_runs, (LARGE_BYTES, 1 << 62)))
    return out
