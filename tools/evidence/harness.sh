#!/usr/bin/env bash
# Every child envcheck starts, through the harness, on a GPU machine in one call: the GPU tests of the workers
# (bench, burn, peer copies, Triton probe), check, a quick run of every GPU with its cross-checks, a short burn,
# then a run ended by SIGTERM: its partial report must be written and no process it started may survive.
# Each step is bounded so that the whole fits one 10-minute device call.
#
#   OUT=some/dir [WHEELS=dir] bash tools/evidence/harness.sh
#
# WHEELS: a folder holding a msgspec wheel for this machine's Python (the image has none; nothing outside the
# machine can be reached): installed with pip --no-index first.
# Writes to $OUT: device_harness.log (each step's tail and verdict line), the check, run and burn reports.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
log="$out/device_harness.log"

if [ -n "${WHEELS:-}" ]; then
  say "msgspec from $WHEELS"
  "$py" -m pip install -q --no-index --find-links "$WHEELS" msgspec 2>&1 | tail -3 | tee -a "$log"
fi
"$py" -c 'import msgspec, torch; print("msgspec", msgspec.__version__, "torch", torch.__version__)' 2>&1 | tee -a "$log"

say "the workers' GPU tests"
timeout -s TERM 200 "$py" -m pytest -q -m gpu -p no:cacheprovider -o addopts="" -rfEs tests/test_bench_gpu.py \
  tests/test_burn_gpu.py tests/test_node_gpu.py tests/test_probe_triton.py tests/test_harness.py 2>&1 | tail -12 \
  | tee -a "$log"

say "check"
timeout -s TERM 60 "$py" -m envcheck check --format json --out "$out/check.json" > /dev/null 2>> "$log"
echo "check exit status $?" | tee -a "$log"
"$py" - "$out/check.json" <<'EOF' 2>&1 | tee -a "$log"
import json, sys
r = json.load(open(sys.argv[1]))
s = r["environment"]["sections"]
for k in ("torch_runtime", "triton_runtime"):
    print(k, {a: b.get("value", b.get("reason")) for a, b in s[k].items() if a in ("import_ok", "smoke_ok", "run_ok", "error")})
print("gpus", [g["facts"]["name"]["value"] for g in r["environment"].get("gpus", [])])
EOF

say "run --quick --gpus all --crosscheck"
timeout -s TERM 180 "$py" -m envcheck run --quick --gpus all --crosscheck --format json --out-dir "$out" 2>&1 \
  | tail -6 | tee -a "$log"

say "burn --minutes 0.3 --gpus all"
timeout -s TERM 75 "$py" -m envcheck burn --minutes 0.3 --gpus all --format json --out-dir "$out" 2>&1 | tail -4 \
  | tee -a "$log"

say "run ended by SIGTERM: a partial report, nothing left running"
mkdir -p "$out/sigterm"
"$py" -m envcheck run --format json --out-dir "$out/sigterm" > /dev/null 2>> "$log" &  # a full run: minutes
pid=$!
"$py" - "$pid" "$out/sigterm" <<'EOF' 2>&1 | tee -a "$log"
import glob, json, os, signal, sys, time
import psutil
pid, folder = int(sys.argv[1]), sys.argv[2]
run = psutil.Process(pid)  # not this script's child: its exit status is the shell's to read
deadline = time.monotonic() + 60
try:
    while time.monotonic() < deadline and not any("envcheck.harness.child" in " ".join(c.cmdline())
                                                  for c in run.children(recursive=True)):
        time.sleep(0.2)
    time.sleep(20)  # a few cases measured
    tree = run.children(recursive=True)  # the worker, its compile-ahead children, Inductor's pool
    os.kill(pid, signal.SIGTERM)
except (psutil.NoSuchProcess, ProcessLookupError):
    sys.exit("SIGTERM: FAIL (the run ended before it was signalled)")
try:
    run.wait(timeout=60)
    ended = True
except psutil.TimeoutExpired:
    ended = False
    run.kill()
time.sleep(2)
alive = [p.pid for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
reports = glob.glob(os.path.join(folder, "*.json"))
stop = json.load(open(reports[0]))["benches"][0].get("stop") if reports else None
print("ended within 60 s", ended, "children", len(tree), "left running", alive)
print("report", [os.path.basename(r) for r in reports], "stop", stop)
print("SIGTERM:", "PASS" if ended and not alive and reports and stop and stop.get("cause") == "signal" else "FAIL")
EOF
wait "$pid"
echo "run exit status $? (130 expected)" | tee -a "$log"
gzip -f "$log"
