#!/usr/bin/env bash
# Everything a GPU machine must show, in one call: a full `envcheck run` (its report checked to
# load), the GPU tests, envcheck's timer against triton.testing.do_bench_cudagraph
# (tools/evidence/verify_timer.py), `envcheck check` and probe speed against collect_env. Runs from a
# source tree with the machine's own python3 (torch, triton, ... installed); writes its logs
# and reports to $OUT.
#
#   OUT=some/dir [BUDGET_S=570] [STEPS="run tests timer check"] bash tools/evidence/run.sh [`envcheck run` arguments]
#
# BUDGET_S: the whole script's time (a device call allows 600 s). Each step gets a share and
# at most what is left: the run first (the evidence the report is built from), then the tests,
# the timer check, the checks. A step past its share gets SIGTERM (`timeout` then reports 124),
# as a batch scheduler sends it: a run so stopped writes its finished cases as a partial report.
# STEPS picks steps (e.g. STEPS="tests timer" in one call and STEPS="run check" in another
# when one call cannot hold them all).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
log="$out/device.log"
budget=${BUDGET_S:-570}
steps=" ${STEPS:-run tests timer check} "
# share CAP RESERVE: at most CAP seconds, leaving RESERVE for the steps after this one.
share() { local left=$((budget - SECONDS - $2)); [ "$left" -lt "$1" ] && echo $((left > 10 ? left : 10)) || echo "$1"; }

say "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  "$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee -a "$log"

if want run; then
say "envcheck run $*"
mkdir -p "$out/run"
timeout -s TERM "$(share 260 290)" "$py" -m envcheck run --format json --out-dir "$out/run" "$@" 2>&1 | tee -a "$log"
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
              f"samples per timing max {max((t.n for t in timings), default=0)}; {b.duration_s} s; stop {b.stop}")
        if worst is not None and worst.accuracy is not None:
            print(f"  largest max_rel_elem: {worst.key} {worst.accuracy}")
        for n in b.notes:
            print(f"  note {n.key} {dict(n.params)}")
PY
fi

if want tests; then
  say "GPU tests (pytest -m gpu)"
  timeout -s TERM "$(share 190 110)" "$py" -m pytest -q -m gpu -p no:cacheprovider -o addopts="" -rfEs --continue-on-collection-errors tests 2>&1 \
    | tee "$out/gpu-tests.log" | tail -n 60 | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
fi

if want timer; then
  say "timer vs triton.testing.do_bench_cudagraph (tools/evidence/verify_timer.py)"
  timeout -s TERM "$(share 140 20)" "$py" tools/evidence/verify_timer.py 2>&1 | tee "$out/verify-timer.txt" | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
fi

want check || { say "done"; ls -la "$out" | tee -a "$log"; exit 0; }
say "envcheck check"
# From inside $out, so the disk-space fact is about where reports go, not the source tree.
(cd "$out" && timeout -s TERM "$(share 40 10)" "$py" -m envcheck check --out check.json) 2>&1 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"

say "envcheck snapshot of this GPU machine, read back and replayed (the snapshot schema on real answers)"
snapdir=$(mktemp -d)
(cd "$snapdir" && timeout -s TERM "$(share 60 30)" "$py" -m envcheck snapshot --out snap.json \
  && "$py" -m envcheck check --replay snap.json --format json > replay.json; echo "replay exit status: $?"
  "$py" - "$out/check.json" replay.json <<'PY'
import sys
from envcheck import model
live, replay = (model.load(p) for p in sys.argv[1:3])
same = {c.id for c in live.checks if c.status in ("pass", "warn", "fail")}
differ = [(c.id, c.status, r.status) for c in live.checks for r in replay.checks if c.id == r.id and c.id in same
          and c.status != r.status]
print(f"replayed_from {replay.replayed_from}; created {replay.created}; live {live.verdict}, replay {replay.verdict}; "
      f"{len(replay.environment.gpus)} GPU(s) replayed; checks that differ (live, replay): {differ}")
PY
) 2>&1 | tee -a "$log"
rm -rf "$snapdir"

say "probe wall time vs python -m torch.utils.collect_env"
timeout -s TERM "$(share 30 0)" "$py" - <<'PY' 2>&1 | tee -a "$log"
import subprocess, sys, time
def wall(cmd, n):
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter(); subprocess.run(cmd, capture_output=True); best = min(best, time.perf_counter() - t)
    return best
p = wall([sys.executable, "-m", "envcheck", "probe", "--format", "json"], 3)
c = wall([sys.executable, "-m", "torch.utils.collect_env"], 1)
print(f"envcheck probe {p:.3f} s (best of 3); collect_env {c:.3f} s; ratio {p / c:.2f}")
PY
say "done"
ls -la "$out" "$out"/run 2>/dev/null | tee -a "$log"
