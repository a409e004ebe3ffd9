"""Where envcheck's timer and ``do_bench_cudagraph`` part on the conv2d headline case (issue 22).

    python scripts/diag_conv_timer.py

scripts/verify_timer.py --workloads found, on one H100, cuDNN's conv2d 64x64x128x128 by 64 7x7 filters
at stride 2 3.7% faster in envcheck than in do_bench_cudagraph (SM clock 1980 against 1874 MHz, power
535 against 648 W) and the Triton conv2d 2.5% slower (both at 1980 MHz). Each line below is one
variant of verify_timer's measure_row on that case: the implementations sampled together (both, as
the worker does) or alone, so one implementation's samples cannot follow the other's, each against
do_bench_cudagraph over ROUNDS rounds, with the SM clock and power of each side's windows.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CASE = ("conv2d", "fp16", (64, 64, 128, 128, 64, 7, 2))


def main() -> int:
    spec = importlib.util.spec_from_file_location("verify_timer", ROOT / "scripts" / "verify_timer.py")
    assert spec is not None and spec.loader is not None
    vt = importlib.util.module_from_spec(spec)
    sys.modules["verify_timer"] = vt  # its dataclasses look their module up while the class is made
    spec.loader.exec_module(vt)
    reason = vt._unusable()
    if reason:
        print(f"diag_conv_timer: {reason}", file=sys.stderr)
        return 2
    import torch

    from envcheck.bench import device
    from envcheck.bench.timer import Timer
    from envcheck.model import Settings
    from envcheck.probes.nvml import Nvml

    settings = Settings(warmup_ms=25, rep_ms=vt.WINDOW_MS, min_samples=30, max_samples=1000, cold_l2=False)
    nvml = Nvml()
    nvml.init()
    index = torch.cuda.current_device()
    dev = device.cuda_device(torch, index, nvml)
    rt = device.Runtime(torch, "cuda", index, dev, Timer("cuda", settings), settings)
    print(f"GPU: {dev.name}  torch {torch.__version__}  cudnn {torch.backends.cudnn.version()}")
    print(f"{'sampled':<14} {'impl':<6} {'envcheck':>9} {'cudagraph':>9} {'ratio':>6}  SM MHz / W (envcheck | cudagraph)")
    for impls in (("torch", "triton"), ("triton",), ("torch",)):
        for r in vt.measure_row(rt, nvml, dev.uuid or index, *CASE, impls=impls):
            ours, ref = statistics.median(t.median_us for t in r.gpu), statistics.median(r.theirs)
            print(f"{'+'.join(impls):<14} {r.impl:<6} {ours:9.2f} {ref:9.2f} {ours / ref:6.3f}  "
                  f"{r.ours_state} | {r.their_state}", flush=True)
        rt.after_failure()
    nvml.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
