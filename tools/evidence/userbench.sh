#!/usr/bin/env bash
# GPU evidence for `envcheck bench` in one call on 1 GPU: the worked example measured by envcheck,
# its report checked to load and rendered, the same kernels timed independently with
# triton.testing.do_bench_cudagraph in a process of its own (tools/evidence/userbench_do_bench.py, within 3%),
# then envcheck's timer and do_bench_cudagraph on the same callables in one process, with L2 not kept
# cold and cold as `envcheck bench` runs (tools/evidence/verify_timer.py --user, within 3%): the timer told
# apart from two processes or rotating buffers. 141 s on an H200 and on an H100 (2026-11-26; the last
# step 88-89 s of it); the steps' time limits add up to 390 s.
#
#   OUT=some/dir bash tools/evidence/userbench.sh
#
# Writes to $OUT: the report JSON, userbench.log (everything printed, with each step's exit status),
# do_bench.txt (tools/evidence/userbench_do_bench.py's table), verify-timer.txt (tools/evidence/verify_timer.py --user's).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
log="$out/userbench.log"

say "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  "$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee -a "$log"

say "envcheck bench examples/softmax_wsum.py"
timeout -s TERM 150 "$py" -m envcheck bench examples/softmax_wsum.py --format json --out-dir "$out" 2>&1 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
report=$(ls -t "$out"/*.json 2>/dev/null | head -1)

say "the report loads and renders"
timeout 30 "$py" -m envcheck render "$report" --format md --out "$out/rendered" >>"$log" 2>&1 \
  && echo "render: ok" | tee -a "$log" && cat "$out"/rendered/*.md >>"$log" && rm -rf "$out/rendered"

say "do_bench on the same kernels"
timeout -s TERM 60 "$py" tools/evidence/userbench_do_bench.py "$report" 2>&1 | tee "$out/do_bench.txt" | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"

say "envcheck's timer against do_bench_cudagraph in one process, L2 warm and cold (tools/evidence/verify_timer.py --user)"
timeout -s TERM 150 "$py" tools/evidence/verify_timer.py --user examples/softmax_wsum.py 2>&1 \
  | tee "$out/verify-timer.txt" | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
say "done"
