"""Environment variables that silently change what CUDA programs see or how fast they run."""

from __future__ import annotations

from envcheck.checks import machine
from envcheck.model import Check, Environment


def visible_devices_problem(value: str, count: int) -> str | None:
    """Why ``CUDA_VISIBLE_DEVICES=value`` hides GPUs, or None when it selects at least one.

    CUDA reads the list up to the first invalid entry: ``""``, ``-1`` or an index past the
    last GPU hides everything from there on.
    """
    items = [v.strip() for v in value.split(",")]
    if not value.strip():
        return "is empty: CUDA programs see no GPU"
    first = items[0]
    if first.startswith("-"):
        return f"starts with {first}: CUDA programs see no GPU"
    if first.isdigit() and count and int(first) >= count:
        return f"names GPU {first}, but only {count} exist: CUDA programs see no GPU"
    if not (first.isdigit() or first.startswith(("GPU-", "MIG-"))):
        return f"starts with {first!r}, neither an index nor a UUID: CUDA programs see no GPU"
    return None


def check_visible_devices(env: Environment) -> Check:
    title = "CUDA_VISIBLE_DEVICES"
    value = machine.variables(env).get("CUDA_VISIBLE_DEVICES")
    count = machine.gpu_count(env)
    if value is None:
        seen = f"all {count} GPU(s)" if count else "every GPU"
        return Check("env.cuda_visible_devices", "pass", title, f"not set: CUDA programs see {seen}")
    problem = visible_devices_problem(value, count)
    if problem:
        return Check("env.cuda_visible_devices", "warn", title, f"CUDA_VISIBLE_DEVICES={value!r} {problem}",
                     fix="unset CUDA_VISIBLE_DEVICES (or set it to indexes or UUIDs from `nvidia-smi -L`)")
    return Check("env.cuda_visible_devices", "pass", title, f"CUDA_VISIBLE_DEVICES={value!r}")


def check_launch_blocking(env: Environment) -> Check:
    title = "CUDA_LAUNCH_BLOCKING"
    value = machine.variables(env).get("CUDA_LAUNCH_BLOCKING")
    if value is None or value.strip() in ("", "0"):
        return Check("env.cuda_launch_blocking", "pass", title, "not set: kernel launches are asynchronous")
    return Check("env.cuda_launch_blocking", "warn", title,
                 f"CUDA_LAUNCH_BLOCKING={value}: every kernel launch waits for the GPU (a debugging setting: "
                 "programs and benchmarks run slower)",
                 fix="unset CUDA_LAUNCH_BLOCKING")


def checks(env: Environment) -> list[Check]:
    if env.get("env", "variables") is None:
        return []
    return [check_visible_devices(env), check_launch_blocking(env)]
