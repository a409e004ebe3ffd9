"""Burn-in (``envcheck burn``): every selected GPU under sustained load at once, each in its own worker
(worker.py), with NVML telemetry: a checked GEMM at the power limit (gemm.py), streaming copies, and a memory
test (memtest.py), sized from the minutes asked (protocol.plans). ``run.burn_node`` is the one entry point.
"""
