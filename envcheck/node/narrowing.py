"""Narrowing a slow collective down to a rank, a link, a node or the network between groups: re-run
it on the sub-groups the bisection asks for (``envcheck.analysis.fleet.next_narrowing_group``) until
it has its answer. Every rank runs this loop with the same results, so all agree on each next group
(``torch.distributed.new_group`` must be called by every rank, members or not).
"""

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
