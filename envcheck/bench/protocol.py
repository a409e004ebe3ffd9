"""The benchmark worker's contract (``envcheck.bench.worker:main``): a ``WorkerPlan`` in the report's JSON form,
each group's cases consecutive, torch first, and the events it streams, one a message (``{"event": <kind>, ...}``)::

    start            Started(device, versions)
    ceiling          CeilingMeasured(run)             any number: the measured ceilings' kernels
    then for each group, in plan order:
      case_start     CaseStarted(i, n, case)           one per case of the group, as each is prepared
      window         WindowSampled(index, window)      the NVML samples of the group's sampling window
      case / skip    Measured(case) / Skipped(skip)    one per case of the group, same order
    note             Noted(note)                       any time: a key and parameters, never a sentence

and returns its phases' seconds (``model.BENCH_PHASES``). ``i`` is the case's index in the plan; windows are
numbered from 0 as sent. A worker that ends without returning crashed or was stopped (runner.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from envcheck.bench.suite import PlannedCase
from envcheck.model import BenchDevice, Case, CeilingRun, MonitorWindow, Note, Settings, Skip, build, to_dict
from envcheck.model.codec import JSON
from envcheck.ops import OpSpec, lookup

BACKENDS = ("cuda", "cpu")


class ProtocolError(ValueError):
    """An event or plan that does not follow the protocol (one-line message)."""


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


Event = Started | CeilingMeasured | CaseStarted | WindowSampled | Measured | Skipped | Noted
EVENTS: dict[str, type] = {cls.kind: cls for cls in (Started, CeilingMeasured, CaseStarted, WindowSampled,
                                                      Measured, Skipped, Noted)}


def encode(event: object, events: Mapping[str, type] = EVENTS) -> JSON:
    """One event as a message's data."""
    if type(event) not in events.values():
        raise ProtocolError(f"not a worker event: {type(event).__name__}")
    return {"event": event.kind, **to_dict(event)}  # type: ignore[attr-defined]


def decode(data: object, events: Mapping[str, type] = EVENTS) -> Any:  # Any: the caller's events
    """The event in a message's data; ProtocolError (naming the field) for anything else."""
    kind = data.get("event") if isinstance(data, dict) else None
    if kind not in events:
        raise ProtocolError(f"not a worker event: {str(data)[:120]!r}")
    try:
        return build(events[kind], {k: v for k, v in data.items() if k != "event"})
    except (ValueError, TypeError, RecursionError) as e:  # the codec names the field
        raise ProtocolError(f"malformed {kind} event: {e}") from None


def decode_plan(data: object, plan: type = WorkerPlan) -> Any:  # Any: the caller's plan class
    """The plan a worker was given, validated (ProtocolError naming the first problem)."""
    try:
        return build(plan, data)
    except (ValueError, TypeError) as e:
        raise ProtocolError(f"bad plan: {e}") from None
