"""NVML in a child process: a libnvidia-ml that segfaults or hangs takes only the child down.

NVML is a C library loaded into the process that calls it. A broken driver install can
segfault inside ``nvmlInit`` (``envcheck check`` used to die with exit status 139 and print
nothing) and a wedged GPU can hang it forever. So the probes' NVML calls run in a child
(``probes/nvml_child.py``) under a timeout; the child reports every answer as it gets it and
the parent replays those answers to the same probes (:class:`IsolatedNvml` is a
:class:`~envcheck.probes.nvml_table.TableNvml` filled by the child).

When the child crashes or hangs, the answers it gave still count, and every answer it never
gave fails with what happened (``not read: the NVML probe process crashed with SIGSEGV in
nvmlDeviceGetPowerUsage on GPU 1``): the driver check reports it, and one GPU that crashes
NVML does not hide the GPUs read before it.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import Any

from envcheck.probes import isolate
from envcheck.probes.host import Host
from envcheck.probes.nvml_table import TableNvml, table_from_events

NVML_TIMEOUT_S = 30.0  # nvmlInit on a many-GPU box without persistence mode takes seconds, never this long
RUN_NAME = "nvml"
NOT_INSTALLED = "the nvidia-ml-py package is not installed: pip install nvidia-ml-py"

_CODE = """
import sys
sys.path[:0] = {paths!r}
from envcheck.probes.nvml_child import child_main
child_main({marker!r})
"""


def _package_root() -> str:
    """The folder holding the ``envcheck`` package (a source tree or site-packages)."""
    import envcheck

    return os.path.dirname(os.path.dirname(os.path.abspath(envcheck.__file__)))


def pynvml_dir() -> str | None:
    """Where ``import pynvml`` finds nvidia-ml-py for this interpreter, found without importing it."""
    try:
        spec = importlib.util.find_spec("pynvml")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(spec.origin)


class IsolatedNvml(TableNvml):
    """The NVML seam for the live machine: the first ``init`` runs the child and fills the table.

    ``paths``: folders put on the child's ``sys.path`` ahead of the envcheck package and
    nvidia-ml-py (tests put a fake ``pynvml`` there).
    """

    def __init__(self, host: Host, timeout: float = NVML_TIMEOUT_S, paths: Sequence[str] = ()) -> None:
        super().__init__({})
        self.host = host
        self.timeout = timeout
        self.paths = tuple(paths)
        self.ran: isolate.Isolated | None = None

    def init(self) -> str | None:
        if self.ran is None and "init_error" not in self.table:
            self.table = self._read()
        return super().init()

    def _read(self) -> dict[str, Any]:
        found = pynvml_dir()
        if found is None and not self.paths:
            return {"init_error": {"error": "ImportError", "text": NOT_INSTALLED}}
        paths = [*self.paths, _package_root(), *([found] if found else [])]
        code = _CODE.format(paths=paths, marker=isolate.MARKER)
        iso = isolate.run_python(self.host, code, self.timeout, name=RUN_NAME, isolated=True)
        self.ran = iso
        table, pending = table_from_events(list(iso.reports))
        if iso.error:
            # "exited 0 without reporting" cannot happen with an answer on record; any other error can.
            table["failure"] = {"error": _what(iso), "during": pending,
                                "output_tail": iso.output_tail[-2000:] if iso.output_tail else None}
        return table


def _what(iso: isolate.Isolated) -> str:
    if iso.timed_out:
        return f"hung (killed after {iso.error.removeprefix('timed out after ') if iso.error else '?'})"
    return iso.error or "failed"
