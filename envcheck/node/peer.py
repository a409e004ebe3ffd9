"""Runs the peer-copy worker (``envcheck.node.peer_worker``) through the launcher seam; its events become
``PeerCopies``, GPU indices mapped back from its CUDA numbering (CUDA_VISIBLE_DEVICES) to the machine's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.harness.failures import ChildError, Outcome, to_launch
from envcheck.model.bench import Timing
from envcheck.model.node import Copy, PeerAccess, PeerCopies
from envcheck.node.launch import Launcher

if TYPE_CHECKING:
    from envcheck.outside_json import Json

WORKER_MODULE = "envcheck.node.peer_worker"


@dataclass(frozen=True)
class PeerPlan:
    """256 MiB per copy: ~0.5 ms at NVLink speeds, far above the events' resolution, and fits any GPU."""

    size_bytes: int = 1 << 28
    warmup: int = 3
    iters: int = 20
    bidirectional: bool = True
    methods: tuple[str, ...] = ("copy_engine", "sm_kernel")

    def to_json(self) -> dict[str, Json]:
        return {"size_bytes": self.size_bytes, "warmup": self.warmup, "iters": self.iters,
                "bidirectional": self.bidirectional, "methods": list(self.methods)}


def worker_error(out: Outcome, timeout: float) -> str | None:
    """Why a node worker did not finish (``Launch.ended_early``'s key, its exception, or ``no_done_event``)."""
    if out.done:
        return None
    early = to_launch(out, (), timeout).ended_early
    if early is not None:
        return early
    return out.failure.line if isinstance(out.failure, ChildError) else "no_done_event"


def assemble(events: list[dict[str, Json]], gpus: tuple[int, ...], plan: PeerPlan, error: str | None,
             duration_s: float | None) -> PeerCopies:
    """``PeerCopies`` from the worker's events; ``gpus[i]`` is the machine's index of CUDA device i."""
    def phys(i: Json) -> int | None:
        return gpus[i] if isinstance(i, int) and 0 <= i < len(gpus) else None

    copies, access = [], []
    for ev in events:
        if ev.get("event") == "access":
            a, b = phys(ev.get("a")), phys(ev.get("b"))
            if a is not None and b is not None:
                access.append(PeerAccess(a, b, bool(ev.get("allowed"))))
        elif ev.get("event") == "copy":
            samples = ev.get("samples_us") or []
            copies.append(Copy(ev["kind"], ev["method"], phys(ev.get("src")), phys(ev.get("dst")),
                               int(ev["bytes_per_direction"]), bool(ev.get("bidirectional")),
                               Timing.from_samples("cuda_events", samples) if samples else None,
                               ev.get("wrong"), ev.get("error"), ev.get("pinned")))
    return PeerCopies(tuple(copies), tuple(access), plan.to_json(), error, duration_s)


def run_peer_copies(plan: PeerPlan, gpus: tuple[int, ...], launcher: Launcher, timeout: float) -> PeerCopies:
    events: list[Json] = []
    out = launcher.spawn(f"{WORKER_MODULE}:run", plan.to_json(),
                         {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus)}, timeout, events.append)
    return assemble([e for e in events if isinstance(e, dict)], gpus, plan, worker_error(out, timeout), out.wall_s)
