"""The JSON-lines events files of the torchrun ranks (``collective_worker``) for their parent (``collective_run``):
one object per line, flushed as it happens, so what finished before a crash is on disk. Light (no torch, no
model): a worker imports it before anything that can fail."""

from __future__ import annotations

import json
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from envcheck.outside_json import Json


class Emitter:
    """Writes one event per line on ``stream`` and flushes it at once."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def __call__(self, event: dict[str, Json]) -> None:
        self.stream.write(json.dumps(event, separators=(",", ":")) + "\n")
        self.stream.flush()


def read_events(text: str) -> list[dict[str, Json]]:
    """The events in ``text``, in order; other lines are skipped."""
    out = []
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        if isinstance(ev, dict) and isinstance(ev.get("event"), str):
            out.append(ev)
    return out
