#!/usr/bin/env bash
# The first users' workloads (issue 22) on one GPU, in one call (BUDGET_S seconds, 580 by default: on an H100
# verify_ops.py alone takes about 160 s, the GPU tests over 100 s with Triton's cache cold): `envcheck run` of
# the new ops (torch, Triton, torch.compile and JAX at every size given), their headline numbers
# checked against triton.testing.do_bench_cudagraph in the same call (tools/evidence/verify_ops.py, within
# 3%; do_bench beside), and the GPU tests of the new kernels with what is left (209 of them: 107 s on an
# H200 with Triton's cache cold, 18 s warm; on a 2-GPU machine they can run on the other GPU meanwhile).
# Runs from a source tree with the machine's own python3.
#
#   OUT=some/dir [BUDGET_S=580] bash tools/evidence/ops.sh
#
# Writes to $OUT (6 files; the Markdown, HTML and charts come from the JSON anywhere, with
# `envcheck render`):
#   ops.log                 everything below, in order, with each step's exit status
#   run/<dated>.json        report 1: conv2d, layer_norm, softmax_fwbw and the six reductions
#   run/<dated>[-1].json    report 2 (the next free name): linear_fwbw, and sum_lead / max_lead
#                           at the second user's 4x512x896
#   verify-ops.txt          tools/evidence/verify_ops.py's table: envcheck vs do_bench_cudagraph (and do_bench)
#                           per headline case
#   verify-timer.txt        tools/evidence/verify_timer.py --workloads: the same cases, both timers in one process
#   gpu-tests.log           pytest -m gpu tests/test_kernels_new_gpu.py
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
mkdir -p "$out/run"
log="$out/ops.log"
budget=${BUDGET_S:-580}
# share CAP RESERVE: at most CAP seconds, leaving RESERVE for the steps after this one.
share() { local left=$((budget - SECONDS - $2)); [ "$left" -lt "$1" ] && echo $((left > 10 ? left : 10)) || echo "$1"; }

say "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  "$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  "$py" -c 'import jax; print("jax", jax.__version__, jax.devices())' ; } 2>&1 | tee -a "$log"

# fp16 throughout (bf16, fp32 and TF32 are the GPU tests' and the interpreter tests'). Each
# headline shape runs hundreds of microseconds:
# layer_norm and softmax_fwbw at 32768x8192, reductions of 64x4096x4096, conv2d 64x64x128x128
# by 64 filters of 7x7 at stride 2 (and 32x64x32x32 by 3x3 at stride 1), linear 4096^3. With
# --sizes, torch.compile and JAX run at every size given (each compiles once per shape).
say "envcheck run: conv2d, layer_norm, reductions, softmax_fwbw"
timeout -s TERM "$(share 120 130)" "$py" -m envcheck run --quick --format json --out-dir "$out/run" \
  --ops conv2d,layer_norm,softmax_fwbw,sum_all,sum_inner,sum_lead,max_all,max_inner,max_lead --dtypes fp16 \
  --sizes 32768x8192,64x4096x4096,64x64x128x128x64x7x2,32x64x32x32x64x3x1 2>&1 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"

# 4096x4096x4096 is too large for the reductions (a skip with the memory it needs, recorded).
say "envcheck run: linear_fwbw, and the reductions over leading axes at 4x512x896"
timeout -s TERM "$(share 90 90)" "$py" -m envcheck run --quick --format json --out-dir "$out/run" \
  --ops linear_fwbw,sum_lead,max_lead --dtypes fp16 --sizes 4096x4096x4096,4x512x896 2>&1 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"

say "headline numbers vs triton.testing.do_bench (tools/evidence/verify_ops.py)"
timeout -s TERM "$(share 200 60)" "$py" tools/evidence/verify_ops.py "$out"/run/*.json 2>&1 | tee "$out/verify-ops.txt" | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"

say "the same cases, envcheck's timer against do_bench_cudagraph in one process (tools/evidence/verify_timer.py --workloads)"
timeout -s TERM "$(share 150 40)" "$py" tools/evidence/verify_timer.py --workloads 2>&1 | tee "$out/verify-timer.txt" | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"

say "GPU tests of the new kernels"
timeout -s TERM "$(share 150 0)" "$py" -m pytest -q -m gpu -p no:cacheprovider -o addopts="" -rfEs \
  tests/test_kernels_new_gpu.py 2>&1 | tee "$out/gpu-tests.log" | tail -n 30 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"

say "done"
ls -la "$out" "$out"/run | tee -a "$log"
