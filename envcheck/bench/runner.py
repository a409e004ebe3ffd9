"""Runs the isolated benchmark worker and gathers what it reports.

The worker (``python -m envcheck.bench.worker``) imports torch, initialises CUDA and
compiles Triton kernels: any of those can segfault or hang on a broken install, so it
runs in its own process and session, reads one JSON plan on stdin and writes one JSON
event per line on stdout. This module feeds it, reads the events as they come (for
progress), and survives everything the worker can do: crash, hang past the time
limit, print garbage, or be cut short by Ctrl-C. What finished is always kept.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from envcheck import model
from envcheck.bench.suite import Plan
from envcheck.model import Bench, BenchDevice, Case, Ceiling, Skip

WORKER_COMMAND = (sys.executable, "-m", "envcheck.bench.worker")
TERMINATE_GRACE_S = 5.0  # SIGTERM, then SIGKILL: a worker stuck in a CUDA call ignores SIGTERM
EXITED_DRAIN_S = 2.0  # a dead worker's children can hold stdout open: stop waiting for EOF after this
# After "done" every case is reported: a worker still running this long after it (hung in CUDA
# teardown at exit) is stopped, and the run is complete all the same.
DONE_DRAIN_S = 5.0
STDERR_TAIL_LINES = 40
MAX_IGNORED_SHOWN = 3

Event = dict[str, Any]
OnEvent = Callable[[Event], None]


@dataclass
class BenchOutcome:
    """Everything the worker reported, and how it ended."""

    cases: list[Case] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    ceilings: list[Ceiling] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    device: BenchDevice | None = None
    versions: dict[str, str] = field(default_factory=dict)
    interrupted: str | None = None
    partial: bool = False
    by_user: bool = False  # Ctrl-C (exit status 130), as opposed to a crash or a timeout
    stderr_tail: str = ""
    returncode: int | None = None
    done: bool = False

    @property
    def finished(self) -> int:
        """Planned cases the worker finished: measured or skipped by it."""
        return len(self.cases) + len(self.skips)


# --------------------------------------------------------------------------- decoding


def _codec() -> tuple[Callable[[str], Event], Callable[[Event], Case]]:
    """The worker protocol's decoders; the one place its module is imported."""
    try:
        from envcheck.bench import protocol
    except ImportError:
        protocol = None  # type: ignore[assignment]
    decode = getattr(protocol, "decode", None) or _decode_json
    case_from_event = getattr(protocol, "case_from_event", None) or (lambda ev: model.build(Case, ev["case"]))
    return decode, case_from_event


def _decode_json(line: str) -> Event:
    ev = json.loads(line)
    if not isinstance(ev, dict) or not isinstance(ev.get("event"), str):
        raise ValueError("not an event object")
    return ev


def _apply(ev: Event, out: BenchOutcome, case_from_event: Callable[[Event], Case]) -> None:
    """Record one decoded event (raises on a malformed payload)."""
    kind = ev["event"]
    if kind == "case":
        out.cases.append(case_from_event(ev))
    elif kind == "skip":
        out.skips.append(model.build(Skip, ev["skip"]))
    elif kind == "ceiling":
        out.ceilings.append(model.build(Ceiling, ev["ceiling"]))
    elif kind == "note":
        text = str(ev["text"]).strip()
        if text:
            out.notes.append(" ".join(text.split()))
    elif kind == "start":
        if ev.get("device") is not None:
            out.device = model.build(BenchDevice, ev["device"])
        out.versions = {str(k): str(v) for k, v in (ev.get("versions") or {}).items() if v is not None}
    elif kind == "done":
        out.done = True
    elif kind != "case_start":
        raise ValueError(f"unknown event {kind!r}")


# --------------------------------------------------------------------------- the process


def _pump(stream: IO[str], sink: Callable[[str], None]) -> None:
    try:
        for line in stream:
            sink(line)
    except (OSError, ValueError):  # the pipe closed under us: the process is gone
        pass


def _signal_group(proc: subprocess.Popen[str], sig: int) -> None:
    """Signal the worker and everything it started (torch.compile's compile workers)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def _terminate(proc: subprocess.Popen[str], grace_s: float) -> None:
    if proc.poll() is None:
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):  # a second Ctrl-C means now
            pass
    # Children may outlive a worker that exited on SIGTERM: the group goes either way.
    _signal_group(proc, signal.SIGKILL)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass


def _exit_description(returncode: int | None) -> str:
    if returncode is None:
        return "stopped"
    if returncode < 0:
        try:
            return f"crashed with {signal.Signals(-returncode).name}"
        except ValueError:
            return f"crashed with signal {-returncode}"
    if returncode == 0:
        return "exited before finishing"
    return f"exited with status {returncode}"


def run_worker(plan: Plan, on_event: OnEvent, timeout: float,
               popen: Callable[..., subprocess.Popen[str]] = subprocess.Popen, *,
               command: Sequence[str] = WORKER_COMMAND, grace_s: float = TERMINATE_GRACE_S,
               clock: Callable[[], float] = time.monotonic, done_drain_s: float = DONE_DRAIN_S) -> BenchOutcome:
    """Run the worker on ``plan``; ``on_event`` sees every decoded event as it arrives.

    Never raises for anything the worker does. Ctrl-C (KeyboardInterrupt, here or in
    ``on_event``) stops the worker and returns what finished, with ``partial`` set.
    Once the worker has sent ``done`` it gets ``done_drain_s`` to exit; one that hangs past
    that (CUDA teardown) is stopped, and the run is neither partial nor interrupted.
    """
    decode, case_from_event = _codec()
    out = BenchOutcome()
    n = len(plan.cases)
    try:
        proc = popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True, encoding="utf-8", errors="replace", bufsize=1,
                     start_new_session=True)  # Ctrl-C in the terminal reaches only this process
    except OSError as e:
        out.partial = True
        out.interrupted = f"benchmark worker could not start ({e.__class__.__name__}: {e})"
        return out

    lines: queue.Queue[str | None] = queue.Queue()
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
    assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None

    def put_stdout_eof() -> None:
        _pump(proc.stdout, lines.put)  # type: ignore[arg-type]
        lines.put(None)

    readers = [threading.Thread(target=put_stdout_eof, daemon=True),
               threading.Thread(target=_pump, args=(proc.stderr, lambda s: tail.append(s.rstrip("\n"))),
                                daemon=True)]
    for t in readers:
        t.start()

    ignored: list[str] = []
    current: str | None = None
    deadline = clock() + timeout
    exited_at: float | None = None
    stop: str | None = None  # why the loop ended early: "user", "timeout", "hung", "after_done"
    done_at: float | None = None

    def handle(line: str) -> None:
        nonlocal current
        text = line.strip()
        if not text:
            return
        try:
            ev = decode(text)
            _apply(ev, out, case_from_event)
        except Exception:  # noqa: BLE001 -- any malformed line is noted, never a traceback
            ignored.append(text)
            return
        if ev.get("event") == "case_start":
            current = str(ev.get("label") or "")
        elif ev.get("event") in ("case", "skip"):
            current = None
        on_event(ev)

    try:
        try:
            proc.stdin.write(json.dumps(plan.worker_input()) + "\n")
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # the worker died before reading: its exit status tells why
        while True:
            now = clock()
            if now >= deadline:
                stop = "timeout"
                break
            if out.done:
                done_at = done_at if done_at is not None else now
                if now - done_at >= done_drain_s:
                    stop = "after_done"
                    break
            try:
                line = lines.get(timeout=min(0.2, max(deadline - now, 0.001)))
            except queue.Empty:
                if proc.poll() is not None:
                    exited_at = exited_at if exited_at is not None else clock()
                    if clock() - exited_at > EXITED_DRAIN_S:
                        stop = "hung"
                        break
                continue
            if line is None:
                break
            handle(line)
    except KeyboardInterrupt:
        stop = "user"
    finally:
        if stop is not None or proc.poll() is None:
            if stop is None:
                stop = "error"  # an exception from on_event: don't leave the worker running
            _terminate(proc, grace_s)
        else:
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _terminate(proc, grace_s)
        readers[0].join(timeout=1.0)
        readers[1].join(timeout=1.0)
        # Events written before the worker stopped still count.
        while True:
            try:
                line = lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                try:
                    handle(line)
                except KeyboardInterrupt:
                    break

    out.returncode = proc.returncode
    out.stderr_tail = "\n".join(tail)
    if ignored:
        shown = "; ".join(repr(s[:80]) for s in ignored[:MAX_IGNORED_SHOWN])
        out.notes.append(f"ignored {len(ignored)} line{'s' if len(ignored) != 1 else ''} of benchmark worker output "
                         f"that were not protocol events: {shown}")

    during = f" during {current!r}" if current else ""
    progress = f"after {out.finished} of {n} cases"
    if out.done:
        # Every case was reported: however the worker ended after that, the run is complete.
        if stop in ("after_done", "timeout", "user"):
            out.notes.append("benchmark worker did not exit after reporting all cases (hung at exit?): stopped; "
                             "every case was reported")
        elif proc.returncode not in (0, None) and stop is None:
            out.notes.append(f"benchmark worker {_exit_description(proc.returncode)} after reporting all cases")
    elif stop == "user":
        out.by_user = True
        out.interrupted = f"interrupted by the user (Ctrl-C) {progress}"
    elif stop == "timeout":
        out.interrupted = f"benchmark worker timed out after {timeout:g} s{during} {progress} (raise --timeout)"
    else:
        last = next((ln.strip() for ln in reversed(tail) if ln.strip()), "")
        what = _exit_description(proc.returncode)
        out.interrupted = f"benchmark worker {what}{during} {progress}" + (f": {last[:200]}" if last else "")
    out.partial = out.interrupted is not None
    return out


# --------------------------------------------------------------------------- the Bench


def unrun_skips(plan: Plan, outcome: BenchOutcome) -> list[Skip]:
    """Planned cases the worker never reported, as skips that say why."""
    if not outcome.partial:
        return []
    seen = {c.key for c in outcome.cases}
    for s in outcome.skips:
        # A skip of one precision (matmul fp32 as TF32) says nothing of the others (IEEE fp32);
        # only a skip that names none (older workers) stands for every precision.
        precisions = (s.precision,) if s.precision else ("fp32", "tf32", "fp16", "bf16")
        seen |= {(s.op, s.impl, s.dtype, p, s.shape) for p in precisions}
    short = (outcome.interrupted or "the run stopped early").split(" after ")[0]
    out = []
    for c in plan.cases:
        if c.key not in seen:
            prefix = "" if c.precision == c.dtype else f"{c.precision.upper()} arithmetic: "
            out.append(Skip(c.op, c.impl, c.dtype, c.shape, f"{prefix}not run: {short}", precision=c.precision))
    return out


def assemble(plan: Plan, outcome: BenchOutcome, started: str, duration: float) -> Bench:
    """The report's Bench from the plan and what the worker reported."""
    device = outcome.device
    if device is None:
        name = plan.gpu.get("name") if plan.device == "cuda" else None
        device = BenchDevice(backend=plan.device or "cpu", name=name or ("CUDA GPU" if plan.device == "cuda" else "CPU"),
                             index=plan.index if plan.device == "cuda" else None)
    settings = {**plan.settings, **plan.recorded}
    notes = list(plan.notes) + outcome.notes
    if outcome.partial and outcome.stderr_tail and not outcome.by_user:
        last = outcome.stderr_tail.strip().splitlines()[-1].strip()
        if last and last[:200] not in (outcome.interrupted or ""):
            notes.append(f"benchmark worker's last message: {last[:200]}")
    return Bench(
        device=device,
        settings=settings,
        ceilings=tuple(outcome.ceilings),
        cases=tuple(outcome.cases),
        skipped=tuple(plan.skips) + tuple(outcome.skips) + tuple(unrun_skips(plan, outcome)),
        notes=tuple(dict.fromkeys(notes)),
        partial=outcome.partial,
        interrupted=outcome.interrupted,
        started=started,
        duration_s=round(duration, 3),
        versions=dict(outcome.versions),
    )
