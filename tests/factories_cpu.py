"""A CPU-only run, built like ``factories`` builds a GPU one: PyTorch's CPU baseline, host-clock times.

Shaped like a real run on a 16-thread x86 VM without a GPU: no Triton, no CUDA graphs, no NVML
windows, ``cold_l2`` off, the threads torch used recorded; one matmul size only per precision
(what a quick CPU run measures), so its charts must be left out rather than drawn as single points.
"""

from __future__ import annotations

import random

from envcheck.checks.said import said
from envcheck.model import (
    Accuracy,
    Bench,
    BenchDevice,
    Case,
    Environment,
    Note,
    Report,
    Settings,
    Skip,
    Timing,
    known,
    missing,
)


def environment() -> Environment:
    return Environment(
        sections={
            "system": {
                "os_name": known("Ubuntu 24.04.3 LTS"), "kernel": known("6.8.0-49-generic"), "arch": known("x86_64"),
                "cpu_model": known("Intel(R) Xeon(R) Platinum 8480+"), "cpu_cores_logical": known(16),
                "ram_total_bytes": known(68719476736), "python_version": known("3.12.3"), "container": known("none"),
            },
            "wsl": {"is_wsl": known(False)},
            "driver": {"driver_version": missing("no NVIDIA driver (libnvidia-ml.so.1 not found)")},
            "torch": {"version": known("2.13.0+cpu"), "build": known("cpu"), "cuda_version": missing("a CPU build")},
            "torch_runtime": {"cuda_available": known(False)},
            "triton": {"version": missing("not installed")},
        },
        gpus=(),
        probe_s=0.12,
    )


def _timing(rng: random.Random, us: float, n: int = 30) -> Timing:
    return Timing.from_samples("host_clock", [us * (1 + rng.gauss(0, 0.01)) for _ in range(n)])


def bench(seed: int = 0) -> Bench:
    rng = random.Random(seed)
    cases = []
    for op, per_elem_ns in (("vector_add", 0.25), ("relu", 0.18)):
        for n in (1 << 10, 1 << 16, 1 << 20, 1 << 24):
            cases.append(Case(op, "torch", "fp32", "fp32", (n,), launch=_timing(rng, 3.0 + n * per_elem_ns / 1e3),
                              accuracy=Accuracy(0.0, 0.0, 0.0, 0, n)))
    for dtype, rate_gflops in (("fp32", 1500.0), ("bf16", 900.0)):
        m = 2048
        cases.append(Case("matmul", "torch", dtype, dtype, (m, m, m), launch=_timing(rng, 2 * m**3 / (rate_gflops * 1e3)),
                          accuracy=Accuracy(2e-7 if dtype == "fp32" else 1.9e-3, 1e-4, 1e-6, 0, m * m)))
    for shape in ((4096, 1024), (8192, 4096), (16384, 8192), (4096, 32768)):
        n = shape[0] * shape[1]
        cases.append(Case("softmax", "torch", "fp32", "fp32", shape, launch=_timing(rng, 5.0 + n * 0.9 / 1e3),
                          accuracy=Accuracy(3e-8, 1e-9, 1e-7, 0, n)))
    skipped = tuple(Skip(op, "triton", "fp32", shape, Note("bench.triton_unusable.not_installed"), "fp32")
                    for op, shape in (("vector_add", (1 << 20,)), ("matmul", (2048, 2048, 2048))))
    return Bench(
        device=BenchDevice("cpu", "Intel(R) Xeon(R) Platinum 8480+"),
        settings=Settings(warmup_ms=20, rep_ms=100, min_samples=5, max_samples=200, cold_l2=False, quick=True,
                          ops=("vector_add", "relu", "matmul", "softmax"), impls=("torch",), threads=16),
        cases=tuple(cases), skipped=skipped,
        notes=(Note("bench.cpu_baseline"),),
        started="2026-11-22T09:00:00Z", duration_s=31.5, versions={"torch": "2.13.0+cpu"},
    )


def report() -> Report:
    checks = (
        said("driver.nvml", "fail", "nvml.none", "nvml.none.fix", err="libnvidia-ml.so.1 not found"),
        said("torch.installed", "pass", "torch.installed.build", version="2.13.0+cpu", build="cpu",
             location="/usr/lib/python3/site-packages/torch"),
    )
    return Report(tool_version="0.1.0", created="2026-11-22T09:00:31Z", host="cpu-box", kind="run",
                  environment=environment(), checks=checks, benches=(bench(),))
