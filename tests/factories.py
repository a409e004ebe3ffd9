"""Builders of realistic reports for tests of the renderers and comparisons.

Numbers follow the shape of real H200 measurements (launch-bound small sizes,
bandwidth near 90% of theoretical at 2^26+, TF32 error on fp32 Triton matmul),
drawn from a seeded generator so every build is identical.
"""

from __future__ import annotations

import random

from envcheck.model import (
    Bench,
    BenchDevice,
    Case,
    Ceiling,
    Check,
    Environment,
    Gpu,
    MonitorSummary,
    NumericError,
    Report,
    Skip,
    Timing,
    known,
    missing,
)

TOLERANCE = {"fp32": 1e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 3e-2}


def environment(gpu_name: str = "NVIDIA H200", driver: str = "580.159.04", torch: str = "2.11.0+cu130",
                mem_clock: int = 3201, bus: int = 6016, memory_bytes: int = 150754820096) -> Environment:
    bw = 2 * mem_clock * 1e6 * bus / 8 / 1e9
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
                "theoretical_bandwidth_gbps": known(round(bw, 1)),
                "power_limit_w": known(700.0),
                "ecc_mode_current": known(True),
                "mig_mode": known(False),
                "retired_pages_pending": missing("not supported on this GPU (NVML: Not Supported)"),
            }),
        ),
        probe_s=0.31,
    )


def _timing(rng: random.Random, method: str, median_us: float, n: int = 50, noise: float = 0.01) -> Timing:
    return Timing.from_samples(method, [median_us * (1 + rng.gauss(0, noise)) for _ in range(n)])


def bench(gpu_name: str = "NVIDIA H200", bandwidth_gbps: float = 4814.4, scale: float = 1.0,
          seed: int = 0, sizes: tuple[int, ...] = (1024, 10240, 102400, 1 << 20, 1 << 24, 1 << 26, 1 << 28)) -> Bench:
    """Cases for every op; ``scale`` multiplies every time (2.0 = twice as slow)."""
    rng = random.Random(seed)
    measured_bw = bandwidth_gbps * 0.888
    ceilings = (
        Ceiling("bandwidth", "theoretical", bandwidth_gbps, "GB/s", "NVML: 2 x 3201 MHz x 6016 bit / 8"),
        Ceiling("bandwidth", "measured", measured_bw, "GB/s", "device-to-device copy of 2 GiB in this run"),
        Ceiling("fp16", "theoretical", 989.4, "TFLOP/s", "spec table: H100/H200 SXM dense fp16"),
        Ceiling("bf16", "theoretical", 989.4, "TFLOP/s", "spec table: H100/H200 SXM dense bf16"),
        Ceiling("tf32", "theoretical", 494.7, "TFLOP/s", "spec table: H100/H200 SXM dense tf32"),
        Ceiling("fp32", "theoretical", 66.9, "TFLOP/s", "132 SMs x 1980 MHz x 256 FLOP/clk/SM"),
    )
    peak = {c.name: c.value for c in ceilings if c.kind == "theoretical" and c.unit == "TFLOP/s"}
    cases: list[Case] = []

    def add(op, impl, dtype, precision, shape, nbytes, flops, gpu_us, launch_us, err, tol, *, speedup, compile_s=None,
            flags=(), kernel=None):
        gpu = _timing(rng, "cuda_graph", gpu_us * scale)
        launch = _timing(rng, "cuda_events", launch_us * scale, noise=0.05)
        t = gpu.median_us * 1e-6
        gbps = nbytes / t / 1e9
        tflops = flops / t / 1e12 if flops else None
        n = shape[0] if len(shape) == 1 else shape[0] * shape[1]
        category = "small" if n < 1 << 16 else "medium" if n < 1 << 22 else "large" if n < 1 << 27 else "xlarge"
        is_mm = op == "matmul"
        cases.append(Case(
            op=op, impl=impl, dtype=dtype, precision=precision, shape=shape, category=category, bytes=nbytes,
            flops=flops, status="pass" if err <= tol else "fail", gpu=gpu, launch=launch, compile_s=compile_s,
            error=NumericError(err, err * 40, tol, precision, err <= tol),
            monitor=MonitorSummary(20, 1980, 1980, 3201, 3201, 41, 612.0),
            flags=tuple(flags), tf32=precision == "tf32", gbps=gbps, tflops=tflops,
            # As the worker records them: compute-bound matmul against its precision's peaks.
            pct_theoretical=100 * tflops / peak[precision] if is_mm else 100 * gbps / bandwidth_gbps,
            pct_measured=None if is_mm else 100 * gbps / measured_bw,
            speedup=speedup, kernel=kernel,
        ))

    for op, reads in (("vector_add", 2), ("relu", 1)):
        for n in sizes:
            nbytes = (reads + 1) * 4 * n
            gpu_us = max(1.1, nbytes / (bandwidth_gbps * 0.9e3))
            flags = ("launch_bound",) if gpu_us < 5 else ()
            flags += ("l2_resident",) if nbytes < 60 * 2**20 else ()
            add(op, "torch", "fp32", "fp32", (n,), nbytes, n if reads == 2 else n, gpu_us, gpu_us + 4.2, 0.0, 1e-5,
                speedup=None, flags=flags)
            t_us = gpu_us * (1 + rng.uniform(-0.02, 0.02))
            add(op, "triton", "fp32", "fp32", (n,), nbytes, n, t_us, t_us + 18.0, 0.0, 1e-5,
                speedup=gpu_us / t_us, compile_s=0.35, flags=flags)
    for size in (512, 1024, 2048, 4096):
        for dtype, prec, rate, err in (("fp16", "fp16", 683, 3e-4), ("bf16", "bf16", 704, 2.4e-3),
                                       ("fp32", "tf32", 380, 7.7e-4), ("fp32", "fp32", 50, 2e-7)):
            flops = 2 * size**3
            nbytes = 3 * size * size * (4 if dtype == "fp32" else 2)
            eff = min(1.0, size / 4096)
            t_torch = flops / (rate * eff * 1e6)
            t_triton = t_torch / rng.uniform(0.88, 1.02)
            add("matmul", "torch", dtype, prec, (size, size, size), nbytes, flops, t_torch, t_torch + 5, err / 2,
                TOLERANCE[prec], speedup=None)
            add("matmul", "triton", dtype, prec, (size, size, size), nbytes, flops, t_triton, t_triton + 20, err,
                TOLERANCE[prec], speedup=t_torch / t_triton, compile_s=4.2,
                kernel="tma_persistent 128x256x64 s4 w8" if size >= 2048 else "pointer 64x128x64 s4 w4")
    skipped = (Skip("vector_add", "compile", "fp32", (1 << 28,), "torch.compile unavailable: no C compiler"),)
    return Bench(
        device=BenchDevice("cuda", gpu_name, 0, 132, 62914560, 150754820096, "9.0"),
        settings={"quick": False, "warmup_ms": 25, "rep": 50},
        ceilings=ceilings, cases=tuple(cases), skipped=skipped,
        notes=("L2 kept cold for memory-bound cases from 1 MiB to 3x L2 (60 MiB L2) by rotating buffers",),
        started="2026-11-21T22:00:00Z", duration_s=212.5, versions={"torch": "2.11.0+cu130", "triton": "3.6.0"},
    )


def report(gpu_name: str = "NVIDIA H200", host: str = "gpu-box-1", created: str = "2026-11-21T22:00:00Z",
           driver: str = "580.159.04", torch: str = "2.11.0+cu130", scale: float = 1.0, seed: int = 0,
           checks: tuple[Check, ...] | None = None) -> Report:
    if checks is None:
        checks = (
            Check("gpu.throttle", "pass", "GPU clocks", "GPU 0 (NVIDIA H200) is not throttled"),
            Check("gpu.processes", "warn", "Other processes on the GPU",
                  "GPU 0 runs 1 other process (python, 1.2 GiB): benchmarks may be noisy",
                  fix="stop the other process (nvidia-smi --query-compute-apps=pid,name --format=csv) and run again"),
            Check("triton.smoke", "pass", "Triton smoke kernel", "compiled in 0.41 s and ran correctly"),
        )
    return Report(
        tool_version="0.1.0", created=created, host=host, kind="run",
        environment=environment(gpu_name=gpu_name, driver=driver, torch=torch), checks=checks,
        bench=bench(gpu_name=gpu_name, scale=scale, seed=seed),
    )
