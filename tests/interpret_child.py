"""The worker's own run of ``envcheck run --interpret`` cases, in this process, optionally with
one of envcheck's Triton kernels replaced by a planted bug (tests/planted.py):
``python tests/interpret_child.py OPS [PLANT]`` (TRITON_INTERPRET is set here, before any
kernel is decorated). Prints the measured cases as the report's JSON holds them (one list),
for tests/test_judge.py to judge in-process with the analysis the CLI uses.

The plan is ``suite.plan`` for ``run --interpret --ops OPS`` on a machine without a GPU, the
run is ``worker.Worker`` (inputs, checked calls, reference, statistics: group.py, accuracy.py):
the path ``envcheck run`` takes, minus the process boundary.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace


def main(ops: str, plant: str | None) -> None:
    from envcheck.bench import interpret

    interpret.enable()
    from envcheck.bench import suite
    from envcheck.bench.protocol import Measured, WorkerPlan
    from envcheck.bench.worker import Worker
    from envcheck.model import to_dict
    from tests import factories_cpu

    if plant:
        from tests import planted

        planted.install(plant)
    options = SimpleNamespace(quick=False, ops=ops.split(","), sizes=None, dtypes=None, device=0, no_compile=True,
                              interpret=True)
    plan = suite.plan(options, factories_cpu.environment())
    cases = []

    def emit(event: object) -> None:
        if isinstance(event, Measured):
            cases.append(to_dict(event.case))

    Worker(WorkerPlan(plan.backend or "cpu", 0, plan.cases, plan.settings, ceilings=False), emit).run()
    json.dump(cases, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
