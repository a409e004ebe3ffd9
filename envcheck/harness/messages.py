"""The protocol between envcheck and every Python child it starts (child.py is the child's side).

Start: ``python -E [-S] -c BOOT ROOT FD PPID`` (BOOT puts this envcheck's folder on ``sys.path``, nothing from
the current folder). The child dies with its parent (``PR_SET_PDEATHSIG``; EOF on stdin ends its group).
Parent -> child, on stdin, one JSON line: ``{"target": "module:function", "args", "paths", "beat_s"}``; stdin
then stays open. Child -> parent, on fd FD only (its stdout goes to stderr), one JSON object a line::

    Hello(protocol, pid)                first
    Beat(seq, phase)                    every ``beat_s`` from a thread, and at each new phase
    Event(data)                         what the target streams as it goes, in its own shape
    Done(result) | Raised(type, message, traceback)   last: the target returned, or raised

The target is ``function(args, out)``: ``out(data)`` sends an Event, ``out.phase(name)`` a Beat.
"""

from __future__ import annotations

import msgspec

PROTOCOL = 1


class _Message(msgspec.Struct, tag_field="kind", tag=True, forbid_unknown_fields=True):
    pass


class Hello(_Message):
    protocol: int
    pid: int


class Beat(_Message):
    seq: int
    phase: str


class Event(_Message):
    data: msgspec.Raw


class Done(_Message):
    result: msgspec.Raw


class Raised(_Message):
    type: str
    message: str
    traceback: str


Message = Hello | Beat | Event | Done | Raised
decode = msgspec.json.Decoder(Message).decode
