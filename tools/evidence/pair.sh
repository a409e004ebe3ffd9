#!/usr/bin/env bash
# Two `envcheck run`s back to back on one GPU, nothing changed between them (a negative control for
# the rows they hold), and `envcheck diff` of the two with the shipped noise floors, in one call
# (at most BUDGET_S, default 580; the first run gets at most half of it, the second what is left).
# With compute-bound rows timed sustained a matmul-only run takes 220-280 s on an H100. The pair the noise floors are
# checked on for a sampler change (tools/evidence/noise_floors.py learns floors from such pairs).
#
#   OUT=some/dir [BUDGET_S=580] bash tools/evidence/pair.sh [`envcheck run` arguments, e.g. --ops matmul]
#
# Writes to $OUT: pair.log (both runs' output, the diff's summary, each step's exit status),
# a.json and b.json (the two reports), diff.md and diff.json (B against A).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
log="$out/pair.log"
budget=${BUDGET_S:-580}
work=$(mktemp -d)

say "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  "$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee -a "$log"

for run in a b; do
  say "envcheck run $run: $*"
  left=$((budget - SECONDS - 20)); [ "$run" = a ] && left=$((left / 2))
  timeout -s TERM "$left" "$py" -m envcheck run --format json --out-dir "$work/$run" "$@" 2>&1 \
    | grep -v "^envcheck run: \[" | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
  report=$(ls "$work/$run"/*.json 2>/dev/null | head -n 1)
  [ -n "$report" ] && cp "$report" "$out/$run.json"
done

say "envcheck diff a.json b.json (the shipped noise floors)"
if [ -f "$out/a.json" ] && [ -f "$out/b.json" ]; then
  "$py" -m envcheck diff "$out/a.json" "$out/b.json" --format md --out "$work/diff.md" > /dev/null 2>&1
  cp "$work"/diff.md/*.md "$out/diff.md" 2>/dev/null || cp "$work/diff.md" "$out/diff.md" 2>/dev/null
  "$py" -m envcheck diff "$out/a.json" "$out/b.json" --format json --out "$out/diff.json" 2>&1 | tee -a "$log"
  echo "diff exit status: ${PIPESTATUS[0]}" | tee -a "$log"
  "$py" -m envcheck diff "$out/a.json" "$out/b.json" 2>&1 | head -n 40 | tee -a "$log"
fi
say "done"
