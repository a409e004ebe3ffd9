#!/usr/bin/env bash
# The node and fleet evidence on a multi-GPU machine, in one go (the previous version took 241 s on 2 x H200;
# this one about 5-6 minutes; the fleet step, up to 200 s, is skipped once FLEET_AFTER_S (330) seconds have passed):
#   1. the node GPU tests (tests/test_node_gpu.py: peer copies, the NCCL sweep, graph-timed collectives);
#   2. `envcheck run --gpus all --quick`: the quick per-GPU suite on every GPU at once, then topology,
#      error counters, peer copies and the collective sweep 1 MiB .. 4 GiB (an untimed launch learns
#      NCCL's algorithms with its debug log on; the timed launch runs with it off and records each
#      size's GPU time from CUDA-graph replays and its per-call time from eager calls);
#   3. nccl-tests built from .nccl-tests/ (built while 2 runs) and run on the same GPUs right after,
#      twice: its default eager loop, and its CUDA-graph mode (-G 5) with NCCL's user-buffer registration off
#      (NCCL_GRAPH_REGISTER=0: torch's captured calls run on unregistered caching-allocator buffers; see
#      scripts/compare_node.py and reports/device-logs/2026-11-25_2212Z_2x-h100_nccl-tests_graph_register.txt),
#      the counterpart of envcheck's GPU
#      time (see scripts/compare_node.py for why);
#   4. the comparison at every size: GPU-time busbw within 5 % of nccl-tests -G at every size and 2 %
#      from 64 MiB, per call beside the eager loop; copies against a plain torch copy;
#   5. a fleet of two nodes simulated on this machine: two torchrun launchers, one GPU each.
# Runs from a source tree with the machine's own python3; writes 8 files to $OUT:
#   device_node.log, comparison.md, nccl_tests.txt, nccl_tests_graph.txt, node.json, fleet.json, fleet.log,
#   work.tgz
#
#   OUT=some/dir bash scripts/device_node.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
source scripts/device_env.sh
py=${PYTHON:-python3}
work=${WORK:-/tmp/envcheck-node}
rm -rf "$work" && mkdir -p "$work"
log="$out/device_node.log"
say() { printf '\n== %s (%s s)\n' "$*" "$SECONDS" | tee -a "$log"; }
ngpu=$(nvidia-smi -L | wc -l)

say "machine"
{ nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv; nvidia-smi topo -m;
  "$py" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } 2>&1 | tee -a "$log"

say "nccl-tests build (in the background)"
NH=$("$py" -c "import nvidia.nccl as m; print(list(m.__path__)[0])")
mkdir -p /tmp/nx/lib
ln -sfn "$NH/include" /tmp/nx/include
ln -sf "$NH/lib/libnccl.so.2" /tmp/nx/lib/libnccl.so
( timeout 300 make --no-print-directory -C .nccl-tests -j16 MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=/tmp/nx \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR=/tmp/ntb > "$work/nccl-tests-build.log" 2>&1;
  echo "build exit status $?" >> "$work/nccl-tests-build.log" ) &
build_pid=$!

say "GPU tests of the node workers"
timeout 180 "$py" -m pytest -q -m gpu -p no:cacheprovider tests/test_node_gpu.py 2>&1 | tail -n 15 | tee -a "$log"

say "envcheck run --gpus all --quick: per-GPU quick suites on all $ngpu GPUs at once, then the node tests"
t0=$SECONDS
timeout -s TERM 300 "$py" -m envcheck run --gpus all --quick --format json --out-dir "$work/node" 2>&1 | tail -n 60 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}; wall $((SECONDS - t0)) s" | tee -a "$log"
node_wall=$((SECONDS - t0))
node_json=$(ls "$work"/node/*.json 2>/dev/null | head -n 1)
[ -n "$node_json" ] && cp "$node_json" "$out/node.json"

say "nccl-tests run (-b 1M -e 4G -f 4 -g $ngpu: eager, then CUDA-graph mode -G 5 with NCCL_GRAPH_REGISTER=0)"
wait "$build_pid"
tail -n 3 "$work/nccl-tests-build.log" | tee -a "$log"
: > "$out/nccl_tests.txt"
: > "$out/nccl_tests_graph.txt"
for t in all_reduce all_gather reduce_scatter alltoall broadcast; do
  LD_LIBRARY_PATH="$NH/lib:${LD_LIBRARY_PATH:-}" timeout 60 /tmp/ntb/${t}_perf -b 1M -e 4G -f 4 -g "$ngpu" \
    >> "$out/nccl_tests.txt" 2>&1
  NCCL_GRAPH_REGISTER=0 LD_LIBRARY_PATH="$NH/lib:${LD_LIBRARY_PATH:-}" timeout 60 /tmp/ntb/${t}_perf -b 1M -e 4G -f 4 -g "$ngpu" -G 5 \
    >> "$out/nccl_tests_graph.txt" 2>&1
done
grep -E "Collective test starting| 1048576 | 4294967296 " "$out/nccl_tests.txt" | tee -a "$log"
grep -E "Collective test starting| 1048576 | 4294967296 " "$out/nccl_tests_graph.txt" | tee -a "$log"

say "comparison at every size"
if [ -n "$node_json" ]; then
  "$py" scripts/compare_node.py --node "$node_json" --nccl-tests "$out/nccl_tests.txt" \
    --nccl-tests-graph "$out/nccl_tests_graph.txt" --torch-copy \
    --wall-s "$node_wall" --out "$out/comparison.md" > "$work/compare.out" 2>&1
  echo "exit status: $?" | tee -a "$log"
  grep -E "^\| (all_|reduce_|broadcast)|verdict|agree|no GPU time" "$out/comparison.md" | head -n 50 | tee -a "$log"
else
  echo "no node report: nothing to compare" | tee -a "$log"
fi

if [ "$SECONDS" -gt "${FLEET_AFTER_S:-330}" ]; then
  say "fleet skipped: $SECONDS s used, the call must end well inside 600 s"
else
say "fleet: two nodes simulated on this machine (torchrun --nnodes 2 --nproc-per-node 1, one GPU each)"
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
t0=$SECONDS
for g in 0 1; do
  CUDA_VISIBLE_DEVICES=$g timeout 200 "$py" -m torch.distributed.run --nnodes=2 --nproc-per-node=1 \
    --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$port --rdzv-id=envcheck-device \
    -m envcheck fleet --sweep-sizes 1M..1G --no-compile --out-dir "$work/fleet" > "$work/fleet.launcher$g.log" 2>&1 &
done
wait
echo "fleet wall $((SECONDS - t0)) s" | tee -a "$log"
cat "$work"/fleet.launcher*.log > "$out/fleet.log"
grep -E "^(fleet|  |take out)" "$out/fleet.log" | head -n 40 | tee -a "$log"
fleet_json=$(ls "$work"/fleet/*_fleet-2x_*.json 2>/dev/null | head -n 1)
[ -n "$fleet_json" ] && cp "$fleet_json" "$out/fleet.json"
fi

say "packing the work folder (rank outputs, NCCL logs, torchrun logs)"
# NCCL's COLL lines repeat for every call: the head and tail of each log are enough to read.
find "$work" -name 'nccl.rank*.log' -size +2M -exec sh -c 'for f; do (head -c 1000000 "$f"; echo "[...]"; tail -c 1000000 "$f") > "$f.cut" && mv "$f.cut" "$f"; done' _ {} +
tar -czf "$out/work.tgz" -C "$(dirname "$work")" "$(basename "$work")" 2>/dev/null
ls -la "$out" | tee -a "$log"
say "done"
