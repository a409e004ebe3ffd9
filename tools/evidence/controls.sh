#!/usr/bin/env bash
# The diff's negative and positive controls on one GPU, in one call (about 250-350 s; at most
# BUDGET_S, default 420): three `envcheck run --repeat 5` runs back to back on the same GPU,
#   baseline.json  the memory-bound vector add and relu rows, fp32/fp16/bf16, 2^24..2^27 elements
#   rerun.json     the same again, nothing changed: the negative control
#   control.json   the same with --control vector_add_extra_bytes: envcheck's Triton vector add
#                  also reads a zero buffer of 12% of its elements (4% more bytes, same result):
#                  the positive control, recorded in the report's settings
# then the two diffs rendered by envcheck (negative.md/.json: rerun vs baseline; positive.md/.json:
# control vs baseline) and a summary of the targets in controls.log. Writes 8 files to $OUT.
#
#   OUT=some/dir [BUDGET_S=420] [REPEAT=5] [SIZES=2^24,2^25,2^26,2^27] bash tools/evidence/controls.sh
#
# Targets (issue 17): the negative control calls no row and has at most 5% of its rows' 95%
# intervals excluding 1; the positive control calls at least 90% of the Triton vector add rows
# slower. torch.compile is left out (its compiles would not fit the time); each run's repeats are
# fresh workers, so the Triton kernels compile once per machine and load from the cache after.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
log="$out/controls.log"
budget=${BUDGET_S:-420}
repeat=${REPEAT:-5}
work=$(mktemp -d)
sizes=${SIZES:-2^24,2^25,2^26,2^27}  # SIZES: a smaller set for a smoke test off the GPU
args=(--quick --repeat "$repeat" --ops vector_add,relu --sizes "$sizes" --dtypes fp32,fp16,bf16 --no-compile --no-jax
      --format json)

say "machine"
{ nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  "$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee -a "$log"

run() {  # run NAME SHARES [extra args]: one envcheck run into $out/NAME.json, within 1/SHARES of what is left
  local name=$1 shares=$2
  shift 2
  local cap=$(( (budget - SECONDS - 30) / shares ))
  say "envcheck run ${args[*]} $* -> $name.json (at most $cap s)"
  mkdir -p "$work/$name"
  timeout -s TERM "$cap" "$py" -m envcheck run "${args[@]}" --timeout "$((cap > 30 ? cap - 15 : 15))" \
    --out-dir "$work/$name" "$@" 2>&1 | tail -n 25 | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
  local f
  f=$(ls "$work/$name"/*.json 2>/dev/null | head -n 1)
  [ -n "$f" ] && cp "$f" "$out/$name.json"
}
# Each run gets an equal share of what is left (3 runs, then 2, then 1), diffs reserved 30 s.
run baseline 3
run rerun 2
run control 1 --control vector_add_extra_bytes

for pair in "negative rerun" "positive control"; do
  set -- $pair
  say "envcheck diff baseline.json $2.json -> $1.md, $1.json"
  (cd "$out" && "$py" -m envcheck diff baseline.json "$2.json" --format md --out "$1.md" \
    && "$py" -m envcheck diff baseline.json "$2.json" --format json --out "$1.json") 2>&1 | tail -n 5 | tee -a "$log"
done

say "targets"
"$py" - "$out" <<'PY' 2>&1 | tee -a "$log"
import json, os, sys
out = sys.argv[1]
for name in ("negative", "positive"):
    path = os.path.join(out, f"{name}.json")
    if not os.path.exists(path):
        print(f"{name}: no diff"); continue
    cmp = json.load(open(path))["comparisons"][0]
    rows = [c for c in cmp["cases"] if c["low"] is not None]
    excl = [c for c in rows if c["low"] > 1 or c["high"] < 1]
    called = [c for c in cmp["cases"] if c["verdict"] in ("slower", "faster")]
    print(f"{name}: {cmp['tested']} rows tested ({cmp['correction']}), allowance {cmp['allowance_sources']}; "
          f"{len(excl)} intervals exclude 1 ({100 * len(excl) / max(1, len(rows)):.1f}%); {len(called)} called: "
          + ", ".join(f"{c['op']} {c['impl']} {c['dtype']} {c['shape']} {c['ratio']:.4f} {c['verdict']}" for c in called))
    if name == "positive":
        target = [c for c in cmp["cases"] if c["op"] == "vector_add" and c["impl"] == "triton" and c["ratio"]]
        hit = [c for c in target if c["verdict"] == "slower"]
        print(f"positive: {len(hit)} of {len(target)} Triton vector add rows called slower "
              f"({100 * len(hit) / max(1, len(target)):.0f}%); ratios "
              + ", ".join(f"{c['ratio']:.4f}" for c in target))
        others = [c for c in called if not (c["op"] == "vector_add" and c["impl"] == "triton")]
        print(f"positive: {len(others)} other rows called")
PY
rm -rf "$work"
say "done"
ls -l "$out" | tee -a "$log"
