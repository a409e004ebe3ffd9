"""The JSON-lines files through which the node workers (``collective_worker``, ``peer_worker``) report
to their parents (``collective_run``, ``peer``): one JSON object per line, each with an ``event``
name. The worker writes and flushes every event as it happens, so whatever finished before a crash,
a hang or a timeout is on disk; the parent skips lines that are not events (one cut short by a kill).
Which events each worker writes is in its own docstring.

Kept light (no torch, no envcheck.model at run time): a worker imports this before anything that can
fail, so that its first event gets written.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envcheck.model.node import Launch


def plan_worker_main(prog: str, run: Callable[[dict[str, Any], Emitter], None], argv: list[str] | None = None) -> int:
    """A worker's ``main``: ``--plan PLAN.json --out EVENTS.jsonl``; ``start``, what ``run`` emits, then ``done``, or
    ``error`` with the exception in one line (also on stderr) and exit status 1."""
    import argparse

    from envcheck.bench.failure import one_line

    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--plan", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    with open(args.out, "a", encoding="utf-8") as f:
        emit = Emitter(f)
        emit({"event": "start", "pid": os.getpid()})
        try:
            with open(args.plan, encoding="utf-8") as pf:
                run(json.load(pf), emit)
        except BaseException as e:  # noqa: BLE001 - the parent reads the reason from the file
            emit({"event": "error", "text": one_line(e)})
            print(f"{prog}: {one_line(e)}", file=sys.stderr)
            return 1
        emit({"event": "done"})
    return 0


class Emitter:
    """Writes one event per line on ``stream`` and flushes it at once."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def __call__(self, event: dict[str, Any]) -> None:
        self.stream.write(json.dumps(event, separators=(",", ":")) + "\n")
        self.stream.flush()


def read_events(text: str) -> list[dict[str, Any]]:
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


def read_events_file(path: Path) -> list[dict[str, Any]]:
    """The events in the file at ``path``; none when the worker never created it."""
    if not path.exists():
        return []
    return read_events(path.read_text(encoding="utf-8", errors="replace"))


def launch_error(launch: Launch) -> str | None:
    """Why a worker's launch ended before the worker did: ``interrupted`` (Ctrl-C), ``timed_out``
    or ``launch_failed`` (it could not start); None when the worker ran to its own end."""
    return launch.ended_early
