"""Burn-in (``envcheck burn``): every selected GPU under sustained load at once, a worker each, with NVML telemetry
(a checked GEMM at the power limit, streaming copies, a memory test); ``run.burn_node`` is the entry point."""
