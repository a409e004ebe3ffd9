#!/usr/bin/env bash
# Why envcheck's all_to_all at 4 MiB reads 5-6% more busbw than nccl-tests' CUDA-graph mode on 2 x H200
# (reports/device-logs/2026-11-26_0213Z_2x-h200_node_vs_nccl-tests.md), in one call of about 3 minutes:
#   1. a node run whose per-GPU part is one small case (`envcheck run --gpus all --quick --ops vector_add
#      --sizes 2^20 --dtypes fp32`): the collective sweep, all_to_all included, with its NCCL log;
#   2. nccl-tests' alltoall_perf (built from .nccl-tests/, that target only) at 1, 4 and 16 MiB, -G 100,
#      three runs each way:
#        envcheck  with the NCCL settings the node comparison uses (scripts/device_node.sh);
#        direct    the same without NCCL_P2P_DIRECT_DISABLE (one process reaches the peer's buffers directly);
#        nchannels the envcheck settings with NCCL_MAX_NCHANNELS / NCCL_MIN_NCHANNELS at the count envcheck's
#                  log names, should the two pick different p2p channel counts;
#   3. how NCCL set up point-to-point on each side (NCCL_DEBUG=INFO: "Check P2P Type", "p2p channels",
#      "P2P Chunksize"): torchrun runs one process per GPU, nccl-tests (built without MPI) one process
#      driving both GPUs;
#   4. scripts/compare_node.py on the node report against the envcheck-settings runs.
#
#   OUT=some/dir bash scripts/diag_alltoall.sh      (carry .nccl-tests; writes alltoall.log, node.json,
#                                                    comparison.md to $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
work=$(mktemp -d)
log="$out/alltoall.log"
say() { printf '\n== %s (%s s)\n' "$*" "$SECONDS" | tee -a "$log"; }
ngpu=$(nvidia-smi -L | wc -l)

say "machine"
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv
  "$py" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } 2>&1 | tee -a "$log"

say "alltoall_perf build (in the background)"
NH=$("$py" -c "import nvidia.nccl as m; print(list(m.__path__)[0])")
mkdir -p /tmp/nx/lib
ln -sfn "$NH/include" /tmp/nx/include
ln -sf "$NH/lib/libnccl.so.2" /tmp/nx/lib/libnccl.so
( timeout 240 make --no-print-directory -C .nccl-tests/src -j16 MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=/tmp/nx \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR=/tmp/ntb os.build /tmp/ntb/alltoall_perf \
    > "$work/build.log" 2>&1; echo "build exit status $?" >> "$work/build.log" ) &
build_pid=$!

say "node run: envcheck run --gpus all --quick, one small per-GPU case, then the node tests"
timeout -s TERM 240 "$py" -m envcheck run --gpus all --quick --ops vector_add --sizes 2^20 --dtypes fp32 \
  --no-compile --no-jax --format json --out-dir "$work/run" --timeout 225 2>&1 | tail -n 8 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
report=$(ls "$work"/run/*.json 2>/dev/null | head -n 1)
[ -n "$report" ] && cp "$report" "$out/node.json"
say "envcheck's NCCL set-up of point-to-point (rank 0's log)"
grep -h "Check P2P Type\|p2p channels\|P2P Chunksize\|via P2P" "$work"/run/*/collectives/nccl.rank0.log 2>/dev/null \
  | sed 's/^[^ ]* //' | sort | uniq -c | head -n 8 | tee -a "$log"
channels=$(grep -ho "[0-9]* p2p channels per peer" "$work"/run/*/collectives/nccl.rank0.log 2>/dev/null | head -n 1 \
  | cut -d' ' -f1)

wait "$build_pid"
tail -n 2 "$work/build.log" | tee -a "$log"
export LD_LIBRARY_PATH="$NH/lib:${LD_LIBRARY_PATH:-}"
args=(-b 1M -e 16M -f 4 -g "$ngpu" -w 5 -n 40 -G 100)
settings=(NCCL_GRAPH_MIXING_SUPPORT=0 NCCL_GRAPH_REGISTER=0 NCCL_P2P_DIRECT_DISABLE=1)
: > "$out/nccl_tests_graph.txt"
for way in envcheck direct nchannels; do
  case $way in
    envcheck) env=("${settings[@]}") ;;
    direct) env=(NCCL_GRAPH_MIXING_SUPPORT=0 NCCL_GRAPH_REGISTER=0) ;;
    nchannels) env=("${settings[@]}" NCCL_MIN_NCHANNELS="${channels:-32}" NCCL_MAX_NCHANNELS="${channels:-32}") ;;
  esac
  say "nccl-tests alltoall -G 100, $way: ${env[*]}"
  for _ in 1 2 3; do
    env "${env[@]}" timeout 60 /tmp/ntb/alltoall_perf "${args[@]}" > "$work/$way.txt" 2>&1
    grep -E "^ +[0-9]+ " "$work/$way.txt" | tee -a "$log"
    [ "$way" = envcheck ] && cat "$work/$way.txt" >> "$out/nccl_tests_graph.txt"
  done
  say "nccl-tests' NCCL set-up of point-to-point, $way"
  env "${env[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P timeout 60 /tmp/ntb/alltoall_perf -b 4M -e 4M -g "$ngpu" \
    -w 5 -n 40 -G 100 2>&1 | grep "Check P2P Type\|p2p channels\|P2P Chunksize\|via P2P" | sed 's/^[^ ]* //' \
    | sort | uniq -c | head -n 8 | tee -a "$log"
done

say "comparison (envcheck's GPU time against the envcheck-settings runs)"
if [ -f "$out/node.json" ]; then
  "$py" scripts/compare_node.py --node "$out/node.json" --nccl-tests "$out/nccl_tests_graph.txt" \
    --nccl-tests-graph "$out/nccl_tests_graph.txt" --out "$out/comparison.md" 2>&1 | tail -n 3 | tee -a "$log"
  grep "all_to_all" "$out/comparison.md" | head -n 3 | tee -a "$log"
fi
say "done"
