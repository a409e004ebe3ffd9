"""Narrowing a slow collective to a rank, a link, a node or the network: the sub-groups the bisection asks for
(``analysis.fleet.next_narrowing_group``), measured by every rank in step (``new_group`` needs every rank)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from envcheck.analysis.narrowing import DEFAULT_NARROW_MARGIN, NarrowStep, next_narrowing_group

MeasureGroup = Callable[[tuple[int, ...]], float | None]  # busbw in GB/s, None when the run failed


def run_narrowing(measure: MeasureGroup, world: tuple[int, ...], hosts: Sequence[str],
                  margin: float = DEFAULT_NARROW_MARGIN) -> tuple[NarrowStep, ...]:
    """Measure the groups the bisection asks for, in its order; the steps taken."""
    steps: list[NarrowStep] = []
    while True:
        group = next_narrowing_group(steps, world, hosts, margin)
        if group is None:
            return tuple(steps)
        steps.append(NarrowStep(group, measure(group)))
