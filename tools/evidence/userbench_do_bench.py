"""Check ``envcheck bench``'s GPU times of the worked example against ``triton.testing.do_bench``.

    python tools/evidence/userbench_do_bench.py REPORT.json

REPORT.json: what ``envcheck bench examples/softmax_wsum.py`` wrote. For every case of the
example at the shapes whose working set is at least 3x this GPU's L2 (there envcheck's
rotating buffers and do_bench's L2 flush both measure DRAM, so like is compared with like),
the same callable on inputs drawn the same way is timed with ``triton.testing.do_bench_cudagraph``
(median of graph replays), independently of envcheck's timer, and set against the report's GPU time
(CUDA-graph replay). Not ``do_bench``: it times each call between two events with its L2 flush just
before, so a kernel launched from Python after the flush has finished is timed with the host's launch
inside the window (on an H100 the example's 87 us Triton kernel read 99 us, 12.7% more, while the
PyTorch fallback, several kernels per call, agreed within 4%). Prints one row per case; exit status 1 when one
differs by more than 3%, 2 without a CUDA GPU or a usable report.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TOLERANCE = 0.03
ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    import torch
    import triton.testing

    from envcheck.bench.impls import torch_dtype
    from envcheck.model import load

    if not torch.cuda.is_available() or len(argv) != 1:
        print("usage: python tools/evidence/userbench_do_bench.py REPORT.json (on a CUDA GPU)", file=sys.stderr)
        return 2
    report = load(argv[0])
    bench = report.bench
    if bench is None or bench.device.backend != "cuda" or not bench.device.l2_bytes:
        print(f"{argv[0]}: not a GPU report of envcheck bench", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("softmax_wsum_example", ROOT / "examples" / "softmax_wsum.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    op = example.SOFTMAX_WSUM
    worst = 0.0
    print(f"{'impl':8} {'dtype':5} {'shape':>12} {'envcheck us':>12} {'do_bench us':>12} {'ratio':>7}")
    for case in bench.cases:
        if case.op != op.name or case.gpu is None:
            continue
        if bench.spec(case.op).working_set_bytes(case.shape, case.dtype) < 3 * bench.device.l2_bytes:
            continue
        gen = torch.Generator(device="cuda").manual_seed(0)
        args = op.inputs(case.shape, torch_dtype(case.dtype), "cuda", gen)
        fn = op.impls[case.impl]
        ms = triton.testing.do_bench_cudagraph(lambda fn=fn, args=args: fn(*args), rep=300, return_mode="median")
        ratio = case.gpu.median_us / (ms * 1e3)
        worst = max(worst, abs(ratio - 1.0))
        shape = "x".join(map(str, case.shape))
        print(f"{case.impl:8} {case.dtype:5} {shape:>12} {case.gpu.median_us:12.2f} {ms * 1e3:12.2f} {ratio:7.3f}")
    print(f"largest difference: {100 * worst:.1f}% (tolerance {100 * TOLERANCE:.0f}%)")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
