"""NVML in a child (``nvml_child.py``): a libnvidia-ml that segfaults or hangs takes only the child down.
:class:`IsolatedNvml` replays its answers to the same probes; those given before a crash still count, and every
one never given says what happened (``not read: the NVML probe process crashed with SIGSEGV in ...``)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from envcheck.harness import failures as f
from envcheck.harness.spawn import spawn
from envcheck.probes.host import Host
from envcheck.probes.nvml_table import TableNvml, table_from_events

if TYPE_CHECKING:
    from envcheck.outside_json import Json

NVML_TIMEOUT_S = 30.0  # nvmlInit on a many-GPU box without persistence mode takes seconds, never this long
NOT_INSTALLED = "the nvidia-ml-py package is not installed: pip install nvidia-ml-py"


class IsolatedNvml(TableNvml):
    """The NVML seam for the live machine: the first ``init`` runs the child and fills the table.
    ``paths``: folders put on the child's ``sys.path`` (tests put a fake ``pynvml`` there)."""

    def __init__(self, host: Host, timeout: float = NVML_TIMEOUT_S, paths: Sequence[str] = ()) -> None:
        super().__init__({})
        self.host = host
        self.timeout = timeout
        self.paths = tuple(paths)
        self.ran: f.Outcome | None = None

    def init(self) -> str | None:
        if self.ran is None and "init_error" not in self.table:
            self.table = self._read()
        return super().init()

    def _read(self) -> dict[str, Json]:
        # Where ``import pynvml`` finds nvidia-ml-py for this interpreter, found without importing it.
        try:
            spec = importlib.util.find_spec("pynvml")
        except (ImportError, ValueError):
            spec = None
        found = os.path.dirname(spec.origin) if spec is not None and spec.origin else None
        if found is None and not self.paths:
            return {"init_error": {"error": "ImportError", "text": NOT_INSTALLED}}
        events: list[dict[str, Json]] = []
        # No site-packages: the child needs pynvml alone, and envcheck probe stays fast.
        out = spawn("envcheck.probes.nvml_child:read", timeout=self.timeout, heartbeat=self.timeout,
                    on_event=events.append, python=self.host.python_executable or None,
                    paths=[*self.paths, *([found] if found else [])], site=False)
        self.ran = out
        if isinstance(out.failure, f.Stopped):
            raise KeyboardInterrupt(out.failure.signal)
        table, pending = table_from_events(events)
        if out.failure is not None:
            table["failure"] = {"error": _what(out.failure, self.timeout), "during": pending,
                                "output_tail": out.stderr_tail[-2000:] or None}
        return table


def _what(failure: f.Failure, timeout: float) -> str:
    if isinstance(failure, (f.Timeout, f.Hang)):
        return f"hung (killed after {timeout:g} s)"
    if isinstance(failure, f.Crash):
        return f"crashed with {failure.signal}" if failure.signal else f"exited {failure.returncode}"
    if isinstance(failure, f.ChildError):
        return f"exited 1: {failure.line}"
    if isinstance(failure, f.SpawnFailed):
        return f"could not start python: {failure.error}"
    return f"failed ({type(failure).__name__})"
