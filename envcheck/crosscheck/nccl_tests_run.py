"""nccl-tests, where it is found, run on the node's GPUs in each of its modes at the sweep's sizes: the
independent counterpart of envcheck's collective numbers (``envcheck.analysis.crosscheck`` pairs them).

Where: ``$NCCL_TESTS_DIR`` (the folder holding ``all_reduce_perf`` and the others, or its ``build/``), else
each binary on ``PATH``. Not found: a note naming ``NCCL_TESTS_DIR``, not a failure.

How: one process driving every GPU of the node (``-g N``, nccl-tests built without MPI), its GPUs those of the
sweep (``CUDA_VISIBLE_DEVICES``), ``-b``/``-e``/``-f`` covering the sweep's sizes, ``-w 5``, in each of
``MODES``; each run through the node's launcher seam with a time limit of its own, its output parsed by
``envcheck.node.nccl_tests``. A run that hangs or fails is kept with its exit status and the tail of its
output (redacted): a finding of its own, the other runs go on.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from envcheck.child_env import child_env
from envcheck.crosscheck.copies import redacted
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
    """One way nccl-tests times a collective: its arguments beyond the sizes, and the NCCL settings it is given."""

    name: str  # model.crosscheck.NCCL_TESTS_MODES
    args: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


# Its eager loop (-n 20: each call launched from the host, what its default run reports), its CUDA-graph mode
# (-n 20 -G 10: 20 calls captured once, the graph launched 10 times) with NCCL's defaults, where NCCL registers
# the buffers of the captured graph (nccl-tests' cudaMalloc buffers, one process for every GPU), and with that
# registration off (NCCL_GRAPH_REGISTER=0), as torch's caching-allocator buffers are not registered
# (evidence/device-logs/2026-11-25_2212Z_2x-h100_nccl-tests_graph_register.txt.gz).
MODES = (
    Mode("eager", (*WARMUP, "-n", "20")),
    Mode("graph", (*WARMUP, "-n", "20", "-G", "10")),
    Mode("graph_unregistered", (*WARMUP, "-n", "20", "-G", "10"), {"NCCL_GRAPH_REGISTER": "0"}),
)


def find_binaries(ops: Sequence[str], environ: Mapping[str, str] | None = None,
                  which: Callable[[str], str | None] = shutil.which) -> dict[str, str]:
    """op -> the path of its nccl-tests binary, for each op of ``ops`` found: in ``$NCCL_TESTS_DIR`` (or its
    ``build/``) when set, else on ``PATH``."""
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
    """``-b``, ``-e`` and ``-f`` covering ``sizes``: their own factor where they grow by one (nccl-tests' ``-f``),
    else doubling, which reaches every power of two between them."""
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
    sweep = size_args(sizes)
    for op in ops:
        if op not in found:
            continue
        for mode in MODES:
            args = (*sweep, "-g", str(len(gpus)), *mode.args)
            env = child_env({"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus), **mode.env}, base=environ)
            log = d / f"{BINARIES[op]}.{mode.name}.log"
            log.unlink(missing_ok=True)  # the launcher appends: the output parsed is this run's alone
            launch = redacted(launcher.run([found[op], *args], env, timeout, log_path=str(log)), env)
            text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
            argv = (BINARIES[op], *args)  # the binary's name: its folder is this machine's
            runs.append(NcclTestsRun(op, mode.name, argv, replace(launch, argv=argv), nccl_tests.parse(text),
                                     dict(mode.env), nccl_tests.version(text)))
            if launch.interrupted:
                return NcclTestsChecks(tuple(runs), tuple(notes), True)
    return NcclTestsChecks(tuple(runs), tuple(notes))
