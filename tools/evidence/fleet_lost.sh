#!/usr/bin/env bash
# GPU evidence that a fleet never passes a lost rank, on a machine with 2 GPUs (about 2 minutes):
# two nodes simulated on this machine (two torchrun launchers, one GPU each, NCCL), and rank 1 killed
# (SIGKILL) while the collectives across the two nodes run. Expected: rank 0 writes the fleet report,
# names rank 1 as lost in the collectives across nodes, fails its node, exits non-zero, and no
# envcheck process is left. World rank 1 is slowed by envcheck's test hook (ENVCHECK_TEST_SLOW_RANK,
# 0.2 s per collective call) so that the kill lands mid-sweep.
# Runs from a source tree with the machine's own python3; writes to $OUT (3 files):
#   fleet_lost.log (what happened, with exit statuses), fleet_lost.json (the report), fleet_lost.md
#
#   OUT=some/dir bash tools/evidence/fleet_lost.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
work=${WORK:-/tmp/envcheck-fleet-lost}
rm -rf "$work" && mkdir -p "$work/tmp"
log="$out/fleet_lost.log"
: > "$log"
children() { local p; for p in $(pgrep -P "$1"); do echo "$p"; children "$p"; done; }

say "fleet of two simulated nodes (one GPU each); rank 1 killed during the collectives across nodes"
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for g in 0 1; do
  CUDA_VISIBLE_DEVICES=$g TMPDIR="$work/tmp" ENVCHECK_TEST_SLOW_RANK=1:200000 timeout -s TERM 170 \
    "$py" -m torch.distributed.run --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d \
    --rdzv-endpoint=127.0.0.1:$port --rdzv-id=envcheck-lost -m envcheck fleet --ops vector_add --no-compile \
    --sweep-sizes 1M..64M --no-narrow --rank-timeout 90 --world-timeout 40 --join-timeout 15 \
    --out-dir "$work/fleet" > "$work/launcher$g.log" 2>&1 &
  pids+=($!)
done
# Node 1's share of the world sweep has timed its first size: the collectives are under way.
for _ in $(seq 1 600); do
  grep -qs '"event":"result"' "$work"/tmp/envcheck-fleet-r1-*/world/node1/rank1.jsonl && break
  sleep 0.2
done
victim=""
for p in $(children "${pids[1]}"); do
  if tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q -- "-m envcheck fleet" \
     && ! tr '\0' ' ' < "/proc/$p/cmdline" | grep -q "torch.distributed.run"; then victim=$p; break; fi
done
echo "killing fleet rank 1 (pid ${victim:-none found}) at ${SECONDS} s" | tee -a "$log"
[ -n "$victim" ] && kill -9 "$victim"
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
echo "launcher of rank 0: exit status $rc0; launcher of rank 1: exit status $rc1; wall ${SECONDS} s" | tee -a "$log"
grep -vE "^\s*$" "$work/launcher0.log" | grep -E "fleet report|Nodes passing|Ranks reported|Rank 1|take out|Take out|pass|FAIL" \
  | head -n 30 | tee -a "$log"
sleep 5
left=$(ps -eo pid,args | grep -E "envcheck( fleet|\.node)" | grep -v grep || true)
echo "envcheck processes left 5 s after the launchers: ${left:-none}" | tee -a "$log"
report=$(ls "$work"/fleet/*_fleet-2x_*.json 2>/dev/null | head -n 1)
if [ -n "$report" ]; then
  cp "$report" "$out/fleet_lost.json"
  cp "${report%.json}.md" "$out/fleet_lost.md" 2>/dev/null
  "$py" - "$report" <<'EOF' | tee -a "$log"
import json, sys
f = json.load(open(sys.argv[1]))["fleet"]
for r in f["ranks"]:
    print("rank", r["rank"], r["status"], r.get("phase"), r.get("host"), "world rank", r.get("world_rank"))
EOF
else
  echo "no fleet report written" | tee -a "$log"
fi
say "done"
