"""The worker's own run of ``envcheck run --interpret`` cases, in this process, optionally with
one of envcheck's Triton kernels replaced by a planted bug (tests/planted.py):
``python tests/interpret_child.py RUN...``, each RUN ``OPS`` or ``OPS:PLANT``, optionally
``@SEED`` (the run's input seed; default 0) (TRITON_INTERPRET
is set here, before any kernel is decorated). Prints, per RUN, the measured cases as the
report's JSON holds them (one object), for tests/test_judge.py to judge in-process with the
analysis the CLI uses.

The plan is ``suite.plan`` for ``run --interpret --ops OPS`` on a machine without a GPU, the
run is ``worker.Worker`` (inputs, first call, checked calls, reference, statistics: group.py,
accuracy.py): the path ``envcheck run`` takes, minus the process boundary and the timing. The judge
reads the accuracy only: the interpreted kernels are checked, never timed (``bench.interpret.checked_only``).
"""

from __future__ import annotations

import dataclasses
import json
import sys


def run(ops: str, plant: str | None, seed: int = 0) -> list[dict]:
    from envcheck.bench import kernels, suite
    from envcheck.bench.protocol import Measured, WorkerPlan
    from envcheck.bench.worker import Worker
    from envcheck.commands.options import RunOptions
    from envcheck.model import to_dict
    from tests import factories_cpu, planted

    options = RunOptions(ops=tuple(ops.split(",")), no_compile=True, interpret=True)
    plan = suite.plan(options, factories_cpu.environment())
    settings = dataclasses.replace(plan.settings, seed=seed)
    cases: list[dict] = []

    def emit(event: object) -> None:
        if isinstance(event, Measured):
            cases.append(to_dict(event.case))

    op = planted.install(plant) if plant else None
    try:
        Worker(WorkerPlan(plan.backend or "cpu", 0, plan.cases, settings, ceilings=False), emit).run()
    finally:
        if op is not None:
            setattr(kernels, op, planted.real(op))
    return cases


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
