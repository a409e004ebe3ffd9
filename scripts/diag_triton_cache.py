"""Does a Triton matmul's time depend on whether its kernel was compiled in this process or loaded
from Triton's cache? In every committed pair of full runs back to back on a fresh machine (two H100s,
two H200s), Triton's fp32 matmul 1000^3 (the pointer kernel, 64x128x32, the same tile in both) took
158.5-158.8 us in the first run and 163.6-163.9 us in the second.

    python3 scripts/diag_triton_cache.py           # one process: times the rows below, prints one line each

Run it three times in a row with one TRITON_CACHE_DIR (empty the first time) and once more with a fresh
one; each line says whether the cache held files before the process started. Each row is timed with
``triton.testing.do_bench_cudagraph`` (median of five), and its data pointers' alignment is printed.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROWS = (("fp32", (1000, 1000, 1000)), ("tf32", (1000, 1000, 1000)), ("tf32", (1000, 1001, 999)),
        ("fp32", (1000, 1001, 999)))


def main() -> int:
    import torch
    import triton.testing

    from envcheck.bench import impls
    from envcheck.bench.kernels.matmul import tuned_config

    cache = Path(os.environ.get("TRITON_CACHE_DIR", Path.home() / ".triton" / "cache"))
    files = sum(1 for p in cache.rglob("*") if p.is_file()) if cache.is_dir() else 0
    print(f"cache {'warm' if files else 'cold'} ({files} files before this process)")
    for precision, shape in ROWS:
        gen = torch.Generator(device="cuda").manual_seed(1234)
        inputs = impls.make_inputs("matmul", shape, "fp32", "cuda", gen)
        out = impls.make_output("matmul", shape, "fp32", "cuda")
        with impls.tf32_matmul(precision):
            fn = impls.triton_impl("matmul", inputs, out, precision, shape)
            fn()
            torch.cuda.synchronize()
            times = [1e3 * triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median") for _ in range(5)]
        m, n, k = shape
        tile = tuned_config(m, n, k, torch.float32, precision)
        pointers = [t.data_ptr() % 4096 for t in (*inputs, out) if hasattr(t, "data_ptr")]
        print(f"matmul triton {precision} {'x'.join(map(str, shape))}: {statistics.median(times):8.2f} us "
              f"(rounds {min(times):.2f}-{max(times):.2f}); tile {tile}; pointers mod 4096 {pointers}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
