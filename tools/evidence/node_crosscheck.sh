#!/usr/bin/env bash
# The evidence of a multi-GPU machine for the run's speed and its cross-checks, in one call (about 8 minutes on
# 2 x and 4 x H200):
#   1. SINGLE=1 (the default): `envcheck run --crosscheck` on GPU 0 alone, the full default suite, its headline
#      cases against triton.testing.do_bench_cudagraph in the same run (single.json; its wall time);
#      nccl-tests is built from .nccl-tests/ (a clone of NVIDIA/nccl-tests) meanwhile;
#   2. `envcheck run --gpus all --crosscheck` with NCCL_TESTS_DIR set: the full per-GPU suites on every GPU at once,
#      the node tests, then the cross-checks: do_bench_cudagraph per GPU, a plain torch copy per GPU pair, a plain
#      torch.distributed loop at every size of the sweep, nccl-tests in its three modes (node.json; its wall time);
#   3. tools/evidence/compare_node.py --from-crosscheck: every collective at every size against each nccl-tests mode
#      its counterpart, the copies against a plain torch copy (comparison.md, its last line the verdict).
# Runs from a source tree with the machine's own python3; writes device.log, single.json, node.json, comparison.md
# and work.tgz (nccl-tests' outputs, the rank outputs) to $OUT.    OUT=some/dir bash tools/evidence/node_crosscheck.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
work=${WORK:-/tmp/envcheck-cc}
rm -rf "$work" && mkdir -p "$work"
log="$out/device.log"
say "machine"
{ nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm --format=csv
  "$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "nccl", torch.cuda.nccl.version())'
  nvidia-smi topo -m; } 2>&1 | tee -a "$log"
build_nccl_tests "$work/build.log" all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf broadcast_perf

# timed_run NAME OUT_JSON LIMIT_S ARGS...: envcheck run ARGS into $work/NAME (SIGTERM after LIMIT_S: it then writes
# what finished), its report to $out/OUT_JSON
timed_run() {
  local name=$1 json=$2 limit=$3; shift 3
  say "envcheck run $* (limit $limit s)"
  local t0=$SECONDS
  timeout -s TERM "$limit" "$py" -m envcheck run "$@" --format json --out-dir "$work/$name" 2>&1 \
    | tail -n 40 | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}; wall $((SECONDS - t0)) s" | tee -a "$log"
  local f; f=$(ls "$work/$name"/*.json 2>/dev/null | head -n 1)
  [ -n "$f" ] && cp "$f" "$out/$json"
}
# The call ends at 600 s: the single-GPU run gets SINGLE_S, the node run what is left but CLOSE_S.
[ "${SINGLE:-1}" = 1 ] && CUDA_VISIBLE_DEVICES=0 timed_run single single.json "${SINGLE_S:-240}" --crosscheck
wait "$build_pid"; tail -n 1 "$work/build.log" | tee -a "$log"
export LD_LIBRARY_PATH="$NH/lib:${LD_LIBRARY_PATH:-}"
# NODE_ARGS: more arguments of the node run (--quick: the per-GPU quick suites, where the call cannot hold full ones).
read -r -a node_args <<< "${NODE_ARGS:-}"
NCCL_TESTS_DIR=/tmp/ntb timed_run node node.json $((${BUDGET_S:-585} - SECONDS - ${CLOSE_S:-25})) --gpus all --crosscheck \
  "${node_args[@]}"

say "the reports: phases, cross-checks"
for f in "$out"/single.json "$out"/node.json; do
  [ -f "$f" ] || continue
  "$py" -m envcheck render "$f" --format md --out "$work/md" --force > /dev/null 2>&1
  md="$work/md/$(basename "$f" .json).md"
  sed -n '/^## Cross-checks/,/^## Health/p' "$md" | head -n 150 | tee -a "$log"
  grep -iA 20 "phase" "$md" | head -n 40 | tee -a "$log"
done
if [ -f "$out/node.json" ]; then
  say "compare_node.py --from-crosscheck --torch-copy"
  "$py" tools/evidence/compare_node.py --node "$out/node.json" --from-crosscheck --torch-copy --out "$out/comparison.md" \
    > /dev/null 2>&1
  echo "exit status $?" | tee -a "$log"
  grep -E "^verdict|agree|^not held|off the bar" "$out/comparison.md" | tee -a "$log"
fi
say "packing"
find "$work" -name 'nccl.rank*.log' -size +2M -delete
tar -czf "$out/work.tgz" -C "$work" --exclude=pack . 2>/dev/null
ls -la "$out" | tee -a "$log"
say "done"
