"""What compiling costs a run on a fresh machine: envcheck's matmul race, and torch.compile, part by part.

    python tools/evidence/compile_times.py

Each measurement runs in a fresh process with empty Triton and Inductor caches (a fresh machine's
first run), so nothing one leaves on disk shortens the next:

* the matmul race (bench/kernels/tuning.py) of a problem whose kernels are new (1000^3: Triton
  specialises on sizes divisible by 16, so none of the power-of-two compiles serves it), fp16 and
  IEEE fp32, with its candidates' first calls one at a time (``COMPILE_THREADS`` = 1) and side by
  side (the default): wall seconds of the first call, race included;
* torch.compile of the suite's vector_add and softmax at a few of its compile sizes, one after the
  other as the worker runs them (``torch._dynamo.reset()`` between groups): wall seconds of each
  first call, then TorchDynamo's own metrics (``torch._dynamo.utils.compile_times``: Dynamo's trace,
  AOTAutograd, Inductor's code generation, Triton's compile and the autotuning of its configs), with
  Inductor's compile threads at their default (``compile_threads``) and at 1.

Exit status: 0, or 2 without a CUDA GPU, torch or Triton.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RACE = """
import sys, time, torch
from envcheck.bench import impls
from envcheck.bench.kernels import matmul, tuning
tuning.COMPILE_THREADS = int(sys.argv[1])
shape = (1000, 1000, 1000)
for dtype in ("fp16", "fp32"):
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = impls.make_inputs("matmul", shape, dtype, "cuda", gen)
    out = impls.make_output("matmul", shape, dtype, "cuda")
    with impls.tf32_matmul(dtype):
        t = time.perf_counter()
        matmul.matmul(x["a"], x["b"], out, dtype)
        torch.cuda.synchronize()
    print(f"  matmul race {dtype} 1000^3, compile threads {tuning.COMPILE_THREADS}: "
          f"{time.perf_counter() - t:.2f} s, chose {matmul.tuned_tile(*shape, out.dtype, dtype).label}")
"""

COMPILE = """
import sys, time, torch
import torch._dynamo.utils as du
from envcheck.bench import impls
threads = sys.argv[1]
if threads != "default":
    import torch._inductor.config as ic
    ic.compile_threads = int(threads)
total = time.perf_counter()
for op, shape, dtype in (("vector_add", (1 << 20,), "fp32"), ("vector_add", (1_000_003,), "fp32"),
                         ("vector_add", (1 << 24,), "fp16"), ("softmax", (4096, 1024), "fp32"),
                         ("softmax", (8192, 4096), "fp16")):
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = impls.make_inputs(op, shape, dtype, "cuda", gen)
    fn = impls.compiled_on_sets(op, [x], shape)[0]
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    first = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(3):  # the checked call, warm-up and capture call it again: no recompile may happen
        fn()
    torch.cuda.synchronize()
    print(f"  torch.compile {op} {dtype} {'x'.join(map(str, shape))} (compile threads {threads}): "
          f"first call {first:.2f} s, next three {time.perf_counter() - t:.3f} s; Dynamo: "
          f"{dict(du.counters['stats'])}, recompiles {dict(du.counters['recompiles'])}")
print(f"  all five: {time.perf_counter() - total:.2f} s")
print(du.compile_times(repr="str", aggregate=True))
"""


def fresh(code: str, arg: str) -> int:
    """``code`` in a new process with empty Triton and Inductor caches; its output goes to ours."""
    with tempfile.TemporaryDirectory() as triton_cache, tempfile.TemporaryDirectory() as inductor_cache:
        env = {**os.environ, "TRITON_CACHE_DIR": triton_cache, "TORCHINDUCTOR_CACHE_DIR": inductor_cache,
               "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", code, arg], env=env, timeout=300, check=False)
        print(f"  (process: {time.perf_counter() - t:.1f} s, exit status {done.returncode})", flush=True)
        return done.returncode


def main() -> int:
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        print(f"compile_times: needs torch and Triton: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("compile_times: needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; {os.cpu_count()} CPUs", flush=True)
    print("the matmul race, its candidates compiled one at a time, then side by side:", flush=True)
    for threads in ("1", "8"):
        fresh(RACE, threads)
    print("torch.compile, Inductor's compile threads at their default, then 1:", flush=True)
    for threads in ("default", "1"):
        fresh(COMPILE, threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
