"""The contract between ``envcheck run`` and its isolated benchmark worker.

The parent starts ``[sys.executable, "-m", "envcheck.bench.worker"]`` (see ``worker_argv``)
with ``start_new_session=True``, writes ONE JSON object (the plan) to its stdin and closes
it, then reads JSON lines from its stdout, one event per line. Human diagnostics
(tracebacks, compiler chatter) go to the worker's stderr.

Plan::

    {"device": "cuda" | "cpu", "index": 0,
     "cases": [{"op": "vector_add" | "relu" | "matmul" | "softmax" | "row_sum",
                "impl": "torch" | "triton" | "compile", "dtype": "fp32" | "fp16" | "bf16",
                "precision": "fp32" | "tf32" | "fp16" | "bf16", "shape": [...]}, ...],
     "settings": {"warmup_ms": 25, "rep_ms": 100, "min_samples": 30, "max_samples": 200,
                  "cold_l2": true, "seed": 0},
     "gpu": {"theoretical_bandwidth_gbps": float | null, "bandwidth_source": str | null,
             "sm_count": int | null, "sm_clock_max_mhz": int | null,
             "compute_capability": "9.0" | null, "name": str | null}}

Within each group (op, dtype, precision, shape) the torch case comes first: the others'
speedups are relative to it.

Events, in order::

    {"event": "start", "device": <BenchDevice>, "versions": {"torch", "triton", "cuda"}}
    {"event": "ceiling", "ceiling": <Ceiling>}            (any number)
    then for each group, in plan order:
      {"event": "case_start", "i": k, "n": total, "label": "matmul bf16 4096x4096x4096 torch"}
      {"event": "case_start", "i": k + 1, "n": total, "label": "matmul bf16 4096x4096x4096 triton"}
      ...                                                  (one per case of the group, as each is prepared)
      {"event": "case", "case": <Case>}  or  {"event": "skip", "skip": <Skip>}
      ...                                                  (one per case of the group, same order)
    {"event": "note", "text": "one line"}                  (any time)
    {"event": "done"}

``i`` is the case's 0-based index in the plan. A group's implementations are sampled
interleaved (worker.py), so none of its cases is complete before the whole group is: its
``case`` / ``skip`` events come together after its ``case_start`` events. A worker that exits
without ``done`` crashed or was stopped: the cases received so far stand; those of the group
it was in are lost (the runner records every unreported case as not run).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from envcheck.bench.ops import OPS
from envcheck.model import IMPLS, BenchDevice, Case, Ceiling, Skip, build, to_dict

WORKER_MODULE = "envcheck.bench.worker"
EVENTS = ("start", "ceiling", "case_start", "case", "skip", "note", "done")
DTYPES = ("fp32", "fp16", "bf16")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
DEFAULT_SETTINGS: dict[str, Any] = {"warmup_ms": 25, "rep_ms": 100, "min_samples": 30, "max_samples": 200,
                                    "cold_l2": True, "seed": 0}
SHAPE_RANK = {"vector_add": 1, "relu": 1, "softmax": 2, "row_sum": 2, "matmul": 3}


class ProtocolError(ValueError):
    """A line or plan that does not follow the protocol (one-line message)."""


def worker_argv() -> list[str]:
    """The command that starts the worker with this interpreter."""
    return [sys.executable, "-m", WORKER_MODULE]


def _clean(obj: Any) -> Any:
    # json.dumps would write NaN/Infinity, which is not JSON; model.to_dict already maps
    # non-finite floats to null, this does the same for plain dicts.
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def encode(event: dict[str, Any]) -> str:
    """One event as a JSON line (with the newline); model objects inside become plain data."""
    if event.get("event") not in EVENTS:
        raise ProtocolError(f"unknown event {event.get('event')!r}")
    return json.dumps(_clean(to_dict(event)), ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"


def decode(line: str) -> dict[str, Any]:
    """The event on one stdout line; ProtocolError for anything else (stray output, truncation)."""
    text = line.strip()
    try:
        ev = json.loads(text)
    except json.JSONDecodeError:
        raise ProtocolError(f"not a worker event: {text[:120]!r}") from None
    if not isinstance(ev, dict) or ev.get("event") not in EVENTS:
        raise ProtocolError(f"not a worker event: {text[:120]!r}")
    return ev


def case_from_event(ev: dict[str, Any]) -> Case:
    try:
        return build(Case, ev["case"])
    except (KeyError, TypeError, ValueError) as e:
        raise ProtocolError(f"malformed case event: {e}") from None


def skip_from_event(ev: dict[str, Any]) -> Skip:
    try:
        return build(Skip, ev["skip"])
    except (KeyError, TypeError, ValueError) as e:
        raise ProtocolError(f"malformed skip event: {e}") from None


def ceiling_from_event(ev: dict[str, Any]) -> Ceiling:
    try:
        return build(Ceiling, ev["ceiling"])
    except (KeyError, TypeError, ValueError) as e:
        raise ProtocolError(f"malformed ceiling event: {e}") from None


def device_from_event(ev: dict[str, Any]) -> BenchDevice:
    try:
        return build(BenchDevice, ev["device"])
    except (KeyError, TypeError, ValueError) as e:
        raise ProtocolError(f"malformed start event: {e}") from None


def case_label(spec: dict[str, Any]) -> str:
    """``matmul bf16 4096x4096x4096 triton``; the precision is added when it differs (``fp32/tf32``)."""
    dtype, precision = spec["dtype"], spec["precision"]
    prec = dtype if precision == dtype else f"{dtype}/{precision}"
    shape = "x".join(str(d) for d in spec["shape"])
    return f"{spec['op']} {prec} {shape} {spec['impl']}"


def validate_plan(plan: Any) -> dict[str, Any]:
    """The plan with defaults filled in; ProtocolError naming the first problem."""
    if not isinstance(plan, dict):
        raise ProtocolError("the plan is not a JSON object")
    device = plan.get("device")
    if device not in ("cuda", "cpu"):
        raise ProtocolError(f"plan device must be 'cuda' or 'cpu', got {device!r}")
    index = plan.get("index", 0)
    if not isinstance(index, int) or index < 0:
        raise ProtocolError(f"plan index must be a non-negative integer, got {index!r}")
    cases = plan.get("cases")
    if not isinstance(cases, list):
        raise ProtocolError("plan cases must be a list")
    clean_cases = []
    for i, c in enumerate(cases):
        if not isinstance(c, dict):
            raise ProtocolError(f"case {i} is not an object")
        op, impl, dtype = c.get("op"), c.get("impl"), c.get("dtype")
        precision = c.get("precision", dtype)
        shape = c.get("shape")
        if op not in OPS or impl not in IMPLS or dtype not in DTYPES or precision not in PRECISIONS:
            raise ProtocolError(f"case {i} has an unknown op/impl/dtype/precision: {c!r}")
        if (not isinstance(shape, list) or len(shape) != SHAPE_RANK[op]
                or not all(isinstance(d, int) and d > 0 for d in shape)):
            raise ProtocolError(f"case {i} ({op}) needs a shape of {SHAPE_RANK[op]} positive integers, got {shape!r}")
        clean_cases.append({"op": op, "impl": impl, "dtype": dtype, "precision": precision, "shape": list(shape)})
    settings = {**DEFAULT_SETTINGS, **(plan.get("settings") or {})}
    gpu = plan.get("gpu") or {}
    if not isinstance(gpu, dict):
        raise ProtocolError("plan gpu must be an object")
    return {"device": device, "index": index, "cases": clean_cases, "settings": settings, "gpu": gpu}


def decode_plan(text: str) -> dict[str, Any]:
    """The plan the worker read on stdin, validated (ProtocolError otherwise)."""
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProtocolError(f"the plan is not valid JSON ({e.msg} at line {e.lineno})") from None
    return validate_plan(plan)
