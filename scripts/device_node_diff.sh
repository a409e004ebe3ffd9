#!/usr/bin/env bash
# Two fresh node runs diffed on a multi-GPU machine (2 GPUs or more), in one go: about 4 minutes on
# 2 x H200 (each run: a short per-GPU suite, then topology, error counters, peer copies, host links
# and the collective sweep 1 MiB .. 4 GiB; then `envcheck diff` of the two, which is CPU work).
# Back to back on one machine with nothing changed, the pair is a negative control: a row called
# slower or faster here is run-to-run noise the intervals did not cover.
# Needs: the machine's own python3 with torch (CUDA, NCCL), nvidia-smi, 2 GPUs or more. Runs from a
# source tree; writes 5 files to $OUT:
#   node_diff.log, node_a.json, node_b.json, node_diff.md, node_diff.json
#
#   OUT=some/dir bash scripts/device_node_diff.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
source scripts/device_env.sh
py=${PYTHON:-python3}
work=${WORK:-/tmp/envcheck-node-diff}
rm -rf "$work" && mkdir -p "$work"
log="$out/node_diff.log"
say() { printf '\n== %s (%s s)\n' "$*" "$SECONDS" | tee -a "$log"; }

say "machine"
{ nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv; nvidia-smi topo -m; } 2>&1 | tee -a "$log"

for run in a b; do
  say "node run $run: envcheck run --gpus all --quick --ops vector_add --no-compile"
  t0=$SECONDS
  timeout -s TERM 280 "$py" -m envcheck run --gpus all --quick --ops vector_add --no-compile --format json \
    --out-dir "$work/$run" 2>&1 | tail -n 25 | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}; wall $((SECONDS - t0)) s" | tee -a "$log"
  json=$(ls "$work/$run"/*.json 2>/dev/null | head -n 1)
  [ -n "$json" ] && cp "$json" "$out/node_$run.json"
done

say "envcheck diff node_a.json node_b.json (Markdown, JSON; --fail-on-regression 10 on the JSON)"
if [ -f "$out/node_a.json" ] && [ -f "$out/node_b.json" ]; then
  "$py" -m envcheck diff "$out/node_a.json" "$out/node_b.json" --format md --out "$out/node_diff.md" 2>&1 | tee -a "$log"
  "$py" -m envcheck diff "$out/node_a.json" "$out/node_b.json" --format json --fail-on-regression 10 \
    --out "$out/node_diff.json" 2>&1 | tee -a "$log"
  echo "diff --fail-on-regression 10 exit status: ${PIPESTATUS[0]}" | tee -a "$log"
  "$py" -m envcheck diff "$out/node_a.json" "$out/node_b.json" 2>&1 | sed -n '/Node tests/,$p' | head -n 40 | tee -a "$log"
else
  echo "a node run wrote no report: nothing to diff" | tee -a "$log"
fi
ls -la "$out" | tee -a "$log"
say "done"
