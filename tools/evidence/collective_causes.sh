#!/usr/bin/env bash
# Why envcheck's collectives and nccl-tests' differ on this machine, one call (about 5 minutes on 4 x H200):
#   1. tools/evidence/collective_causes.py under torchrun on 2 GPUs and on every GPU: each op at 1 MiB-1 GiB on
#      plain buffers (torch's caching allocator) and on torch's NCCL memory pool (ncclMemAlloc), timed as a
#      torch.distributed loop, as CUDA-graph replays, and (1 MiB) with an event between calls, L2 hot and cold;
#   2. nccl-tests built from .nccl-tests/ (a clone of NVIDIA/nccl-tests) on 2 GPUs and on every GPU, -b 1M -e 1G
#      -f 4 -w 5, in five settings: eager (-n 20), graph (-n 20 -G 10), graph with NCCL_GRAPH_REGISTER=0, the same
#      with NCCL_P2P_DIRECT_DISABLE=1 (the transport of one process per GPU), eager with it; graph runs with
#      NCCL_GRAPH_MIXING_SUPPORT=0 as envcheck's timed sweep (collective_worker.GRAPH_TIMING_ENV);
#   3. NCCL's INIT,REG,P2P lines of one graph run and one torch run at 64 MiB (what registers, which transport).
# Writes causes.log and nccl_tests_causes.txt to $OUT.   OUT=some/dir bash tools/evidence/collective_causes.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
diag_begin causes.log
nt="$out/nccl_tests_causes.txt"; : > "$nt"
bins=(all_gather alltoall broadcast all_reduce reduce_scatter)
build_nccl_tests "$work/build.log" "${bins[@]/%/_perf}"
export NCCL_GRAPH_MIXING_SUPPORT=0 TORCH_FR_BUFFER_SIZE=0 TORCH_NCCL_TRACE_BUFFER_SIZE=0
torch_run() {  # torch_run NGPU
  say "torch on $1 GPUs: plain and NCCL-pool buffers; loop, graph, marks"
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $(($1 - 1))) timeout 240 "$py" -m torch.distributed.run --standalone \
    --nproc-per-node "$1" tools/evidence/collective_causes.py 2>&1 | grep -v "^W1\|OMP_NUM" | tee -a "$log"
}
torch_run 2
[ "$ngpu" -gt 2 ] && torch_run "$ngpu"
say "torch on 2 GPUs, NCCL pool, 64 MiB all_gather, NCCL_DEBUG=INFO (REG, P2P)"
CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG,P2P timeout 120 "$py" -m torch.distributed.run \
  --standalone --nproc-per-node 2 tools/evidence/collective_causes.py --sizes 64M --ops all_gather --kinds ncclmem \
  2>&1 | grep -i "regist\|P2P/\|via\|all_gather " | sort | uniq -c | sort -rn | head -n 25 | tee -a "$log"
wait "$build_pid"; tail -n 2 "$work/build.log" | tee -a "$log"
export LD_LIBRARY_PATH="$NH/lib:${LD_LIBRARY_PATH:-}"
nt_run() {  # nt_run NGPU BIN NAME ENV... -- ARGS...
  local g=$1 b=$2 name=$3; shift 3
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  printf '== %s g=%s %s %s\n' "$b" "$g" "$name" "${envs[*]}" >> "$nt"
  env "${envs[@]}" CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((g - 1))) timeout 90 "/tmp/ntb/${b}_perf" -b 1M -e 1G -f 4 \
    -g "$g" -w 5 "$@" 2>&1 | grep -E "^ +[0-9]+ |Avg bus" >> "$nt"
}
for g in 2 "$ngpu"; do
  [ "$g" = 2 ] && [ "$ngpu" -gt 2 ] && set_bins=(all_gather alltoall broadcast) || set_bins=("${bins[@]}")
  [ "$g" -gt "$ngpu" ] && continue
  say "nccl-tests on $g GPUs: ${set_bins[*]}"
  for b in "${set_bins[@]}"; do
    nt_run "$g" "$b" eager NCCL_GRAPH_MIXING_SUPPORT=1 -- -n 20
    nt_run "$g" "$b" graph X=1 -- -n 20 -G 10
    nt_run "$g" "$b" graph_reg0 NCCL_GRAPH_REGISTER=0 -- -n 20 -G 10
    nt_run "$g" "$b" graph_reg0_nodirect NCCL_GRAPH_REGISTER=0 NCCL_P2P_DIRECT_DISABLE=1 -- -n 20 -G 10
    nt_run "$g" "$b" eager_nodirect NCCL_P2P_DIRECT_DISABLE=1 -- -n 20
  done
  [ "$g" = "$ngpu" ] && break
done
say "nccl-tests graph at 64 MiB on 2 GPUs, NCCL_DEBUG=INFO (REG, P2P)"
CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG,P2P timeout 60 /tmp/ntb/all_gather_perf -b 64M -e 64M \
  -g 2 -w 5 -n 20 -G 10 2>&1 | grep -i "regist\|P2P/\|via\|^ *67108864" | sort | uniq -c | sort -rn | head -n 25 \
  | tee -a "$log"
say "done"
kill "$dmon_pid" 2>/dev/null
gzip -f "$nt" "$out/dmon.txt"
