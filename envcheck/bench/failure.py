"""How a failed step of the worker becomes one case's result, never the run's end: out of memory a Skip (the size
does not fit), any other exception a failed Case (its stage and first line; the traceback on stderr)."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import TypeVar

from envcheck.bench.device import Runtime
from envcheck.bench.suite import PlannedCase
from envcheck.errors import one_line
from envcheck.model import Case, Note, Skip

T = TypeVar("T")


def log(what: str, exc: BaseException | None = None) -> None:
    """A line (and the traceback of ``exc``) on the worker's stderr."""
    print(f"envcheck worker: {what}", file=sys.stderr)
    if exc is not None:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)


def guarded(rt: Runtime, planned: PlannedCase, stage: str, step: Callable[[], T]) -> T | Case | Skip:
    """``step()``, with out-of-memory turned into a Skip and any other exception into a failed Case."""
    try:
        return step()
    except rt.oom:
        rt.after_failure()
        need = rt.spec(planned.op).memory_needed_bytes(planned.shape, planned.dtype)
        return planned.skip(Note("skip.out_of_memory", {"need_bytes": need, "free_bytes": rt.free_bytes()}))
    except Exception as e:  # noqa: BLE001 - one case's failure is that case's result, never the run's end
        log(f"{planned.label} failed ({stage}):", e)
        rt.after_failure()
        return planned.failed(stage, one_line(e))
