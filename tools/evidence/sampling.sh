#!/usr/bin/env bash
# The sampler's evidence on one GPU, in one call (about 6 minutes at most): how a group's
# implementations are sampled (each settled, then in a window of its own: envcheck/bench/sampling.py)
# checked against triton.testing.do_bench_cudagraph where sampling them in turns went wrong.
#   1. tools/evidence/conv_timer.py: cuDNN's and Triton's conv2d sampled in turns in one window (the
#      former path) and by the worker's path, each against do_bench_cudagraph;
#   2. tools/evidence/verify_timer.py (the suite's rows, 1%) and --workloads (3%): the worker's path against
#      do_bench_cudagraph in one process;
#   3. envcheck run of conv2d at its headline size and tools/evidence/verify_ops.py on the report (two processes).
#
#   OUT=some/dir bash tools/evidence/sampling.sh
#
# Writes to $OUT: sampling.log (everything, each step's exit status), conv-timer.txt, verify-timer.txt,
# verify-timer-workloads.txt, verify-ops.txt, run/<dated>.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
mkdir -p "$out/run"
log="$out/sampling.log"
step() {  # step SECONDS FILE command...: run it, its output into FILE and the log, its exit status logged
  local limit=$1 file=$2
  shift 2
  timeout -s TERM "$limit" "$@" 2>&1 | tee "$out/$file" | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
}

say "machine"
{ nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv
  "$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee -a "$log"
say "conv2d sampled in turns and by the worker's path (tools/evidence/conv_timer.py)"
step 80 conv-timer.txt "$py" tools/evidence/conv_timer.py
say "the worker's path against do_bench_cudagraph, the suite's rows (tools/evidence/verify_timer.py)"
step 160 verify-timer.txt "$py" tools/evidence/verify_timer.py
say "the same, the workloads' headline rows (tools/evidence/verify_timer.py --workloads)"
step 130 verify-timer-workloads.txt "$py" tools/evidence/verify_timer.py --workloads
say "envcheck run of conv2d, then tools/evidence/verify_ops.py on its report"
timeout -s TERM 60 "$py" -m envcheck run --quick --format json --out-dir "$out/run" --ops conv2d --dtypes fp16 \
  --sizes 64x64x128x128x64x7x2 --no-jax --no-compile 2>&1 | tail -n 20 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
step 40 verify-ops.txt "$py" tools/evidence/verify_ops.py "$out"/run/*.json
say "done"
