"""A report's checks as keys, also for reports written before checks carried them: today's rules lend their keys
to a recorded check of the same id and status; otherwise it stays as recorded."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from envcheck.checks import evaluate
from envcheck.checks.links import delta_checks
from envcheck.model import Check, Environment
from envcheck.model.node import Node


def keyed(checks: Sequence[Check], env: Environment | None, node: Node | None = None) -> tuple[Check, ...]:
    """``checks`` with keys wherever the rules, run again on ``env`` (and ``node``), agree with the recorded status."""
    if all(_current(c) for c in checks) or env is None or not env.sections:
        return tuple(checks)
    today = {c.id: c for c in (*evaluate(env), *(delta_checks(node) if node is not None else ()))}
    return tuple(c if _current(c) else _agreeing(c, today.get(c.id)) for c in checks)


def _current(check: Check) -> bool:
    # Before issue 49 a driver upgrade's phrase ("driver_key") overwrote the driver's version in the params.
    return check.key is not None and "driver_key" not in check.params


def _agreeing(recorded: Check, today: Check | None) -> Check:
    if today is None or today.status != recorded.status or today.key is None:
        return recorded
    return dataclasses.replace(recorded, key=today.key, fix_key=today.fix_key, params=today.params)
