"""The child's side of the harness protocol (messages.py): run one target, report on the parent's fd. Standard
library only: a child started without site-packages (the NVML child) runs it too."""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import re
import signal
import sys
import threading
import time
import traceback
from typing import Any

PROTOCOL = 1  # messages.PROTOCOL
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
LAST = ("Done", "Raised")
_JSON: dict[str, Any] = {"ensure_ascii": True, "separators": (",", ":"), "default": str}
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


class Out:
    """What a target reports through: ``out(data)`` streams an Event, ``out.phase(name)`` names the step."""

    def __init__(self, fd: int) -> None:
        self._stream, self._lock, self._seq, self._closed = os.fdopen(fd, "w", encoding="utf-8"), threading.Lock(), 0, False
        self.current = "start"

    def send(self, kind: str, **fields: Any) -> None:
        line = _line({"kind": kind, **fields})
        with self._lock:
            if self._closed:
                return
            self._closed = kind in LAST
            try:
                self._stream.write(line)
                self._stream.flush()
            except (OSError, ValueError):  # the parent is gone
                os._exit(1)

    def __call__(self, data: Any) -> None:
        self.send("Event", data=data)

    def phase(self, name: str | None = None) -> None:
        """Name the step it is in (None: the same step, still alive)."""
        self.current = name or self.current
        with self._lock:
            self._seq += 1
        self.send("Beat", seq=self._seq, phase=self.current)


def _line(msg: dict[str, Any]) -> str:
    """One message as strict JSON: a NaN as its name, a lone surrogate (a user's exception text) as ``?``."""
    try:
        text = json.dumps(msg, allow_nan=False, **_JSON)
    except ValueError:
        text = None
    if text is None or _SURROGATE.search(text):
        text = json.dumps(_safe(msg), **_JSON)
    return text + "\n"


def _safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if isinstance(v, str):
        return v.encode("utf-8", "replace").decode("utf-8")
    if isinstance(v, dict):
        return {_safe(k): _safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_safe(x) for x in v]
    return v


def prctl(option: int, value: int) -> bool:
    """Linux's prctl(2) for this process; whether it took (False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return bool(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _orphaned() -> None:
    """EOF on stdin: the parent is gone (or ends this run): the whole process group goes."""
    with contextlib.suppress(OSError):
        while os.read(0, 65536):  # the raw fd: a buffered reader's lock would abort the interpreter's exit
            pass
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _beats(out: Out, every_s: float) -> None:
    while True:
        time.sleep(every_s)
        out.phase()


def main(argv: list[str]) -> int:
    fd, parent = int(argv[0]), int(argv[1])
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # killed when the parent dies, even by SIGKILL
    if os.getppid() != parent:  # gone before it was asked
        return 1
    os.set_inheritable(fd, False)
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = Out(fd)
    start = json.loads(sys.stdin.buffer.readline() or b"{}")
    threading.Thread(target=_orphaned, daemon=True).start()
    sys.path.extend(start.get("paths") or ())
    out.send("Hello", protocol=PROTOCOL, pid=os.getpid())
    if start.get("beat_s"):
        threading.Thread(target=_beats, args=(out, float(start["beat_s"])), daemon=True).start()
    try:
        module, _, name = str(start.get("target")).partition(":")
        result = getattr(importlib.import_module(module), name)(start.get("args"), out)
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too: the parent is told
        text = traceback.format_exc()
        sys.stderr.write(text)
        out.send("Raised", type=type(e).__name__, message=str(e), traceback=text[-20000:])
        return 1
    out.send("Done", result=result)
    return 0
