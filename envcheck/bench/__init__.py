"""Benchmarks: timing, kernels, the suite of cases, ceilings and NVML monitoring while they run."""
