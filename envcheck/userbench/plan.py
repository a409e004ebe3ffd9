"""The cases of ``envcheck bench``: every declared (op, dtype, shape), every implementation.

The same ``Plan`` the built-in suite makes (bench/suite.py), from the same probe facts, with
the same settings presets, memory check and notes; only where the cases come from differs.
Never imports torch, never runs the user's code (the ops arrive as ``OpSpec`` from discover.py).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from envcheck.bench import suite
from envcheck.bench.threads import cpu_threads
from envcheck.model import Environment, Note
from envcheck.ops import OpSpec

# What makes a declared op's code in the worker (the suite's runtime imports it by this name).
CODE = "envcheck.userbench.code:user_code"


class BenchOptions(Protocol):
    """The ``envcheck bench`` arguments planning reads."""

    quick: bool
    device: int


def plan(ops: tuple[OpSpec, ...], source: str, options: BenchOptions, env: Environment,
         interpret: bool = False) -> suite.Plan:
    """Every declared case; ``--quick`` takes the quick settings (shorter sampling). ``interpret``: the
    worker's environment has ``TRITON_INTERPRET=1``; on the CPU its Triton kernels then run in Triton's
    interpreter, which the report records (``settings.interpret``: their times are not speeds)."""
    quick = bool(options.quick)
    suite.check_device(options.device, env)
    names = tuple(op.name for op in ops)
    no_torch = suite.torch_missing(env)
    if no_torch:
        settings = dataclasses.replace(suite.GPU_QUICK_SETTINGS if quick else suite.GPU_SETTINGS, quick=quick,
                                       ops=names)
        return suite.Plan(None, 0, (), settings, suite.probed_device(env, None, 0), notes=(no_torch,), ops=ops,
                          source=source, code=CODE)
    notes: list[Note] = []
    cuda_reasons = suite.cuda_unusable(env)
    backend = "cpu" if cuda_reasons else "cuda"
    index = options.device if backend == "cuda" else 0
    if backend == "cuda":
        settings = suite.GPU_QUICK_SETTINGS if quick else suite.GPU_SETTINGS
    else:
        notes += cuda_reasons  # every implementation still runs: a Triton one under TRITON_INTERPRET=1
        settings = dataclasses.replace(suite.CPU_QUICK_SETTINGS if quick else suite.CPU_SETTINGS,
                                       threads=cpu_threads(), interpret=interpret)
    impls = tuple(dict.fromkeys(i for op in ops for i in op.impls))
    settings = dataclasses.replace(settings, quick=quick, ops=names, impls=impls)
    budget, where = suite.free_memory(env, backend, index)
    cases, skips = [], []
    for op in ops:
        assert op.declared is not None
        order = (op.baseline, *(i for i in op.impls if i != op.baseline))  # the baseline first
        for cost in op.declared.costs:
            need = op.memory_needed_bytes(cost.shape, cost.dtype)
            for impl in order:
                planned = suite.PlannedCase(op.name, impl, cost.dtype, cost.dtype, cost.shape)
                if budget is not None and need > suite.MEMORY_HEADROOM * budget:
                    skips.append(planned.skip(Note("skip.memory", {"need_bytes": need, "free_bytes": budget,
                                                                   **where})))
                else:
                    cases.append(planned)
    return suite.Plan(backend, index, tuple(cases), settings, suite.probed_device(env, backend, index),
                      tuple(skips), tuple(notes), ops=ops, source=source, code=CODE)
