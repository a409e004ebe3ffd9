#!/usr/bin/env bash
# all_to_all's pace at 16 and 64 MiB through long bursts of graph replays, and envcheck's GPU time with and without
# a warm-up before its timed replays (scripts/diag_alltoall_ramp.py, one process per GPU), with nvidia-smi dmon
# (power, clocks, every second) throughout. ARGS passes options to the script.
#
#   OUT=some/dir bash scripts/diag_alltoall_ramp.sh   (writes alltoall_ramp.log and dmon.txt to $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
diag_begin alltoall_ramp.log
say "scripts/diag_alltoall_ramp.py ${ARGS:-}"
# shellcheck disable=SC2086 - ARGS is a list of options
timeout 420 "$py" -m torch.distributed.run --standalone --nproc-per-node "$ngpu" scripts/diag_alltoall_ramp.py \
  ${ARGS:-} 2>&1 | grep -vE "^(W|I)[0-9]{4} |warnings.warn|^\*+$|OMP_NUM_THREADS" | tee -a "$log"
kill "$dmon_pid" 2>/dev/null
say "done"
