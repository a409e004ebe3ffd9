"""The peer copies' cross-check: a plain torch copy between every ordered pair of the node's GPUs
(``copy_worker.py``) at the size envcheck's peer copies used, as ``CopyTiming`` rows and a ``ToolRun``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from envcheck.child_env import child_env
from envcheck.crosscheck.samples import good_samples
from envcheck.model.crosscheck import CopyTiming, ToolRun
from envcheck.model.node import Launch
from envcheck.node.events import read_events_file
from envcheck.node.launch import Launcher, envcheck_pythonpath
from envcheck.redact import Redactor

WORKER_MODULE = "envcheck.crosscheck.copy_worker"
CALLS = 20  # copies back to back per loop, as tools/evidence/compare_node.py
LOOPS = 5
WARMUP = 3
TIMEOUT_S = 240.0  # as the peer copies' own worker (node/run.py)


def redacted(launch: Launch, env: dict[str, str]) -> Launch:
    """``launch`` with its stderr's tail passed through the redactor of the environment it ran in."""
    return replace(launch, stderr_tail=Redactor(env).text(launch.stderr_tail))


def assemble(events: list[dict[str, Any]], gpus: tuple[int, ...],
             clean: Callable[[str], str] = str) -> tuple[CopyTiming, ...]:
    """``CopyTiming`` rows from the worker's events; ``gpus[i]`` is the machine's index of CUDA device i;
    ``clean`` redacts what the worker wrote."""
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


def run_copies(gpus: tuple[int, ...], size_bytes: int, work_dir: str | os.PathLike[str], launcher: Launcher,
               timeout: float = TIMEOUT_S) -> tuple[tuple[CopyTiming, ...], ToolRun]:
    d = Path(work_dir)
    d.mkdir(parents=True, exist_ok=True)
    plan_path, events_path = d / "copy_plan.json", d / "copy_events.jsonl"
    plan_path.write_text(json.dumps({"size_bytes": size_bytes, "calls": CALLS, "loops": LOOPS, "warmup": WARMUP}),
                         encoding="utf-8")
    env = child_env({"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus),
                     "PYTHONPATH": envcheck_pythonpath(os.environ.get("PYTHONPATH"))})
    argv = [sys.executable, "-m", WORKER_MODULE, "--plan", str(plan_path), "--out", str(events_path)]
    launch = redacted(launcher.run(argv, env, timeout, log_path=str(d / "copy_worker.log")), env)
    events = read_events_file(events_path)
    clean = Redactor(env).text
    error = next((clean(str(e.get("text"))) for e in events if e.get("event") == "error"), None)
    if error is not None and not launch.stderr_tail:
        launch = replace(launch, stderr_tail=error)
    # The launch as the report keeps it: the worker's module and its plan's name, no folder of this machine.
    launch = replace(launch, argv=("python", "-m", WORKER_MODULE))
    return assemble(events, gpus, clean), ToolRun("torch_copy", launch)
