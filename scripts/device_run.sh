#!/usr/bin/env bash
# Everything a GPU machine must show, in one go: the GPU tests, `envcheck check`,
# probe speed against collect_env, envcheck's timer against triton.testing.do_bench,
# and a full `envcheck run`. Runs from a source tree with the machine's own
# python3 (torch, triton, ... already installed); writes at most 8 files to $OUT.
#
#   OUT=some/dir [SKIP_TESTS=1] [RUN_LIMIT_S=480] bash scripts/device_run.sh [`envcheck run` arguments, e.g. --quick]
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
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv; "$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee -a "$log"

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

if [ -z "${SKIP_TESTS:-}" ]; then
  say "GPU tests"
  "$py" -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tee "$out/gpu-tests.log" | tail -n 25 | tee -a "$log"

  say "timer vs triton.testing.do_bench"
  "$py" scripts/verify_timer.py 2>&1 | tee "$out/verify-timer.txt" | tee -a "$log"
fi

say "envcheck run $*"
# Ctrl-C after RUN_LIMIT_S seconds: envcheck then writes the cases finished so far as a partial report.
timeout -s INT "${RUN_LIMIT_S:-480}" "$py" -m envcheck run --format json --out-dir "$out" "$@" 2>&1 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
ls -la "$out" | tee -a "$log"
