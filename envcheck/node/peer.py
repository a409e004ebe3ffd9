"""Runs the peer-copy worker (``envcheck.node.peer_worker``) through the launcher seam and turns its
events into ``PeerCopies``, with GPU indices mapped back from the worker's CUDA numbering (it sees
only the selected GPUs, through CUDA_VISIBLE_DEVICES) to the machine's.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envcheck.harness.env import clean_env as child_env
from envcheck.model.bench import Timing
from envcheck.model.node import Copy, PeerAccess, PeerCopies
from envcheck.node.events import launch_error, read_events_file
from envcheck.node.launch import Launcher, envcheck_pythonpath

WORKER_MODULE = "envcheck.node.peer_worker"


@dataclass(frozen=True)
class PeerPlan:
    """256 MiB per copy: at NVLink speeds (~0.5 ms) far above the event resolution, and small enough
    for any GPU. nvbandwidth's defaults are similar (64 MiB buffers, more iterations)."""

    size_bytes: int = 1 << 28
    warmup: int = 3
    iters: int = 20
    bidirectional: bool = True
    methods: tuple[str, ...] = ("copy_engine", "sm_kernel")

    def to_json(self) -> dict[str, Any]:
        return {"size_bytes": self.size_bytes, "warmup": self.warmup, "iters": self.iters,
                "bidirectional": self.bidirectional, "methods": list(self.methods)}


def assemble(events: list[dict[str, Any]], gpus: tuple[int, ...], plan: PeerPlan, error: str | None,
             duration_s: float | None) -> PeerCopies:
    """``PeerCopies`` from the worker's events; ``gpus[i]`` is the machine's index of CUDA device i."""
    def phys(i: Any) -> int | None:
        return gpus[i] if isinstance(i, int) and 0 <= i < len(gpus) else None

    copies, access = [], []
    for ev in events:
        if ev["event"] == "access":
            a, b = phys(ev.get("a")), phys(ev.get("b"))
            if a is not None and b is not None:
                access.append(PeerAccess(a, b, bool(ev.get("allowed"))))
        elif ev["event"] == "copy":
            samples = ev.get("samples_us") or []
            copies.append(Copy(ev["kind"], ev["method"], phys(ev.get("src")), phys(ev.get("dst")),
                               int(ev["bytes_per_direction"]), bool(ev.get("bidirectional")),
                               Timing.from_samples("cuda_events", samples) if samples else None,
                               ev.get("wrong"), ev.get("error"), ev.get("pinned")))
    err = next((str(e.get("text")) for e in events if e["event"] == "error"), None)
    if error is None and err is None and not any(e["event"] == "done" for e in events):
        err = "no_done_event"
    return PeerCopies(tuple(copies), tuple(access), plan.to_json(), error or err, duration_s)


def run_peer_copies(plan: PeerPlan, gpus: tuple[int, ...], out_dir: str | os.PathLike[str], launcher: Launcher,
                    timeout: float) -> PeerCopies:
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    plan_path, events_path = d / "peer_plan.json", d / "peer_events.jsonl"
    plan_path.write_text(json.dumps(plan.to_json()), encoding="utf-8")
    env = child_env({"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus),
                     "PYTHONPATH": envcheck_pythonpath(os.environ.get("PYTHONPATH"))})
    argv = [sys.executable, "-m", WORKER_MODULE, "--plan", str(plan_path), "--out", str(events_path)]
    launch = launcher.run(argv, env, timeout, log_path=str(d / "peer_worker.log"))
    return assemble(read_events_file(events_path), gpus, plan, launch_error(launch), launch.wall_s)
