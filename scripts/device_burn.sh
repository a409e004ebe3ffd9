#!/usr/bin/env bash
# Burn-in evidence in one call on a GPU machine (made for 2 x H100: both GPUs burn at once):
#   1. `envcheck burn --minutes 5 --gpus all`, its wall time (must stay within 6 minutes);
#   2. on each GPU in turn, right after, with the burn's own dtype and GEMM shape: an independent
#      GEMM loop (plain torch.matmul, or torch._scaled_mm for fp8, timed with CUDA events, ~15 s,
#      the median of 1-s windows after a 3-s warm-up), which the burn's sustained TFLOP/s must
#      match within 3%; and the suite's cuBLAS ceiling (envcheck.bench.ceilings: graph replay,
#      the run's timer) at the same shape;
#   3. from the report alone: power against the limit, SM clock over the GEMM phase (min, median,
#      max, fitted change), temperatures, the memory test's coverage (bytes, share of free memory,
#      patterns, passes) and its time, the SDC checks, every verdict.
# Runs from a source tree with the machine's own python3; writes to $OUT: the report JSON, its
# Markdown and HTML, the Markdown's charts as one tar, and device_burn.log (5 files).
#
#   OUT=some/dir [MINUTES=5] [BURN_LIMIT_S=420] [BURN_TESTS=0: skip step 4] bash scripts/device_burn.sh
#
#   4. the burn's GPU tests (tests/test_burn_gpu.py: a 15-second burn of GPU 0, a flipped bit in device memory).
# Expected: about 330 s for the burn (5 min of load plus starting torch and CUDA), about 40 s for step 2
# (both GPUs' loops at once, then each ceiling), about 45 s for step 4: about 420 s in all (limit 540 s).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
log="$out/device_burn.log"
minutes=${MINUTES:-5}
say() { printf '\n== %s (%d s in)\n' "$*" "$SECONDS" | tee -a "$log"; }

say "machine"
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,power.limit,temperature.gpu --format=csv
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } 2>&1 | tee -a "$log"

say "envcheck burn --minutes $minutes --gpus all"
t0=$SECONDS
timeout -s TERM "${BURN_LIMIT_S:-420}" "$py" -m envcheck burn --minutes "$minutes" --gpus all --out-dir "$out" \
  --format json,md,html 2>&1 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}; burn wall time: $((SECONDS - t0)) s (limit: 360 s for 5 minutes)" | tee -a "$log"

say "the report against an independent GEMM loop and the suite's cuBLAS ceiling"
"$py" - "$out" <<'PY' 2>&1 | tee -a "$log"
import glob, os, statistics, sys, time
import torch
from envcheck import model
from envcheck.analysis import analyse

path = sorted(glob.glob(os.path.join(sys.argv[1], "*_burn.json")))[-1]
report = model.load(path)
a = analyse(report).burn
print(f"{os.path.basename(path)}: {os.path.getsize(path)} bytes; verdict {a.verdict}; burn {a.burn.duration_s:.0f} s "
      f"for {a.burn.minutes} min per GPU; xid source {a.burn.xid_source}; new Xids {len(a.burn.new_xids)}")


def independent(dtype: str, n: int, k: int, index: int, seconds: float = 15.0) -> float:
    """A plain GEMM loop, written here and not envcheck's: 1-s windows timed with CUDA events, the
    median after 3 s of warm-up (TFLOP/s)."""
    dev = torch.device("cuda", index)
    torch.cuda.set_device(index)
    a = torch.randn(n, k, device=dev) * 0.5
    b = torch.randn(k, n, device=dev) * 0.5
    if dtype == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev)
        call = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
    else:
        t = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        a, b = a.to(t), b.to(t)
        call = lambda: torch.matmul(a, b)  # noqa: E731
    for _ in range(10):
        call()
    torch.cuda.synchronize()
    rates, start, count = [], time.monotonic(), 10
    while time.monotonic() - start < seconds:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(count):
            call()
        e.record()
        e.synchronize()
        took = s.elapsed_time(e) / 1e3
        if time.monotonic() - start > 3.0:
            rates.append(2 * n * n * k * count / took / 1e12)
        count = max(1, int(count / took))
    return statistics.median(rates)


CEILING = """
import sys
from envcheck.analysis.ceilings import run_rate
from envcheck.bench import ceilings
from envcheck.bench.timer import Timer
from envcheck.model import Settings
precision, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kernel = ceilings.matmul_kernel(precision, (n, n, k), 1)
for got in ceilings.measure(Timer("cuda", Settings()), [kernel]):
    print(run_rate(got) if not isinstance(got, tuple) else "")
    break
"""


def suite_ceiling(dtype: str, n: int, k: int, index: int) -> float | None:
    """The suite's cuBLAS ceiling in a child that sees only GPU ``index`` (as a suite worker does: its
    timer's streams and graphs then live on that GPU)."""
    import subprocess
    precision = "bf16" if dtype == "fp8" else dtype  # the suite has no fp8 matmul: its bf16 is the reference
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(index)}
    done = subprocess.run([sys.executable, "-c", CEILING, precision, str(n), str(k if dtype != "fp8" else n)],
                          capture_output=True, text=True, env=env, timeout=120)
    try:
        return float(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        print(f"  ceiling on GPU {index} failed: {(done.stderr or done.stdout).strip()[-300:]}")
        return None


# Every GPU's independent loop at once, as the burn loaded them (a GPU's sustained rate depends on its
# neighbours' heat and on the shared power and cooling).
from concurrent.futures import ThreadPoolExecutor

jobs = {g.gpu.index: g.rates["gemm"].phase.shape for g in a.gpus if g.rates.get("gemm") and g.rates["gemm"].median}
dtypes = {g.gpu.index: g.rates["gemm"].phase.dtype for g in a.gpus if g.gpu.index in jobs}
with ThreadPoolExecutor(max(1, len(jobs))) as pool:
    futures = {i: pool.submit(independent, dtypes[i], shape[0], shape[2], i) for i, shape in jobs.items()}
    loops = {i: f.result() for i, f in futures.items()}

for g in a.gpus:
    gpu = g.gpu
    name = gpu.device.name if gpu.device else "?"
    print(f"\nGPU {gpu.index} ({name}): status {g.status}; stop {gpu.stop}")
    for f in g.findings:
        print(f"  verdict {f.key} {dict(f.params)} threshold {f.threshold}")
    gr = g.rates.get("gemm")
    if gr is None or gr.median is None:
        continue
    n, _, k = gr.phase.shape
    sustained = gr.median
    indep = loops[gpu.index]
    ceiling = suite_ceiling(gr.phase.dtype, n, k, gpu.index)
    gap = 100 * (sustained - indep) / indep
    wall = [b - x for x, b in zip([gr.phase.started_s, *list(gr.phase.t_s)[:-1]], gr.phase.t_s)]
    duty = statistics.median(d / w for d, w in zip(gr.phase.dt_s, wall) if w > 0)
    print(f"  GEMM share of the phase's wall time (the rest: checksums, compares, syncs): {100 * duty:.1f}%")
    print(f"  GEMM {gr.phase.dtype} {n}x{n}x{k}: sustained {sustained:.1f} TFLOP/s (best interval {gr.best:.1f}, "
          f"{len(gr.rates)} intervals, trend {100 * gr.drift.change if gr.drift else float('nan'):+.1f}%); "
          f"independent loop {indep:.1f} TFLOP/s: {gap:+.2f}% ({'within' if abs(gap) <= 3 else 'OUTSIDE'} 3%)")
    if ceiling:
        print(f"  suite cuBLAS ceiling ({'bf16 at n^3, the suite has no fp8' if gr.phase.dtype == 'fp8' else 'same shape'}): "
              f"{ceiling:.1f} TFLOP/s; sustained is {100 * sustained / ceiling:.1f}% of it")
    bw = g.rates.get("bandwidth")
    if bw is not None and bw.median:
        print(f"  streaming {bw.median:.0f} GB/s (best {bw.best:.0f}) over {bw.phase.shape[0] / 2**30:.1f} GiB")
    print(f"  power max {g.power_max_w} W of {g.power_limit_w} W ({100 * (g.power_share or 0):.1f}%); "
          f"temperature max {g.temperature_max_c} C, memory {g.mem_temperature_max_c} C; "
          f"thermal/HW throttled share {g.throttle_share}")
    tel = gpu.telemetry
    if tel is not None and tel.sm_mhz is not None:
        sm = list(tel.sm_mhz)
        gaps = [b - x for x, b in zip(tel.t_s, list(tel.t_s)[1:])]
        print(f"  telemetry {len(sm)} samples over {tel.t_s[-1]:.0f} s (largest gap {max(gaps, default=0):.2f} s); "
              f"SM clock min {min(sm):.0f} median {statistics.median(sm):.0f} max {max(sm):.0f} MHz; GEMM-phase "
              f"clock trend {100 * g.clock_drift.change if g.clock_drift else float('nan'):+.1f}%")
        step = max(1, len(sm) // 12)
        print("  SM clock over time (s: MHz): " + ", ".join(f"{tel.t_s[i]:.0f}: {sm[i]:.0f}" for i in range(0, len(sm), step)))
    m = gpu.memtest
    if m is not None:
        print(f"  memory test: {m.bytes_tested / 2**30:.1f} GiB = {100 * m.bytes_tested / m.free_bytes:.1f}% of "
              f"{m.free_bytes / 2**30:.1f} GiB free; patterns {', '.join(m.patterns)}; {m.passes} full passes in "
              f"{m.duration_s:.1f} s; {m.error_bits} bit errors in {len(m.errors)} ranges")
    s = gpu.sdc
    if s is not None:
        print(f"  SDC: {s.iterations} iterations, {s.checksums} checksums, {s.full_compares} full compares, "
              f"{s.fp64_checks} x {s.fp64_elements} float64 checks (worst {s.fp64_max_error}), {s.mismatch_count} mismatches")
    for note in gpu.notes:
        print(f"  note {note.key} {dict(note.params)}")
PY

if [ "${BURN_TESTS:-1}" = 1 ]; then
say "the burn's GPU tests (pytest -m gpu tests/test_burn_gpu.py)"
timeout -s TERM 120 "$py" -m pytest -q -m gpu -p no:cacheprovider -o addopts="" -rfEs tests/test_burn_gpu.py 2>&1 | tail -8 | tee -a "$log"
fi

say "charts of the Markdown, as one file"
for d in "$out"/*_burn_charts; do [ -d "$d" ] && tar -C "$out" -czf "$d.tgz" "$(basename "$d")" && rm -rf "$d"; done
ls -la "$out" | tee -a "$log"
say "done"
