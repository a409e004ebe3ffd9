"""The peer copies' cross-check: a plain torch copy between every ordered pair of the node's GPUs
(``copy_worker.py``) at the size envcheck's peer copies used, as ``CopyTiming`` rows and a ``ToolRun``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from envcheck.crosscheck import good_samples
from envcheck.harness.failures import ChildError, to_launch
from envcheck.model.crosscheck import CopyTiming, ToolRun
from envcheck.node.launch import Launcher

if TYPE_CHECKING:
    from envcheck.outside_json import Json

WORKER_MODULE = "envcheck.crosscheck.copy_worker"
CALLS = 20  # copies back to back per loop, as tools/evidence/compare_node.py
LOOPS = 5
WARMUP = 3
TIMEOUT_S = 240.0  # as the peer copies' own worker (node/steps.py)


def assemble(events: list[dict[str, Json]], gpus: tuple[int, ...],
             clean: Callable[[str], str] = str) -> tuple[CopyTiming, ...]:
    """``CopyTiming`` rows from the worker's events; ``gpus[i]`` is the machine's index of CUDA device i."""
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
               timeout: float = TIMEOUT_S) -> tuple[tuple[CopyTiming, ...], ToolRun]:
    events: list[Json] = []
    plan = {"size_bytes": size_bytes, "calls": CALLS, "loops": LOOPS, "warmup": WARMUP}
    out = launcher.spawn(f"{WORKER_MODULE}:run", plan, {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus)},
                         timeout, events.append)
    launch = to_launch(out, ("python", "-m", WORKER_MODULE), timeout)
    if isinstance(out.failure, ChildError) and not launch.stderr_tail:
        launch = replace(launch, stderr_tail=out.failure.line)
    return assemble([e for e in events if isinstance(e, dict)], gpus), ToolRun("torch_copy", launch)
