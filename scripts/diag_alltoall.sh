#!/usr/bin/env bash
# Why envcheck's all_to_all at 4 MiB reads 5-6% more busbw than nccl-tests' CUDA-graph mode on 2 x H200
# (reports/device-logs/2026-11-26_0213Z_2x-h200_node_vs_nccl-tests.md), in one call of about 3 minutes:
#   1. two node runs whose per-GPU part is one small case (`envcheck run --gpus all --quick --ops vector_add
#      --sizes 2^20 --dtypes fp32`): the collective sweep, all_to_all included, with its NCCL log; the first
#      as envcheck runs (NCCL's graph registration left at its default, on), the second with
#      NCCL_GRAPH_REGISTER=0 (registration off, as nccl-tests runs in scripts/device_node.sh);
#   2. nccl-tests' alltoall_perf (built from .nccl-tests/, that target only) at 1, 4 and 16 MiB, -G 100,
#      three runs each way, with scripts/device_node.sh's other NCCL settings:
#        off  NCCL_GRAPH_REGISTER=0, the reference scripts/device_node.sh holds envcheck against;
#        on   NCCL_GRAPH_REGISTER=1 (NCCL's default): NCCL registers the captured calls' buffers.
#      Earlier ways read the same as "off": direct pointers and pinned channel counts
#      (reports/device-logs/2026-11-26_0446Z_2x-h200_diag_alltoall.log), one thread per GPU
#      (..._0602Z_2x-h100_diag_alltoall_threads.log). Both sides call ncclAlltoAll (torch's NCCL log names
#      "AlltoAll" for each call; nccl-tests' alltoall.cu calls it from NCCL 2.28). envcheck's out-of-place
#      all_to_all read like nccl-tests' in-place column at 4 MiB on both machines.
#   3. how NCCL set up point-to-point on each side (NCCL_DEBUG=INFO: "Check P2P Type", "p2p channels",
#      "P2P Chunksize");
#   4. scripts/compare_node.py on each node report against each way's runs.
#
#   OUT=some/dir bash scripts/diag_alltoall.sh      (carry .nccl-tests; writes alltoall.log,
#                                                    node_{default,off}.json, nccl_tests_{off,on}.txt and
#                                                    comparisons.md, the four comparisons, to $OUT)
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
build_nccl_tests "$work/build.log" alltoall_perf

for node in default off; do
  say "node run ($node registration): envcheck run --gpus all --quick, one small per-GPU case, then the node tests"
  extra=(); [ "$node" = off ] && extra=(NCCL_GRAPH_REGISTER=0)
  env "${extra[@]}" timeout -s TERM 200 "$py" -m envcheck run --gpus all --quick --ops vector_add --sizes 2^20 \
    --dtypes fp32 --no-compile --no-jax --format json --out-dir "$work/run_$node" --timeout 190 2>&1 | tail -n 3 \
    | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}" | tee -a "$log"
  report=$(ls "$work/run_$node"/*.json 2>/dev/null | head -n 1)
  [ -n "$report" ] && cp "$report" "$out/node_$node.json"
done
say "envcheck's NCCL set-up of point-to-point (rank 0's log)"
grep -h "Check P2P Type\|p2p channels\|P2P Chunksize\|via P2P\|[Rr]egist" "$work"/run_default/*/collectives/nccl.rank0.log \
  2>/dev/null | sed 's/^[^ ]* //' | sort | uniq -c | head -n 12 | tee -a "$log"

wait "$build_pid"
tail -n 2 "$work/build.log" | tee -a "$log"
export LD_LIBRARY_PATH="$NH/lib:${LD_LIBRARY_PATH:-}"
for way in off on; do
  settings=(NCCL_GRAPH_MIXING_SUPPORT=0 "NCCL_GRAPH_REGISTER=$([ "$way" = on ] && echo 1 || echo 0)" NCCL_P2P_DIRECT_DISABLE=1)
  args=(-b 1M -e 16M -f 4 -g "$ngpu" -w 5 -n 40 -G 100)
  say "nccl-tests alltoall ${args[*]} ($way): ${settings[*]}"
  : > "$out/nccl_tests_$way.txt"
  for _ in 1 2 3; do
    env "${settings[@]}" timeout 60 /tmp/ntb/alltoall_perf "${args[@]}" > "$work/$way.txt" 2>&1
    grep -E "^ +[0-9]+ " "$work/$way.txt" | tee -a "$log"
    cat "$work/$way.txt" >> "$out/nccl_tests_$way.txt"
  done
  say "nccl-tests' NCCL set-up of point-to-point, $way"
  env "${settings[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,REG timeout 60 /tmp/ntb/alltoall_perf "${args[@]}" -b 4M \
    -e 4M 2>&1 | grep "Check P2P Type\|p2p channels\|P2P Chunksize\|via P2P\|[Rr]egist" | sed 's/^[^ ]* //' \
    | sort | uniq -c | head -n 12 | tee -a "$log"
done

say "comparisons (each node run's GPU time against each way's runs)"
for node in default off; do
  [ -f "$out/node_$node.json" ] || continue
  for way in off on; do
    "$py" scripts/compare_node.py --node "$out/node_$node.json" --nccl-tests "$out/nccl_tests_$way.txt" \
      --nccl-tests-graph "$out/nccl_tests_$way.txt" --out "$work/comparison.md" > /dev/null 2>&1
    { echo; echo "# envcheck registration $node, nccl-tests registration $way"; echo; cat "$work/comparison.md"; } \
      >> "$out/comparisons.md"
    echo "node $node registration, nccl-tests registration $way:" | tee -a "$log"
    grep "^| all_to_all" "$work/comparison.md" | head -n 3 | tee -a "$log"
  done
done
say "done"
