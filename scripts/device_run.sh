#!/usr/bin/env bash
# Everything a GPU machine must show, in one call: the GPU tests, envcheck's timer against
# triton.testing.do_bench_cudagraph (scripts/verify_timer.py), `envcheck check`, probe speed
# against collect_env, and a full `envcheck run` whose report JSON is checked to load. Runs
# from a source tree with the machine's own python3 (torch, triton, ... installed); writes
# its logs and reports to $OUT.
#
#   OUT=some/dir [SKIP_TESTS=1] [RUN_LIMIT_S=480] bash scripts/device_run.sh [`envcheck run` arguments, e.g. --quick]
#
# RUN_LIMIT_S: the run gets SIGTERM after that long (what a batch scheduler sends): envcheck
# then writes the finished cases as a partial report and exits 130.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
log="$out/device.log"
say() { printf '\n== %s\n' "$*" | tee -a "$log"; }

say "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  "$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee -a "$log"

if [ -z "${SKIP_TESTS:-}" ]; then
  say "GPU tests (pytest -m gpu)"
  "$py" -m pytest -q -m gpu -p no:cacheprovider -o addopts="" -rfEs tests 2>&1 | tee "$out/gpu-tests.log" | tail -n 40 | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"

  say "timer vs triton.testing.do_bench_cudagraph (scripts/verify_timer.py)"
  "$py" scripts/verify_timer.py 2>&1 | tee "$out/verify-timer.txt" | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
fi

say "envcheck check"
# From inside $out, so the disk-space fact is about where reports go, not the source tree.
(cd "$out" && "$py" -m envcheck check --out check.json) 2>&1 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"

say "probe wall time vs python -m torch.utils.collect_env"
"$py" - <<'PY' 2>&1 | tee -a "$log"
import subprocess, sys, time
def wall(cmd, n):
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter(); subprocess.run(cmd, capture_output=True); best = min(best, time.perf_counter() - t)
    return best
p = wall([sys.executable, "-m", "envcheck", "probe", "--format", "json"], 5)
c = wall([sys.executable, "-m", "torch.utils.collect_env"], 2)
print(f"envcheck probe {p:.3f} s (best of 5); collect_env {c:.3f} s (best of 2); ratio {p / c:.2f}")
PY

say "envcheck run $*"
mkdir -p "$out/run"
timeout -s TERM "${RUN_LIMIT_S:-480}" "$py" -m envcheck run --format json --out-dir "$out/run" "$@" 2>&1 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"

say "the run's report: loads, its size, what it holds"
"$py" - "$out/run" <<'PY' 2>&1 | tee -a "$log"
import glob, os, sys
from envcheck import model
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    r = model.load(path)
    for b in r.benches:
        timings = [t for c in b.cases for t in (c.gpu, c.launch) if t is not None]
        failed = [c.key for c in b.cases if c.failure is not None]
        worst = max(b.cases, key=lambda c: (c.accuracy.max_rel_elem or 0) if c.accuracy else 0, default=None)
        print(f"{os.path.basename(path)}: {os.path.getsize(path)} bytes; {b.device.name} ({b.device.uuid}, "
              f"{b.device.pci_bus_id}); {len(b.cases)} cases, {len(b.skipped)} skipped, {len(failed)} failed "
              f"{failed[:5]}; {len(b.ceiling_runs)} ceiling runs; {len(b.windows)} NVML windows; "
              f"samples per timing max {max((t.n for t in timings), default=0)}; stop {b.stop}")
        if worst is not None and worst.accuracy is not None:
            print(f"  largest max_rel_elem: {worst.key} {worst.accuracy}")
        for n in b.notes:
            print(f"  note {n.key} {dict(n.params)}")
PY
ls -la "$out" "$out/run" | tee -a "$log"
