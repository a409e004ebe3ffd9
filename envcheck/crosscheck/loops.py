"""The collectives' plain ``torch.distributed`` loop, as the sweep's ranks wrote it (node.crosscheck_loop), in
``LoopTiming`` rows: one per (op, size), each rank's samples kept."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from envcheck.crosscheck import good_samples
from envcheck.model.bench import Timing
from envcheck.model.crosscheck import LoopTiming
from envcheck.model.node import COLLECTIVES, RankTiming
from envcheck.node.collective_run import RankOutput, read_outputs
from envcheck.node.crosscheck_loop import EVENT
from envcheck.node.events import read_events

if TYPE_CHECKING:
    from envcheck.outside_json import Json


def assemble(outputs: Sequence[RankOutput], clean: Callable[[str], str] = str) -> tuple[LoopTiming, ...]:
    """One ``LoopTiming`` per (op, size) any rank reported, in the order they ran; ``clean`` redacts errors."""
    got: dict[tuple[str, int], dict[int, dict[str, Json]]] = {}
    for o in outputs:
        for ev in read_events(o.events_text):
            if ev["event"] != EVENT or ev.get("op") not in COLLECTIVES or not isinstance(ev.get("size_bytes"), int):
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
    if not os.path.isdir(sweep_dir):
        return ()
    return assemble(read_outputs(sweep_dir), clean)
