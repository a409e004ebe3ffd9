#!/usr/bin/env bash
# Why all_gather and reduce_scatter at 1-4 GiB move by more than the 2 % bar from run to run on 2 x H100
# (reports/device-logs/2026-11-26_0759Z_2x-h100_node_vs_nccl-tests.md), in one call of about 4 minutes:
#   1. scripts/diag_large_collectives.py (torchrun, one process per GPU): rounds of envcheck's own measure()
#      with fresh buffers, and rounds on one set of buffers, each with the clocks, power and throttle reasons;
#   2. nccl-tests' all_gather_perf and reduce_scatter_perf (built from .nccl-tests/) at 1 and 4 GiB, -G 5,
#      with scripts/device_node.sh's NCCL settings, NCCL_TESTS_RUNS (4) runs each, one op after the other;
#   3. the two again, in that order: a second process of 1, then 2, so that each side is seen in two windows;
# with nvidia-smi dmon (power, clocks, every second) running throughout.
#
#   OUT=some/dir bash scripts/diag_large.sh      (carry .nccl-tests; writes diag_large.log, dmon.txt and
#                                                 nccl_tests.txt to $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
diag_begin diag_large.log

say "all_gather_perf and reduce_scatter_perf build (in the background)"
build_nccl_tests "$work/build.log" all_gather_perf reduce_scatter_perf

diag() {
  say "envcheck's measure() at 1 and 4 GiB, process $1 (scripts/diag_large_collectives.py)"
  timeout 200 "$py" -m torch.distributed.run --standalone --nproc-per-node "$ngpu" scripts/diag_large_collectives.py \
    --rounds 5 2>&1 | grep -vE "^(W|I)[0-9]{4} |warnings.warn|^\*+$|OMP_NUM_THREADS" | tee -a "$log"
}
nccl_tests() {
  say "nccl-tests at 1 and 4 GiB (-b 1G -e 4G -f 4 -w 5 -n 40 -G 5, envcheck's NCCL settings), window $1"
  for t in all_gather reduce_scatter; do
    for _ in $(seq "${NCCL_TESTS_RUNS:-4}"); do
      NCCL_GRAPH_MIXING_SUPPORT=0 NCCL_GRAPH_REGISTER=0 NCCL_P2P_DIRECT_DISABLE=1 timeout 60 /tmp/ntb/${t}_perf \
        -b 1G -e 4G -f 4 -g "$ngpu" -w 5 -n 40 -G 5 > "$work/nt.txt" 2>&1
      echo "== $t window $1 $(date -u +%H:%M:%S)" >> "$out/nccl_tests.txt"
      cat "$work/nt.txt" >> "$out/nccl_tests.txt"
      grep -E "^ +[0-9]+ " "$work/nt.txt" | sed "s/^/$t /" | tee -a "$log"
    done
  done
}
diag 1
wait "$build_pid"
tail -n 2 "$work/build.log" | tee -a "$log"
export LD_LIBRARY_PATH="$NH/lib:${LD_LIBRARY_PATH:-}"
nccl_tests 1
diag 2
nccl_tests 2
kill "$dmon_pid" 2>/dev/null
say "done"
