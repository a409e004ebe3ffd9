"""The isolated benchmark worker and its contract with ``envcheck run`` (the one description).

Why a worker: the benchmark imports torch, initialises CUDA and compiles Triton kernels and
``torch.compile`` graphs, and any of those can segfault or hang on a broken install. So it
runs in its own process (``python -m envcheck.bench.worker``, see ``worker_argv``), started
by the runner with ``start_new_session=True``: its own session and process group, so Ctrl-C in
the terminal reaches only ``envcheck run``, which then stops the worker's whole process tree
(torch.compile's compile workers included) and keeps what finished. Human diagnostics
(tracebacks, compiler chatter, anything a library prints, from C as well as Python) go to the
worker's stderr; its stdout carries events only.

The plan: the runner writes ONE JSON object on the worker's stdin and closes it, a
``WorkerPlan`` (``backend``, ``index``, ``cases``: ``PlannedCase`` objects, ``settings``: the
run's ``Settings``; for ``envcheck bench``, ``ops``: the user's declared ops and ``source``:
the file or ``module:object`` the worker imports them from; ``ceilings``: false when a
restarted worker goes on without measuring them again) in the report's JSON form (model/codec.py). Within each group (op, dtype,
precision, shape) the cases are consecutive, torch first.

The events: one JSON object per stdout line, ``{"event": <kind>, ...fields}``, each a frozen
dataclass below, in this order::

    start            Started(device, versions)
    ceiling          CeilingMeasured(run)             any number: the measured ceilings' kernels
    then for each group, in plan order:
      case_start     CaseStarted(i, n, case)           one per case of the group, as each is prepared
      window         WindowSampled(index, window)      the NVML samples of the group's sampling window
      case / skip    Measured(case) / Skipped(skip)    one per case of the group, same order
    note             Noted(note)                       any time: a key and parameters, never a sentence
    done             Done(phases)                      seconds the worker spent on the ceilings and inputs

``i`` is the case's 0-based index in the plan; ``index`` numbers windows from 0 in the order
sent, and a case's ``window`` is that number (``Bench.windows`` keeps them in the same order).
A group's implementations are sampled interleaved (sampling.py), so none of its cases is
complete before the whole group is: its results come together after its ``case_start``
events. A worker that exits without ``done`` crashed or was stopped: the cases received so
far stand, those of the group it was in are lost, and the runner records every unreported
case as not run, with the ``StopCause``. Exit statuses: 0 after ``done``, 1 when the worker
itself failed (a ``note`` with key ``bench.worker_failed`` says why), 2 for a bad plan.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from envcheck.bench.suite import PlannedCase
from envcheck.model import BenchDevice, Case, CeilingRun, MonitorWindow, Note, Settings, Skip, build, to_dict
from envcheck.model.bench import check_phases
from envcheck.ops import OpSpec, lookup

WORKER_MODULE = "envcheck.bench.worker"
BACKENDS = ("cuda", "cpu")


class ProtocolError(ValueError):
    """A line or plan that does not follow the protocol (one-line message)."""


def worker_argv() -> list[str]:
    """The command that starts the worker with this interpreter."""
    return [sys.executable, "-m", WORKER_MODULE]


@dataclass(frozen=True)
class WorkerPlan:
    """What the worker measures: the cases, on which device, with which settings."""

    backend: str
    index: int
    cases: tuple[PlannedCase, ...]
    settings: Settings
    ops: tuple[OpSpec, ...] = ()  # the user's declared ops the cases may name
    source: str | None = None  # the file or module:object declaring them
    ceilings: bool = True  # measure the ceilings before the cases
    code: str | None = None  # "module:function" making a declared op's OpCode from (source, op name)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.index < 0:
            raise ValueError(f"index must be a non-negative integer, got {self.index!r}")
        for c in self.cases:  # a declared op's case names one of ``ops``, with its implementation and shape
            op = lookup(c.op, self.ops)
            if op.declared is not None:
                if c.impl not in op.impls:
                    raise ValueError(f"{c.op} declares no implementation {c.impl!r}")
                op.check_shape(c.shape)


@dataclass(frozen=True)
class Started:
    kind: ClassVar[str] = "start"
    device: BenchDevice
    versions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CeilingMeasured:
    kind: ClassVar[str] = "ceiling"
    run: CeilingRun


@dataclass(frozen=True)
class CaseStarted:
    kind: ClassVar[str] = "case_start"
    i: int
    n: int
    case: PlannedCase


@dataclass(frozen=True)
class WindowSampled:
    kind: ClassVar[str] = "window"
    index: int
    window: MonitorWindow


@dataclass(frozen=True)
class Measured:
    kind: ClassVar[str] = "case"
    case: Case


@dataclass(frozen=True)
class Skipped:
    kind: ClassVar[str] = "skip"
    skip: Skip


@dataclass(frozen=True)
class Noted:
    kind: ClassVar[str] = "note"
    note: Note


@dataclass(frozen=True)
class Done:
    kind: ClassVar[str] = "done"
    phases: Mapping[str, float] = field(default_factory=dict)  # the worker's own of model.BENCH_PHASES, seconds

    def __post_init__(self) -> None:
        check_phases(self.phases)


Event = Started | CeilingMeasured | CaseStarted | WindowSampled | Measured | Skipped | Noted | Done
EVENTS: dict[str, type] = {cls.kind: cls for cls in (Started, CeilingMeasured, CaseStarted, WindowSampled,
                                                      Measured, Skipped, Noted, Done)}


def _line(data: dict[str, Any]) -> str:
    # allow_nan=False: model objects hold finite numbers only (their constructors check), and a
    # line JSON cannot read would be a protocol error in the parent, not a result. ASCII only: a
    # user's exception message may hold a lone surrogate, which no UTF-8 stream can write (the
    # worker would die emitting its case); escaped, it reaches the parent, which replaces it.
    return json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":")) + "\n"


def encode(event: Event) -> str:
    """One event as a JSON line (with the newline)."""
    if type(event) not in EVENTS.values():
        raise ProtocolError(f"not a worker event: {type(event).__name__}")
    return _line({"event": event.kind, **to_dict(event)})


def decode(line: str, clean: Callable[[object], object] | None = None) -> Event:
    """The event on one stdout line; ProtocolError for anything else (stray output, truncation,
    a payload that is not a valid model object). ``clean`` sees the parsed payload first (the
    runner's redactor: a failure's detail may quote a secret)."""
    text = line.strip()
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise ProtocolError(f"not a worker event: {text[:120]!r}") from None
    if not isinstance(data, dict) or data.get("event") not in EVENTS:
        raise ProtocolError(f"not a worker event: {text[:120]!r}")
    cls = EVENTS[data["event"]]
    if clean is not None:
        try:
            data = clean(data)
        except RecursionError:
            raise ProtocolError(f"malformed {data['event']} event: nested too deep") from None
        assert isinstance(data, dict)
    try:
        return build(cls, {k: v for k, v in data.items() if k != "event"})  # type: ignore[no-any-return]
    except (ValueError, TypeError) as e:  # the codec names the field
        raise ProtocolError(f"malformed {data['event']} event: {e}") from None


def encode_plan(plan: WorkerPlan) -> str:
    return _line(to_dict(plan))


def decode_plan(text: str) -> WorkerPlan:
    """The plan the worker read on stdin, validated (ProtocolError naming the first problem)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProtocolError(f"the plan is not valid JSON ({e.msg} at line {e.lineno})") from None
    try:
        return build(WorkerPlan, data)  # type: ignore[no-any-return]
    except (ValueError, TypeError) as e:
        raise ProtocolError(f"bad plan: {e}") from None
