#!/usr/bin/env bash
# How long a full `envcheck run` takes on one GPU, where the time goes, and whether its numbers still agree
# with triton.testing.do_bench_cudagraph, in one call (under 8 minutes; issue 39):
#   1. `envcheck run` (the full default suite) on GPU 0, with empty Triton and Inductor caches (a fresh
#      machine's first run is the one that counts), its wall time and its report's phase table
#      (where the time went: start-up, ceilings, compiles, checks, settling, sampling; per op; the slowest
#      cases with their spans; which cases were timed sustained and how long their windows were);
#   2. the report's headline cases against do_bench_cudagraph, in a second process on the same GPU
#      (tools/evidence/verify_ops.py --ops: per op the case that moves the most and, for matmul, the largest
#      timed sustained and the largest that held its clock), within 3%;
#   3. what compiling costs on a fresh machine (tools/evidence/compile_times.py: the matmul race one compile
#      at a time and side by side; torch.compile part by part);
#   4. envcheck's timer against do_bench_cudagraph in one process (tools/evidence/verify_timer.py), with the
#      time left.
#
#   OUT=some/dir [BUDGET_S=470] [STEPS="run ops compile timer"] bash tools/evidence/run_speed.sh [`envcheck run` arguments]
#
# STEPS picks steps ("quick" is one more: `envcheck run --quick`, which must stay under a minute). Writes to
# $OUT: speed.log (everything, each step's exit status and wall time), run/<dated>.json,
# phases.txt, verify-ops.txt, compile-times.txt, verify-timer.txt, quick/<dated>.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
log="$out/speed.log"
budget=${BUDGET_S:-470}
steps=" ${STEPS:-run ops compile timer} "
# share CAP RESERVE: at most CAP seconds, leaving RESERVE for the steps after this one.
share() { local left=$((budget - SECONDS - $2)); [ "$left" -lt "$1" ] && echo $((left > 10 ? left : 10)) || echo "$1"; }
# step SECONDS FILE command...: run it, its output into FILE and the log, its exit status and wall time logged
step() {
  local limit=$1 file=$2 t0=$SECONDS
  shift 2
  timeout -s TERM "$limit" "$@" 2>&1 | tee "$out/$file" | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}; wall: $((SECONDS - t0)) s" | tee -a "$log"
}

say "machine"
{ nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm --format=csv
  "$py" -c 'import os, torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cpus", os.cpu_count())'
} 2>&1 | tee -a "$log"
# A fresh machine's first run: no kernel compiled by an earlier call on this machine may serve it.
TRITON_CACHE_DIR=$(mktemp -d) TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) ENVCHECK_CACHE_DIR=$(mktemp -d)
export TRITON_CACHE_DIR TORCHINDUCTOR_CACHE_DIR ENVCHECK_CACHE_DIR

if want run; then
  say "envcheck run (full suite) on GPU 0 $*"
  mkdir -p "$out/run"
  step "$(share 330 130)" run.txt "$py" -m envcheck run --device 0 --format json --out-dir "$out/run" "$@"
  say "the report: where the time went"
  "$py" - "$out/run" <<'PY' 2>&1 | tee "$out/phases.txt" | tee -a "$log"
import glob, os, statistics, sys
from collections import defaultdict
from envcheck import model
from envcheck.analysis import analyse
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    r = model.load(path)
    print(f"{os.path.basename(path)}: probe {r.environment.probe_s} s")
    for ba in analyse(r).benches:
        b, ph = ba.bench, ba.phases
        print(f"{b.device.name}: {len(b.cases)} cases, {len(b.skipped)} skipped, "
              f"{sum(c.failure is not None for c in b.cases)} failed; started {b.started}, duration {b.duration_s} s; "
              f"stop {b.stop}; settings {b.settings}")
        if ph is None:
            print("  no phases recorded")
            continue
        for row in ph.rows:
            print(f"  {row.phase:<16} {row.seconds:8.1f} s {100 * (row.share or 0):5.1f}%")
        print("  by op: " + ", ".join(f"{op} {s:.1f} s" for op, s in ph.by_op))
        per = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])  # cases, first call, settle, sampling, window
        for c in b.cases:
            held = any(n.key == "case.sustained" for n in c.notes)
            k = (c.op, c.impl, "sustained" if held else "-")
            w = b.window_of(c)
            per[k][0] += 1
            per[k][1] += c.phases.get("first_call", 0.0)
            per[k][2] += c.phases.get("settle", 0.0)
            per[k][3] += c.phases.get("sampling", 0.0)
            per[k][4] += (w.t_s[-1] if w is not None and len(w.t_s) else 0.0)
        print(f"  {'op impl timing':<34} {'cases':>5} {'1st call s':>10} {'settle s':>9} {'sampling s':>10} {'NVML window s':>13}")
        for (op, impl, how), (n, first, settle, sampling, window) in sorted(per.items()):
            print(f"  {op + ' ' + impl + ' ' + how:<34} {n:5d} {first:10.1f} {settle:9.1f} {sampling:10.1f} {window:13.1f}")
        ns = [t.n for c in b.cases for t in (c.gpu,) if t is not None]
        if ns:
            print(f"  GPU-time samples per case: median {statistics.median(ns):.0f}, min {min(ns)}, max {max(ns)}")
        print("  slowest cases (own seconds; span in seconds since the worker started):")
        slow = sorted(b.cases, key=lambda c: sum(c.phases.values()), reverse=True)[:15]
        for c in slow:
            parts = " ".join(f"{k} {v:.2f}" for k, v in c.phases.items())
            print(f"    {c.op} {c.impl} {c.precision} {'x'.join(map(str, c.shape))}: {sum(c.phases.values()):.2f} s "
                  f"span {c.span_s} ({parts}; compile_s {c.compile_s})")
PY
fi

if want ops; then
  say "the report's headline cases vs do_bench_cudagraph (tools/evidence/verify_ops.py)"
  step "$(share 120 100)" verify-ops.txt "$py" tools/evidence/verify_ops.py --ops vector_add,relu,softmax,row_sum,matmul \
    "$out"/run/*.json
fi

if want compile; then
  say "compiling on a fresh machine (tools/evidence/compile_times.py)"
  step "$(share 100 60)" compile-times.txt "$py" tools/evidence/compile_times.py
fi

if want quick; then
  say "envcheck run --quick on GPU 0"
  mkdir -p "$out/quick"
  step "$(share 90 60)" quick.txt "$py" -m envcheck run --quick --device 0 --format json --out-dir "$out/quick"
fi

if want timer; then
  say "envcheck's timer vs do_bench_cudagraph in one process (tools/evidence/verify_timer.py)"
  step "$(share 200 0)" verify-timer.txt "$py" tools/evidence/verify_timer.py
fi
say "done"
ls -la "$out" "$out"/run 2>/dev/null | tee -a "$log"
