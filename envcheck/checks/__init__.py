"""Health checks: rules from an ``Environment`` to pass / warn / fail / skip verdicts with exact fixes, one module
per subject. Checks only read facts, so a report's checks can be recomputed from its JSON."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from envcheck.checks.said import said
from envcheck.errors import first_line
from envcheck.model import STATUSES, Check, Environment

Rule = Callable[[Environment], list[Check]]
T = TypeVar("T")


def _rules() -> tuple[tuple[str, Rule], ...]:
    from envcheck.checks import driver, env, gpu, links, operator, torch, triton, wsl

    subjects = (driver, wsl, gpu, torch, triton, env, links, operator)
    return tuple((m.__name__.rsplit(".", 1)[1], m.checks) for m in subjects)


def evaluate(env: Environment) -> tuple[Check, ...]:
    """Every check, worst first (fail, warn, pass, skip), subject order kept within a status. Never raises."""
    return worst_first(c for subject, rule in _rules() for c in guarded(subject, rule, env))


def guarded(subject: str, rule: Callable[[T], list[Check]], arg: T) -> list[Check]:
    """``rule(arg)``'s checks; a rule that cannot run is one failing ``<subject>.internal`` check."""
    try:
        return list(rule(arg))
    except Exception as e:  # noqa: BLE001 - a buggy rule must not hide the others' verdicts
        first = first_line(e)
        return [said(f"{subject}.internal", "fail", "internal", "internal.fix", subject=subject,
                     error=f"{type(e).__name__}: {first}" if first else type(e).__name__)]


def worst_first(checks: Iterable[Check]) -> tuple[Check, ...]:
    """``checks`` ordered fail, warn, pass, skip (``STATUSES``); the order within a status is kept."""
    order = {s: i for i, s in enumerate(STATUSES)}
    return tuple(sorted(checks, key=lambda c: order[c.status]))
