#!/usr/bin/env bash
# How fast `envcheck run` is on one GPU, cold and warm, and where the time goes (issue 50), in one call:
#   cold        the full default run on a fresh machine's caches (empty Triton, Inductor and envcheck caches);
#   warm        the same run again, its caches kept (compiled kernels, Inductor's graphs, matmul tiles);
#   crosscheck  `--quick --crosscheck` (its bench's duration is the quick suite's, its cross-check's own);
#   gpu         `pytest -m gpu` (must pass, under 4 minutes), Triton's cache the runs' own;
#   quick       `--quick` alone, with the time left.
# Each run's wall time and its report's phase table (phases.txt in its folder); summary.txt one line a step.
#
#   OUT=some/dir [BUDGET_S=530] [STEPS="cold warm crosscheck gpu quick"] bash tools/evidence/speed.sh
#
# A step the budget cuts short is stopped with SIGTERM (its report, partial, is still written) and said so in
# summary.txt; STEPS="gpu quick" runs what was cut in a call of its own.
# Writes to $OUT: speed.log (everything, each step's exit status and wall time), summary.txt, cold/, warm/,
# crosscheck/, quick/ (each: the report JSON, run.txt, phases.txt), gpu-tests.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
log="$out/speed.log"
budget=${BUDGET_S:-530}
steps=" ${STEPS:-cold warm crosscheck gpu quick} "
# share CAP RESERVE: at most CAP seconds, leaving RESERVE for the steps after this one (10 at least).
share() { local left=$((budget - SECONDS - $2)); [ "$left" -lt "$1" ] && echo $((left > 10 ? left : 10)) || echo "$1"; }
# step SECONDS FILE command...: run it, its output into FILE and the log, its exit status and wall time logged.
step() {
  local limit=$1 file=$2 t0=$SECONDS
  shift 2
  timeout -s TERM "$limit" "$@" 2>&1 | tee "$file" | tee -a "$log"
  status=${PIPESTATUS[0]} wall=$((SECONDS - t0))
  echo "exit status: $status; wall: $wall s (cap $limit s)" | tee -a "$log"
}

# run NAME CAP RESERVE ARGS...: `envcheck run` on GPU 0 into $out/NAME, then its phase table.
run() {
  local name=$1 cap reserve=$3
  cap=$(share "$2" "$reserve")
  shift 3
  say "envcheck run $* ($name)"
  mkdir -p "$out/$name"
  step "$cap" "$out/$name/run.txt" "$py" -m envcheck run --device 0 --format json --out-dir "$out/$name" "$@"
  "$py" - "$out/$name" "$name" "$wall s (cap $cap s)" "$status" <<'PY' 2>&1 | tee "$out/$name/phases.txt" | tee -a "$log"
import glob, os, statistics, sys
from collections import defaultdict
from envcheck import model
from envcheck.analysis import analyse

folder, name, wall, status = sys.argv[1:]
paths = sorted(glob.glob(os.path.join(folder, "*.json")))
if not paths:
    print(f"SUMMARY {name}: no report (exit {status}, wall {wall})")
for path in paths:
    r = model.load(path)
    a = analyse(r)
    line = [f"SUMMARY {name}: wall {wall}, exit {status}, probe {r.environment.probe_s} s"]
    for ba in a.benches:
        b, ph = ba.bench, ba.phases
        line.append(f"bench {b.duration_s} s, {len(b.cases)} cases")
        print(f"{os.path.basename(path)}: {b.device.name}, {len(b.cases)} cases, {len(b.skipped)} skipped, "
              f"{sum(c.failure is not None for c in b.cases)} failed; duration {b.duration_s} s; stop {b.stop}")
        if ph is None:
            continue
        for row in ph.rows:
            print(f"  {row.phase:<16} {row.seconds:8.1f} s {100 * (row.share or 0):5.1f}%")
        print("  by op: " + ", ".join(f"{op} {s:.1f} s" for op, s in ph.by_op))
        print(f"  first calls from a cache: {dict(ph.cache)}; sampling stopped by: {dict(ph.stops)}")
        line.append(" ".join(f"{row.phase} {row.seconds:.1f}" for row in ph.rows if row.seconds >= 0.5))
        line.append(f"cache {dict(ph.cache)}")
        per = defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # cases, first call, settle, sampling
        for c in b.cases:
            k = (c.op, c.impl, "sustained" if any(n.key == "case.sustained" for n in c.notes) else "-")
            per[k][0] += 1
            for i, phase in enumerate(("first_call", "settle", "sampling"), 1):
                per[k][i] += c.phases.get(phase, 0.0)
        print(f"  {'op impl timing':<34} {'cases':>5} {'1st call s':>10} {'settle s':>9} {'sampling s':>10}")
        for (op, impl, how), (n, first, settle, sampling) in sorted(per.items()):
            print(f"  {op + ' ' + impl + ' ' + how:<34} {n:5d} {first:10.1f} {settle:9.1f} {sampling:10.1f}")
        ns = [c.gpu.n for c in b.cases if c.gpu is not None]
        if ns:
            print(f"  GPU-time samples per case: median {statistics.median(ns):.0f}, min {min(ns)}, max {max(ns)}")
        print("  slowest cases (own seconds; phases; cache):")
        for c in sorted(b.cases, key=lambda c: sum(c.phases.values()), reverse=True)[:8]:
            parts = " ".join(f"{k} {v:.2f}" for k, v in c.phases.items())
            print(f"    {c.op} {c.impl} {c.precision} {'x'.join(map(str, c.shape))}: {sum(c.phases.values()):.2f} s "
                  f"({parts}; {c.cache}; {c.kernel or '-'})")
    if a.crosscheck is not None:
        cc = a.crosscheck
        runs = [t.launch.wall_s for t in r.crosscheck.runs] if r.crosscheck else []
        print(f"  cross-check: {r.crosscheck.duration_s if r.crosscheck else None} s; rows {cc.counts}, "
              f"findings {[f.key for f in cc.findings]}, tool seconds {runs}")
        for row in cc.rows:
            if row.ratio is not None:
                print(f"    {row.op} {row.impl} {row.precision} {'x'.join(map(str, row.shape))}: ratio "
                      f"{row.ratio:.4f} ({row.status}, bar {row.bar:.0%})")
        line.append(f"crosscheck {cc.counts} tools {runs} s")
    print("; ".join(line))
PY
  grep -h "^SUMMARY" "$out/$name/phases.txt" >> "$out/summary.txt"
}

: > "$out/summary.txt"
say "machine"
{ nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm --format=csv
  "$py" -c 'import os, torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cpus", os.cpu_count())'
  git log -1 --format='tree %h %s' 2>/dev/null
} 2>&1 | tee -a "$log"
# A fresh machine: envcheck's cache (where its workers point Triton and Inductor) empty unless ENVCHECK_CACHE_DIR
# names one (a second call on the same machine continuing the first's), and neither variable set, so the defaults
# of an earlier call (~/.triton, /tmp/torchinductor_$USER) serve nothing.
export ENVCHECK_CACHE_DIR="${ENVCHECK_CACHE_DIR:-$(mktemp -d)/envcheck}"
unset TRITON_CACHE_DIR TORCHINDUCTOR_CACHE_DIR

want cold && run cold 220 300
want warm && run warm 170 220
want crosscheck && run crosscheck 150 150 --quick --crosscheck
if want gpu; then
  say "pytest -m gpu (Triton's cache: the runs')"
  triton_dir=$(ls -d "$ENVCHECK_CACHE_DIR"/compile/*/triton 2>/dev/null | head -1)
  cap=$(share 240 0)
  TRITON_CACHE_DIR=${triton_dir:-$(mktemp -d)} step "$cap" "$out/gpu-tests.txt" \
    "$py" -m pytest -q -m gpu -p no:cacheprovider -o addopts="" -rfEs --durations=15 tests
  echo "SUMMARY gpu: wall $wall s (cap $cap s), exit $status; $(grep -E '[0-9]+ (passed|failed)' "$out/gpu-tests.txt" \
    | tail -1)" | tee -a "$out/summary.txt"
fi
if want quick; then
  if [ $((budget - SECONDS)) -ge 45 ]; then run quick 60 0 --quick
  else echo "SUMMARY quick: skipped, $((budget - SECONDS)) s left" | tee -a "$out/summary.txt"; fi
fi
say "done"
cat "$out/summary.txt"
du -sh "$ENVCHECK_CACHE_DIR" 2>/dev/null | tee -a "$log" || true
