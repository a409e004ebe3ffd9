"""The worker's own run of ``envcheck run --interpret`` cases, in this process, optionally with
one of envcheck's Triton kernels replaced by a planted bug (tests/planted.py):
``python tests/interpret_child.py RUN...``, each RUN ``OPS`` or ``OPS:PLANT``, optionally
``@SEED`` (the run's input seed; default 0) (TRITON_INTERPRET is set here, before any kernel is
decorated); a planted RUN runs only the Triton cases its bug applies to. Prints, per RUN, the
measured cases as the report's JSON holds them (one object), for tests/test_judge.py to judge
in-process with the analysis the CLI uses.

The plan is ``suite.plan`` for ``run --interpret --ops OPS`` on a machine without a GPU, the
run is ``worker.Worker`` (inputs, first call, checked calls, exact inputs, reference, statistics:
group.py, accuracy.py): the path ``envcheck run`` takes, minus the process boundary and the timing
(``run_planned``, which tests/test_judge_gpu.py also runs on a GPU). The judge reads the accuracy
only: the interpreted kernels are checked, never timed (``bench.interpret.checked_only``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any


def run_planned(planned: tuple[Any, ...], backend: str, settings: Any, plant: str | None = None) -> list[dict]:
    """The worker's run of ``planned`` cases, with bug ``plant`` in place of its op's kernel."""
    from envcheck.bench.protocol import Measured, WorkerPlan
    from envcheck.bench.worker import Worker
    from envcheck.model import to_dict
    from tests import planted

    cases: list[dict] = []

    def emit(event: object) -> None:
        if isinstance(event, Measured):
            cases.append(to_dict(event.case))

    if plant:
        planted.install(plant)
    try:
        Worker(WorkerPlan(backend, 0, planned, settings, ceilings=False), emit).run()
    finally:
        if plant:
            planted.restore(plant)
    return cases


def run(ops: str, plant: str | None, seed: int = 0) -> list[dict]:
    from envcheck.bench import suite
    from envcheck.commands.options import RunOptions
    from tests import factories_cpu

    plan = suite.plan(RunOptions(ops=tuple(ops.split(",")), no_compile=True, interpret=True),
                      factories_cpu.environment())
    cases = plan.cases
    if plant:  # only the Triton cases the bug applies to: the others run the shipped code (the correct suite's run)
        from tests.planted import PLANTED

        cases = tuple(c for c in cases if c.impl == "triton" and PLANTED[plant].applies(c.dtype, c.shape))
    return run_planned(cases, plan.backend or "cpu", dataclasses.replace(plan.settings, seed=seed), plant)


def main(runs: list[str]) -> None:
    from envcheck.bench import interpret

    interpret.enable()
    out = {}
    for spec in runs:
        what, _, seed = spec.partition("@")
        ops, _, plant = what.partition(":")
        out[spec] = run(ops, plant or None, int(seed or 0))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
