"""The cases of ``envcheck bench``: every declared (op, dtype, shape) and implementation, the baseline first,
planned as the built-in suite (bench/suite.py); the ops arrive as ``OpSpec`` (no torch, no user code here).
"""

from __future__ import annotations

import dataclasses

from envcheck.bench import suite
from envcheck.model import Environment
from envcheck.ops import OpSpec

# What makes a declared op's code in the worker (the suite's runtime imports it by this name).
CODE = "envcheck.userbench.code:user_code"


def plan(ops: tuple[OpSpec, ...], source: str, quick: bool, device: int, env: Environment,
         interpret: bool = False) -> suite.Plan:
    """``interpret``: the worker's environment has ``TRITON_INTERPRET=1``; on the CPU its Triton kernels then
    run in Triton's interpreter, which the report records (their times are not speeds)."""
    base = dataclasses.replace(suite.frame(quick, device, env, tuple(op.name for op in ops)),
                               ops=ops, source=source, code=CODE)
    if base.backend is None:
        return base
    impls = tuple(dict.fromkeys(i for op in ops for i in op.impls))
    settings = dataclasses.replace(base.settings, impls=impls, interpret=interpret and base.backend == "cpu")
    planned = [suite.PlannedCase(op.name, impl, cost.dtype, cost.dtype, cost.shape)
               for op in ops for cost in (op.declared.costs if op.declared else ())
               for impl in (op.baseline, *(i for i in op.impls if i != op.baseline))]
    specs = {op.name: op for op in ops}
    return dataclasses.replace(suite.with_cases(base, planned, env, specs.__getitem__), settings=settings)
