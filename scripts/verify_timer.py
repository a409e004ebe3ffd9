"""Check envcheck's GPU timer against triton.testing.do_bench on the same callables.

    python scripts/verify_timer.py

Times torch and Triton vector_add / relu at 2^26 and 2^28 fp32 elements and torch and Triton
matmul fp16 / bf16 at 4096^3 with envcheck's CUDA-graph timer (envcheck.bench.timer) and with
``triton.testing.do_bench(return_mode="median")``, prints both and their ratio, and exits 1
when any ratio is more than 5% from 1. At these sizes one call lasts 0.1-1 ms, so launch
overhead and L2 are negligible and both tools must see the same GPU time; at small sizes
they differ by design (do_bench times one eager launch after an L2 flush, envcheck a graph
replay) and are not compared.

Exit status: 0 agree, 1 disagree, 2 no CUDA GPU / torch / Triton.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run from a checkout without installing: the package sits beside this folder.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOLERANCE = 0.05
ROUNDS = 3


def _unusable() -> str | None:
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch"
    try:
        import triton.testing  # noqa: F401
    except ImportError as e:
        return f"Triton is not usable ({e})"
    return None


def _cases() -> list[tuple[str, str, Callable[[], Any]]]:
    """(label, impl, warmed-up callable) for every compared case."""
    import torch

    from envcheck.bench import ops

    out: list[tuple[str, str, Callable[[], Any]]] = []
    gen = torch.Generator(device="cuda").manual_seed(0)
    for op in ("vector_add", "relu"):
        for n in (1 << 26, 1 << 28):
            inputs = ops.make_inputs(op, (n,), "fp32", "cuda", gen)
            dst = ops.make_output(op, (n,), "fp32", "cuda")
            label = f"{op} fp32 2^{n.bit_length() - 1}"
            out.append((label, "torch", ops.torch_impl(op, inputs, dst)))
            out.append((label, "triton", ops.triton_impl(op, inputs, dst, "fp32")))
    for dtype in ("fp16", "bf16"):
        shape = (4096, 4096, 4096)
        inputs = ops.make_inputs("matmul", shape, dtype, "cuda", gen)
        dst = ops.make_output("matmul", shape, dtype, "cuda")
        label = f"matmul {dtype} 4096^3"
        out.append((label, "torch", ops.torch_impl("matmul", inputs, dst)))
        out.append((label, "triton", ops.triton_impl("matmul", inputs, dst, dtype)))
    return out


def main() -> int:
    reason = _unusable()
    if reason:
        print(f"verify_timer: needs a CUDA GPU with torch and Triton: {reason}", file=sys.stderr)
        return 2
    import torch
    import triton.testing

    from envcheck.bench.monitor import Monitor
    from envcheck.bench.timer import Timer, TimerSettings, graph_time
    from envcheck.probes.nvml import Nvml

    timer = Timer("cuda", TimerSettings(warmup_ms=25, rep_ms=200, min_samples=30, max_samples=500))
    nvml = Nvml()
    uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    print(f"{'case':<22} {'impl':<7} {'envcheck us':>12} {'do_bench us':>12} {'ratio':>7}"
          f"   mean SM MHz / W (envcheck | do_bench)")
    worst = 0.0
    for label, impl, fn in _cases():
        fn()
        torch.cuda.synchronize()
        timer.warmup(fn)
        # Alternate the two timers a few times and compare medians of their medians: a
        # matmul at 700 W moves with the power cap by a few percent from one second to the
        # next, which would otherwise be blamed on whichever timer ran second. The mean SM
        # clock and power during each timer's runs show the state the GPU was in: do_bench
        # clears L2 with a 256 MB memset before every call, and those gaps let a
        # power-capped matmul clock higher than back-to-back graph replays do.
        ours_runs, theirs_runs = [], []
        ours_mon, theirs_mon = Monitor(nvml, uuid, 0.01), Monitor(nvml, uuid, 0.01)
        for _ in range(ROUNDS):
            with ours_mon:
                ours_runs.append(graph_time(timer, fn).median_us)
            with theirs_mon:
                theirs_runs.append(float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")) * 1e3)
        ours, theirs = statistics.median(ours_runs), statistics.median(theirs_runs)
        ratio = ours / theirs
        worst = max(worst, abs(ratio - 1))
        mark = "" if abs(ratio - 1) <= TOLERANCE else "  <-- off by more than 5%"
        print(f"{label:<22} {impl:<7} {ours:12.2f} {theirs:12.2f} {ratio:7.3f}"
              f"   {_state(ours_mon)} | {_state(theirs_mon)}{mark}")
    nvml.shutdown()
    print(f"largest deviation: {100 * worst:.1f}% (allowed {100 * TOLERANCE:.0f}%)")
    return 0 if worst <= TOLERANCE else 1


def _state(monitor: Any) -> str:
    m = monitor.means()
    if "sm_clock" not in m:
        return "n/a"
    return f"{m['sm_clock']:.0f} MHz {m.get('power', float('nan')):.0f} W"


if __name__ == "__main__":
    sys.exit(main())
