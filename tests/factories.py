"""Builders of realistic reports for tests of the renderers and comparisons.

Numbers follow the shape of real H200 measurements (launch-bound small sizes,
bandwidth near 90% of theoretical at 2^26+, TF32 error on fp32 Triton matmul),
drawn from a seeded generator so every build is identical.
"""

from __future__ import annotations

import random

from envcheck.checks.said import said
from envcheck.model import (
    Accuracy,
    Bench,
    BenchDevice,
    Case,
    CeilingRun,
    Check,
    Environment,
    Gpu,
    MonitorWindow,
    Note,
    Report,
    Settings,
    Skip,
    Timing,
    known,
    missing,
)


def environment(gpu_name: str = "NVIDIA H200", driver: str = "580.159.04", torch: str = "2.11.0+cu130",
                mem_clock: int = 3201, bus: int = 6016, memory_bytes: int = 150754820096) -> Environment:
    return Environment(
        sections={
            "system": {
                "os_name": known("Ubuntu 24.04.3 LTS"),
                "kernel": known("6.18.44-fc-v657-gpu"),
                "arch": known("x86_64"),
                "cpu_model": known("AMD EPYC 9654 96-Core Processor"),
                "cpu_cores_logical": known(16),
                "ram_total_bytes": known(137438953472),
                "python_version": known("3.12.3"),
                "python_executable": known("/opt/torch/.venv/bin/python3"),
                "container": known("none"),
            },
            "wsl": {"is_wsl": known(False), "wsl_version": missing("not WSL")},
            "driver": {
                "driver_version": known(driver),
                "cuda_driver_version": known("13.0"),
                "nvml_version": known("13." + driver),
            },
            "cuda": {"nvcc_version": known("13.0.88"), "toolkit_path": known("/usr/local/cuda")},
            "env": {"variables": known({"CUDA_VISIBLE_DEVICES": "0", "HF_TOKEN": "<redacted>"})},
            "torch": {"version": known(torch), "build": known("cuda"), "cuda_version": known("13.0")},
            "torch_runtime": {"cuda_available": known(True), "device_count": known(1)},
            "triton": {"version": known("3.6.0")},
            "triton_runtime": {"smoke_ok": known(True), "compile_s": known(0.41)},
        },
        gpus=(
            Gpu(0, {
                "name": known(gpu_name),
                "uuid": known("GPU-8d0ff531-a2cd-2527-7669-e66277d6bc28"),
                "memory_total_bytes": known(memory_bytes),
                "compute_capability": known("9.0"),
                "sm_count": known(132),
                "sm_clock_max_mhz": known(1980),
                "mem_clock_max_mhz": known(mem_clock),
                "memory_bus_width_bits": known(bus),
                "power_limit_w": known(700.0),
                "ecc_mode_current": known(True),
                "mig_mode": known(False),
                "retired_pages_pending": missing("not supported on this GPU (NVML: Not Supported)"),
            }),
        ),
        probe_s=0.31,
    )


def _timing(rng: random.Random, method: str, median_us: float, n: int = 50, noise: float = 0.01,
            calls: int = 1) -> Timing:
    return Timing.from_samples(method, [median_us * (1 + rng.gauss(0, noise)) for _ in range(n)], calls)


def _window(rng: random.Random, power_w: float, capped: bool) -> MonitorWindow:
    n = 20
    return MonitorWindow(
        0.02, [0.02 * i for i in range(n)],
        sm_mhz=[1755.0 if capped else 1980.0] * n, mem_mhz=[3201.0] * n,
        temperature_c=[41 + rng.random() for _ in range(n)], power_w=[power_w * (1 + 0.01 * rng.random()) for _ in range(n)],
        reasons=tuple(("sw_power_cap",) if capped else () for _ in range(n)),
    )


def bench(gpu_name: str = "NVIDIA H200", bandwidth_gbps: float = 4814.4, scale: float = 1.0,
          seed: int = 0, sizes: tuple[int, ...] = (1024, 10240, 102400, 1 << 20, 1 << 24, 1 << 26, 1 << 28)) -> Bench:
    """Raw results for every op, shaped like an H200 run; ``scale`` multiplies every time (2.0 =
    twice as slow). Matmul groups at 2048 and up ran at the power cap (their NVML windows say so)."""
    rng = random.Random(seed)
    l2 = 62914560
    cases: list[Case] = []
    windows: list[MonitorWindow] = []

    def group(op, dtype, precision, shape, impls, capped=False, power_w=420.0):
        windows.append(_window(rng, 699.0 if capped else power_w, capped))
        w = len(windows) - 1
        for impl, gpu_us, launch_us, err, compile_s, kernel in impls:
            ws = (3 if op == "vector_add" else 2) * 4 * shape[0] if len(shape) == 1 else 0
            rotation = max(2, -(-3 * l2 // ws)) if (1 << 20) < ws < 3 * l2 else 1
            calls = max(1, round(1000 / max(gpu_us, 1e-3)))
            cases.append(Case(
                op, impl, dtype, precision, shape,
                gpu=_timing(rng, "cuda_graph", gpu_us * scale, calls=min(calls, 1000)),
                launch=_timing(rng, "cuda_events", launch_us * scale, noise=0.05, calls=min(100, calls)),
                compile_s=compile_s, accuracy=Accuracy(err, err * 40, err * 0.6, 0, 1 << 20), window=w,
                rotation_sets=rotation, kernel=kernel,
            ))

    for op, reads in (("vector_add", 2), ("relu", 1)):
        for n in sizes:
            nbytes = (reads + 1) * 4 * n
            gpu_us = max(1.1, nbytes / (bandwidth_gbps * 0.9e3))
            t_us = gpu_us * (1 + rng.uniform(-0.02, 0.02))
            group(op, "fp32", "fp32", (n,), [("torch", gpu_us, gpu_us + 4.2, 0.0, None, None),
                                             ("triton", t_us, t_us + 18.0, 0.0, 0.35, None)])
    for size in (512, 1024, 2048, 4096):
        for dtype, prec, rate, err in (("fp16", "fp16", 683, 3e-4), ("bf16", "bf16", 704, 2.4e-3),
                                       ("fp32", "tf32", 380, 7.7e-4), ("fp32", "fp32", 50, 2e-7)):
            eff = min(1.0, size / 4096)
            t_torch = 2 * size**3 / (rate * eff * 1e6)
            t_triton = t_torch / rng.uniform(0.88, 1.02)
            kernel = "tma_persistent 128x256x64 s4 w8" if size >= 2048 else "pointer 64x128x64 s4 w4"
            group("matmul", dtype, prec, (size, size, size),
                  [("torch", t_torch, t_torch + 5, err / 2, None, None),
                   ("triton", t_triton, t_triton + 20, err, 4.2, kernel)], capped=size >= 2048 and prec != "fp32")
    ceiling_runs = (
        CeilingRun("copy", "fp32", (1 << 28,), _timing(rng, "cuda_graph", 2 * 4 * 2**28 / (bandwidth_gbps * 0.888e3) * scale,
                                                       calls=2)),
        CeilingRun("read", "fp32", (1 << 28,), _timing(rng, "cuda_graph", 4 * 2**28 / (bandwidth_gbps * 0.93e3) * scale,
                                                       calls=4)),
        CeilingRun("matmul", "bf16", (8192, 8192, 8192), _timing(rng, "cuda_graph", 2 * 8192**3 / 720e6 * scale), "bf16"),
        CeilingRun("matmul", "fp16", (8192, 8192, 8192), _timing(rng, "cuda_graph", 2 * 8192**3 / 715e6 * scale), "fp16"),
    )
    skipped = (Skip("vector_add", "compile", "fp32", (1 << 28,),
                    Note("bench.triton_unusable.smoke_failed", {"detail": "RuntimeError: Failed to find C compiler"}),
                    "fp32"),)
    return Bench(
        device=BenchDevice("cuda", gpu_name, 0, uuid="GPU-8d0ff531-a2cd-2527-7669-e66277d6bc28", sm_count=132,
                           l2_bytes=l2, memory_total_bytes=150754820096, compute_capability="9.0",
                           pci_bus_id="00000000:19:00.0"),
        settings=Settings(warmup_ms=25, rep_ms=100, min_samples=10, max_samples=200, ops=("vector_add", "relu", "matmul"),
                          impls=("torch", "triton")),
        cases=tuple(cases), skipped=skipped, ceiling_runs=ceiling_runs, windows=tuple(windows),
        notes=(Note("bench.l2_cold", {"l2_bytes": l2, "l2_multiple": 3, "min_bytes": 1 << 20}),),
        started="2026-11-21T22:00:00Z", duration_s=212.5, versions={"torch": "2.11.0+cu130", "triton": "3.6.0"},
    )


def report(gpu_name: str = "NVIDIA H200", host: str = "gpu-box-1", created: str = "2026-11-21T22:00:00Z",
           driver: str = "580.159.04", torch: str = "2.11.0+cu130", scale: float = 1.0, seed: int = 0,
           checks: tuple[Check, ...] | None = None) -> Report:
    if checks is None:
        checks = (
            said("gpu.throttle", "pass", "gpu.calm", gpu="GPU 0 (NVIDIA H200)", clock=1980, clock_max=1980),
            said("gpu.processes", "warn", "gpu.shared", "gpu.shared.fix", gpu="GPU 0 (NVIDIA H200)", count=1,
                 shown="python (pid 4242, 1.2 GiB)"),
            said("triton.smoke", "pass", "triton.smoke.compile", compile="0.41"),
        )
    return Report(
        tool_version="0.1.0", created=created, host=host, kind="run",
        environment=environment(gpu_name=gpu_name, driver=driver, torch=torch), checks=checks,
        benches=(bench(gpu_name=gpu_name, scale=scale, seed=seed),),
    )
