#!/usr/bin/env bash
# Why nccl-tests' all_to_all at 64 MiB reads in two modes on 2 x H100 (237-241 GB/s busbw in four of seven runs,
# 225-226 in three: reports/device-logs/2026-11-26_0945Z_2x-h100_node_vs_nccl-tests.md; 227-241 at 0935Z) while
# envcheck's node runs read 241.7-243.0 (0935Z, 0941Z, 0945Z), in one call of about 2 minutes (110-116 s on 2 x H100):
#   1. scripts/diag_large_collectives.py (torchrun, one process per GPU) on all_to_all at 16, 64 and 256 MiB:
#      envcheck's measure() as the node sweep calls it, one fresh set of buffers a round, one set for every
#      round, and on that set one graph replayed in every round beside one captured afresh in each (held and
#      new; the 1106Z call ran without them, and its measure() timed one graph a size; at 1119Z and since it
#      pools 12 graphs, all on the one communicator), each round with the clocks, power and throttle reasons;
#   2. nccl-tests' alltoall_perf (built from .nccl-tests/), scripts/device_node.sh's NCCL settings, each process
#      with -N 3 (three cycles on the same allocation, so a process's own steadiness shows beside the spread
#      between processes):
#        sweep   -b 64M -e 4G -n 20 -G 5, the reference device_node.sh runs (buffers shifted through 4 GiB),
#                NT_SWEEP_RUNS (6) processes;
#        alone   -b 64M -e 64M -n 20 -G 5 (one fixed 64 MiB region), NT_ALONE_RUNS (8) processes;
#   3. step 1 again, in a second process;
# with nvidia-smi dmon (power, clocks, every second) throughout.
#
#   OUT=some/dir bash scripts/diag_alltoall_mid.sh     (carry .nccl-tests; writes alltoall_mid.log, dmon.txt and
#                                                       nccl_tests.txt to $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
diag_begin alltoall_mid.log

say "alltoall_perf build (in the background)"
build_nccl_tests "$work/build.log" alltoall_perf

diag() {
  say "envcheck at 16, 64 and 256 MiB, process $1 (scripts/diag_large_collectives.py)"
  timeout 200 "$py" -m torch.distributed.run --standalone --nproc-per-node "$ngpu" scripts/diag_large_collectives.py \
    --ops all_to_all --mib 16 64 256 --rounds 6 --single --held 2>&1 \
    | grep -vE "^(W|I)[0-9]{4} |warnings.warn|^\*+$|OMP_NUM_THREADS" | tee -a "$log"
}
nccl_tests() {  # nccl_tests NAME RUNS ARGS...
  local name=$1 runs=$2; shift 2
  say "nccl-tests alltoall $name: $* -N 3, $runs processes (envcheck's NCCL settings)"
  for r in $(seq "$runs"); do
    NCCL_GRAPH_MIXING_SUPPORT=0 NCCL_GRAPH_REGISTER=0 NCCL_P2P_DIRECT_DISABLE=1 timeout 60 /tmp/ntb/alltoall_perf \
      "$@" -g "$ngpu" -w 5 -N 3 > "$work/nt.txt" 2>&1
    echo "== $name process $r $(date -u +%H:%M:%S)" >> "$out/nccl_tests.txt"
    cat "$work/nt.txt" >> "$out/nccl_tests.txt"
    grep -E "^ +67108864 " "$work/nt.txt" | sed "s/^/$name process $r /" | tee -a "$log"
  done
}
diag 1
wait "$build_pid"
tail -n 2 "$work/build.log" | tee -a "$log"
export LD_LIBRARY_PATH="$NH/lib:${LD_LIBRARY_PATH:-}"
nccl_tests sweep "${NT_SWEEP_RUNS:-6}" -b 64M -e 4G -f 4 -n 20 -G 5
nccl_tests alone "${NT_ALONE_RUNS:-8}" -b 64M -e 64M -n 20 -G 5
diag 2
kill "$dmon_pid" 2>/dev/null
say "done"
