#!/usr/bin/env bash
# Burn-in evidence in one call on a GPU machine: a list of burns back to back, each judged by today's rules,
# with every rule's margin, and the first healthy burn held against an independent GEMM loop.
#
#   OUT=some/dir [BURNS="2 1:slow_gemm:1 0.5:flip_bit:0 1"] [BURN_TESTS=1] bash tools/evidence/burn.sh
#
# BURNS: one entry a burn, MINUTES[:CONTROL[:GPU]]; an entry with a CONTROL (slow_gemm or flip_bit, see
# `envcheck burn --help`) is a positive control: its GPU must fail with that control's finding and every other
# GPU pass; an entry without one is a healthy burn: every GPU must pass. slow_gemm needs two GPUs or more
# (it is judged against the siblings): on one GPU its entries are skipped.
# Per burn: `envcheck burn --gpus all --format json` into $OUT, its exit status and wall time, then from the
# report alone each GPU's status, findings and every rule's margin (tools/evidence/burn_summary.py), and one
# verdict line per burn ("healthy: PASS", "control flip_bit on GPU 0: CAUGHT"). After the first healthy burn:
# on every GPU at once, with the burn's own dtype and GEMM shape, an independent GEMM loop (plain
# torch.matmul, or torch._scaled_mm for fp8, CUDA-event windows of 1 s after 3 s of warm-up, 15 s) that the
# burn's sustained TFLOP/s must match within 3%. BURN_TESTS=1 (default): the burn's GPU tests first.
# Writes to $OUT: each burn's report JSON and device_burn.log.gz (at most 7 burns: 8 files come back).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
log="$out/device_burn.log"
ngpu=$(nvidia-smi -L | wc -l)

say "machine"
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,power.limit,temperature.gpu --format=csv
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } 2>&1 | tee -a "$log"

if [ "${BURN_TESTS:-1}" = 1 ]; then
  say "the burn's GPU tests (pytest -m gpu tests/test_burn_gpu.py)"
  timeout -s TERM 150 "$py" -m pytest -q -m gpu -p no:cacheprovider -o addopts="" -rfEs tests/test_burn_gpu.py 2>&1 \
    | tail -8 | tee -a "$log"
fi

checked=0
for entry in ${BURNS:-2 1:slow_gemm:1 0.5:flip_bit:0 1}; do
  IFS=: read -r minutes control gpu <<<"$entry"
  if [ "$control" = slow_gemm ] && [ "$ngpu" -lt 2 ]; then
    say "burn $entry skipped: slow_gemm needs two GPUs or more"
    continue
  fi
  args=(--minutes "$minutes" --gpus all --out-dir "$out" --format json)
  [ -n "$control" ] && args+=(--control "$control" --control-gpu "${gpu:-0}")
  say "envcheck burn ${args[*]}"
  before=$(ls "$out"/*_burn.json 2>/dev/null | wc -l)
  t0=$SECONDS
  timeout -s TERM 560 "$py" -m envcheck burn "${args[@]}" 2>&1 | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}; wall time: $((SECONDS - t0)) s" | tee -a "$log"
  report=$(ls -t "$out"/*_burn.json 2>/dev/null | head -1)
  if [ "$(ls "$out"/*_burn.json 2>/dev/null | wc -l)" -le "$before" ]; then
    echo "no report written: burn $entry FAILED" | tee -a "$log"
    continue
  fi
  # Each report gets its entry in its name, so the summary and the file say what the burn was.
  tag=$([ -n "$control" ] && echo "control-$control-gpu${gpu:-0}" || echo healthy)
  mv "$report" "${report%.json}_${tag}.json"
  report="${report%.json}_${tag}.json"
  "$py" tools/evidence/burn_summary.py "$report" ${control:+--control "$control" --control-gpu "${gpu:-0}"} 2>&1 | tee -a "$log"
  if [ -z "$control" ] && [ $checked = 0 ]; then
    checked=1
    say "the healthy burn against an independent GEMM loop on every GPU at once"
    "$py" tools/evidence/burn_summary.py "$report" --independent 2>&1 | tee -a "$log"
  fi
done
say "done"
gzip -9 "$log"
ls -la "$out"
