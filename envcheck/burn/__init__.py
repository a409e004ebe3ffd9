"""Burn-in (``envcheck burn``): every selected GPU under sustained load at once, each in its own
isolated worker (worker.py, its contract in protocol.py), with NVML telemetry throughout.

Phases, in order, each sized from the minutes asked (plan.py): ``gemm`` (tensor-core GEMM that holds
the GPU at its power limit, every iteration's result checked for silent data corruption: gemm.py),
``bandwidth`` (streaming copies over most of the free memory: stream.py) and ``memtest`` (patterns
written and read back over at least 90% of the free memory: memtest.py). ``run.burn_node`` is the
one entry point (GPUs and minutes in, the model's ``Burn`` out): the command, ``run --burn`` and, later,
a fleet's node call it.
"""
