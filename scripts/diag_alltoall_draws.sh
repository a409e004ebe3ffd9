#!/usr/bin/env bash
# Which of its two paces nccl-tests' all_to_all at 16 and 64 MiB lands in, and what sets it, on 2 x H100, in one
# call of 2-4 minutes. In scripts/device_node.sh its large runs (-b 64M -n 20 -G 5: 64 MiB the first size a
# process times, 100 calls a placement) read the slow pace (about 225 GB/s busbw against 240) out of place in
# 9 of 17 runs (0935Z, 0945Z, 1132Z), while the eager runs of the same calls, where 64 MiB comes after 1-16 MiB,
# read 236-238 each time, and within a slow process the in-place column and 256 MiB read the fast pace.
#   1. while alltoall_perf builds, envcheck's measure() on all_to_all at 16 and 64 MiB, six rounds
#      (scripts/diag_large_collectives.py, one process per GPU; ENVCHECK=0 leaves it out);
#   2. NT_ROUNDS (6) rounds, each of one nccl-tests process per configuration in turn (scripts/device_node.sh's
#      NCCL settings, -N CYCLES (3): cycles of the process, each a graph captured afresh); DRAWS names the
#      configurations (NAME:ARGUMENTS, separated by ";"), by default:
#        eager    -b 1M -e 4G -f 4 -n 20 (device_node.sh's eager run, before its graph runs);
#        small    -b 1M -e 192M -f 4 -n 40 -G 100 (its small range; 16 and 64 MiB after 1 and 4 MiB, 4000
#                 calls a placement);
#        first    -b 64M -e 4G -f 4 -n 20 -G 5 (its large range: 64 MiB first);
#        after16  -b 16M -e 4G -f 4 -n 20 -G 5 (the same, 64 MiB after 16 MiB);
#      each 16 and 64 MiB row in the log as "NAME round R: size time busbw in-place-busbw";
# with nvidia-smi dmon (power, clocks, every second) throughout.
# Evidence (2 x H100): 1257Z with the defaults (217 s); 1302Z with ENVCHECK=0 NT_ROUNDS=4 CYCLES=2 and DRAWS of
# -n 20 -G 5 against -n 20 -G 200 at -b 64M -e 192M and -e 512M -f 4 (the 192M ones lacked -f 4, so nccl-tests
# stepped 1 MiB at a time and the call ran out its 300 s in round 2): reports/device-logs/
# 2026-11-26_1257Z_2x-h100_diag_alltoall_draws.log and 1302Z.
#
#   OUT=some/dir bash scripts/diag_alltoall_draws.sh   (carry .nccl-tests; writes alltoall_draws.log, dmon.txt and
#                                                       nccl_tests.txt to $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
diag_begin alltoall_draws.log

say "alltoall_perf build (in the background)"
build_nccl_tests "$work/build.log" alltoall_perf

if [ "${ENVCHECK:-1}" = 1 ]; then
  say "envcheck's measure() on all_to_all at 16 and 64 MiB (scripts/diag_large_collectives.py)"
  timeout 150 "$py" -m torch.distributed.run --standalone --nproc-per-node "$ngpu" scripts/diag_large_collectives.py \
    --ops all_to_all --mib 16 64 --rounds 6 2>&1 \
    | grep -vE "^(W|I)[0-9]{4} |warnings.warn|^\*+$|OMP_NUM_THREADS" | tee -a "$log"
fi
wait "$build_pid"
tail -n 2 "$work/build.log" | tee -a "$log"
export LD_LIBRARY_PATH="$NH/lib:${LD_LIBRARY_PATH:-}"

draws=${DRAWS:-"eager:-b 1M -e 4G -f 4 -n 20;small:-b 1M -e 192M -f 4 -n 40 -G 100;first:-b 64M -e 4G -f 4 -n 20 -G 5;after16:-b 16M -e 4G -f 4 -n 20 -G 5"}
IFS=';' read -ra configs <<< "$draws"
for r in $(seq "${NT_ROUNDS:-6}"); do
  say "round $r"
  for c in "${configs[@]}"; do
    name=${c%%:*}
    read -ra a <<< "${c#*:}"
    NCCL_GRAPH_MIXING_SUPPORT=0 NCCL_GRAPH_REGISTER=0 NCCL_P2P_DIRECT_DISABLE=1 timeout 120 /tmp/ntb/alltoall_perf \
      "${a[@]}" -g "$ngpu" -w 5 -N "${CYCLES:-3}" > "$work/nt.txt" 2>&1
    echo "== $name round $r $(date -u +%H:%M:%S)" >> "$out/nccl_tests.txt"
    cat "$work/nt.txt" >> "$out/nccl_tests.txt"
    awk -v tag="$name round $r:" '/^ +(16777216|67108864) /{printf "%-20s %9s %9s us %8s GB/s  in place %8s\n", tag, $1, $6, $8, $12}' \
      "$work/nt.txt" | tee -a "$log"
  done
done
kill "$dmon_pid" 2>/dev/null
say "done"
