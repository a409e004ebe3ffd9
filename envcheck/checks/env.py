"""Environment variables that silently change what CUDA programs see or how fast they run."""

from __future__ import annotations

from envcheck.checks import machine
from envcheck.checks.said import said
from envcheck.model import Check, Environment


def visible_devices_problem(value: str, count: int) -> tuple[str, dict[str, str]] | None:
    """Why ``CUDA_VISIBLE_DEVICES=value`` hides GPUs (a finding key and its parameters), or None: CUDA reads the
    list up to its first invalid entry (``""``, ``-1``, an index past the last GPU)."""
    if not value.strip():
        return "env.cvd_empty", {}
    first = value.split(",")[0].strip()
    if first.startswith("-"):
        return "env.cvd_negative", {"first": first}
    if first.isdigit() and count and int(first) >= count:
        return "env.cvd_past_end", {"first": first, "count": str(count)}
    if not (first.isdigit() or first.startswith(("GPU-", "MIG-"))):
        return "env.cvd_not_id", {"first": repr(first)}
    return None


def check_visible_devices(env: Environment) -> Check:
    cid = "env.cuda_visible_devices"
    value = machine.variables(env).get("CUDA_VISIBLE_DEVICES")
    count = machine.gpu_count(env)
    if value is None:
        return said(cid, "pass", "env.cvd_unset.count" if count else "env.cvd_unset", count=count)
    problem = visible_devices_problem(value, count)
    if problem:
        key, params = problem
        return said(cid, "warn", key, "env.cvd.fix", **{"count": count, **params, "value": repr(value)})
    return said(cid, "pass", "env.cvd", value=repr(value))


def check_launch_blocking(env: Environment) -> Check:
    value = machine.variables(env).get("CUDA_LAUNCH_BLOCKING")
    if value is None or value.strip() in ("", "0"):
        return said("env.cuda_launch_blocking", "pass", "env.clb_unset")
    return said("env.cuda_launch_blocking", "warn", "env.clb", "cmd", value=value, cmd="unset CUDA_LAUNCH_BLOCKING")


def checks(env: Environment) -> list[Check]:
    return [] if env.get("env", "variables") is None else [check_visible_devices(env), check_launch_blocking(env)]
