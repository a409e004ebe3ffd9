"""How a power-capped kernel's time moves from the first milliseconds of load to seconds of it (issue 22).

    python scripts/diag_power_ramp.py [SECONDS]

scripts/verify_ops.py found, on one H100, cuDNN's conv2d and linear forward + backward 3-8% faster in
the report than in do_bench_cudagraph minutes later, the report's windows at 1980 / 1470 / 1405 MHz
and the reference's at 1761 / 1441 / 1294 MHz and 685-694 W
(reports/device-logs/2026-11-26_0442Z_h100_verify_ops.txt). Each implementation is settled and sampled
in a window of its own (envcheck/bench/sampling.py): a fraction of a second after a pause. This script
shows what that fraction of a second sees against seconds of the same load.

For each case, after IDLE_S of idle GPU: the case's calls replayed from one CUDA graph back to back for
SECONDS (4), in blocks of about 25 ms, each call between two events; after each block the block's median
time, NVML's SM clock, power (NVML's averaged reading and, where the driver has it, the instantaneous
field) and temperature. Printed: every fourth block, then a summary with

* where a settle like ``Timer.settle`` stops (the first block within 0.5% of the one before) and the
  median of the 50 ms after it: about what a window of envcheck's would read after this pause;
* the medians of the blocks in 0.25-0.5 s, 1-2 s and the last second, each with its clock and power;
* ``do_bench_cudagraph`` run right after the load (hot) and again after IDLE_S of idle (cold).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

IDLE_S = 8.0
BLOCK_MS = 25.0
SETTLE_TOLERANCE = 0.005
CASES = (
    ("conv2d", "torch", "fp16", (64, 64, 128, 128, 64, 7, 2)),
    ("linear_fwbw", "torch", "fp16", (4096, 4096, 4096)),
    ("linear_fwbw", "triton", "fp16", (4096, 4096, 4096)),
    ("matmul", "torch", "fp16", (8192, 8192, 8192)),
    ("layer_norm", "torch", "fp16", (32768, 8192)),
)


def nvml_state(pynvml: Any, handle: Any) -> tuple[float, float, float, float]:
    """(SM MHz, averaged W, instantaneous W or nan, degrees C)."""
    sm = float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    avg = pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3
    inst = float("nan")
    field = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", None)
    if field is not None:
        with_value = pynvml.nvmlDeviceGetFieldValues(handle, [field])[0]
        if with_value.nvmlReturn == 0:
            inst = with_value.value.uiVal / 1e3
    temp = float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))
    return sm, avg, inst, temp


def graphed(call: Any) -> Any:
    """``call`` captured in a CUDA graph (its replay; envcheck's own capture), or ``call`` itself where
    capture fails."""
    import torch

    from envcheck.bench.graphs import capture_graph

    try:
        return capture_graph(call, 1).replay
    except RuntimeError as e:
        print(f"  (not captured: {str(e).splitlines()[0][:100]}; eager calls)")
        torch.cuda.synchronize()
        return call


def block(run: Any, n: int) -> list[float]:
    import torch

    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for s, e in ev:
        s.record()
        run()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in ev]


def ramp(case: tuple[str, str, str, tuple[int, ...]], seconds: float, pynvml: Any, handle: Any) -> None:
    import triton.testing

    verify_ops = _verify_ops()
    op, impl, dtype, shape = case
    call = verify_ops.bound_call(impl, op, dtype, dtype, shape)
    run = graphed(call)
    n = max(1, round(BLOCK_MS * 1e3 / statistics.median(block(run, 3))))
    time.sleep(IDLE_S)
    rows: list[tuple[float, float, float, float, float, float]] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        med = statistics.median(block(run, n))
        rows.append((time.perf_counter() - t0, med, *nvml_state(pynvml, handle)))
    hot = triton.testing.do_bench_cudagraph(call)
    time.sleep(IDLE_S)
    cold = triton.testing.do_bench_cudagraph(call)

    print(f"\n{op} {impl} {dtype} {'x'.join(map(str, shape))}: {n} calls a block, {len(rows)} blocks")
    print(f"  {'t ms':>7} {'us':>9} {'SM MHz':>7} {'W avg':>6} {'W inst':>6} {'C':>4}")
    for i, r in enumerate(rows):
        if i % 4 == 0 or i == len(rows) - 1:
            print(f"  {r[0] * 1e3:7.0f} {r[1]:9.1f} {r[2]:7.0f} {r[3]:6.0f} {r[4]:6.0f} {r[5]:4.0f}")

    def span(a: float, b: float) -> str:
        sel = [r for r in rows if a <= r[0] < b]
        if not sel:
            return "-"
        return (
            f"{statistics.median(r[1] for r in sel):.1f} us at {statistics.mean(r[2] for r in sel):.0f} MHz, "
            f"{statistics.mean(r[4] for r in sel):.0f} W inst"
        )

    stop = next(
        (i for i in range(1, len(rows)) if abs(rows[i][1] - rows[i - 1][1]) <= SETTLE_TOLERANCE * rows[i - 1][1]), None
    )
    if stop is not None:
        t = rows[stop][0]
        print(f"  settle stops at block {stop} ({t * 1e3:.0f} ms); the 50 ms after: {span(t, t + 0.05)}")
    print(f"  0.25-0.5 s: {span(0.25, 0.5)}")
    print(f"  1-2 s:      {span(1.0, 2.0)}")
    print(f"  last 1 s:   {span(seconds - 1.0, seconds + 1.0)}")
    print(f"  do_bench_cudagraph hot {hot * 1e3:.1f} us, after {IDLE_S:.0f} s idle {cold * 1e3:.1f} us")


def _verify_ops() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("verify_ops", ROOT / "scripts" / "verify_ops.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str]) -> int:
    import pynvml
    import torch

    seconds = float(argv[0]) if argv else 4.0
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    limit = pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1e3
    print(f"{torch.cuda.get_device_name()}; power limit {limit:.0f} W; idle {IDLE_S:.0f} s before each case")
    for case in CASES:
        try:
            ramp(case, seconds, pynvml, handle)
        except Exception as e:  # noqa: BLE001 - a diagnostic: report the case and go on
            print(f"\n{case}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
