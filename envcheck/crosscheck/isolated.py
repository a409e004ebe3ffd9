"""One cross-check worker run isolated, as the suite's worker is (``envcheck.bench.process``): its own session
and scope, its plan on stdin, its events read line by line (bounded, redacted), a time limit, and its whole
tree ended however it ends. Returns the events it wrote and a ``Launch`` saying how it ended (timed out,
stopped, its exit status and the tail of its stderr, redacted): a hung or failing tool is a finding of its
own (``envcheck.analysis.crosscheck``), never a hang of ``envcheck run``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from envcheck.bench.process import Ended, Popen, WorkerProcess
from envcheck.model.node import Launch

GRACE_S = 5.0  # SIGTERM, then SIGKILL: a worker stuck in a CUDA call ignores SIGTERM
DONE_DRAIN_S = 5.0  # after "done", how long the worker may take to exit (CUDA teardown) before it is stopped


@dataclass
class Isolated:
    """What the worker wrote (its decoded JSON events, in order) and how its run ended."""

    events: list[dict[str, Any]] = field(default_factory=list)
    launch: Launch | None = None

    @property
    def done(self) -> bool:
        return any(e.get("event") == "done" for e in self.events)


def run_isolated(argv: Sequence[str], plan: dict[str, Any], timeout: float, *, stop: threading.Event | None = None,
                 popen: Popen | None = None, grace_s: float = GRACE_S,
                 clock: Callable[[], float] = time.monotonic) -> Isolated:
    """Run ``argv`` with ``plan`` (JSON) on its stdin until it ends, ``timeout`` seconds pass or ``stop`` is set
    (another thread's Ctrl-C: the launch is then ``interrupted``). Never raises for what the worker does;
    KeyboardInterrupt in this thread stops the worker and is raised again."""
    out = Isolated()
    start = clock()
    try:
        proc = WorkerProcess.start(argv, popen) if popen else WorkerProcess.start(argv)
    except OSError as e:
        out.launch = Launch(tuple(argv), None, timeout, 0.0, error=f"could not start ({type(e).__name__}: {e})")
        return out
    timed_out = interrupted = False
    done_at: float | None = None
    try:
        proc.send(json.dumps(plan))
        while True:
            now = clock()
            if now - start >= timeout:
                timed_out = True
                break
            if stop is not None and stop.is_set():
                interrupted = True
                break
            if out.done:
                done_at = now if done_at is None else done_at
                if now - done_at >= DONE_DRAIN_S:
                    break
            line = proc.next_line(0.2)
            if line is None:
                continue
            if isinstance(line, Ended):
                break
            _keep(out, proc, line)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        # Its output closed or "done" came: it is exiting (or hung in CUDA's teardown, then stopped).
        if timed_out or interrupted or not proc.wait(grace_s):
            proc.stop(grace_s)
        proc.join_readers()
        for line in proc.drain():
            _keep(out, proc, line)
        out.launch = Launch(tuple(argv), proc.returncode, timeout, round(clock() - start, 3), timed_out=timed_out,
                            interrupted=interrupted, stderr_tail="\n".join(proc.tail))
    return out


def _keep(out: Isolated, proc: WorkerProcess, line: str) -> None:
    """One stdout line as an event (redacted); a line that is not one is left out (the stderr tail says why)."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return
    if isinstance(data, dict) and isinstance(data.get("event"), str):
        clean = proc.clean(data)
        assert isinstance(clean, dict)
        out.events.append(clean)
