#!/usr/bin/env bash
# The node evidence on a multi-GPU machine, in one call of 8-9 minutes (456-563 s on 2 x H100, 2026-11-26 0935Z-1132Z;
# 489 s with NODE_ONLY=1 at 1308Z, 502 s with the warm-up and B_BEFORE_S=450 at 1456Z; on 4 x H100 406 s at 1522Z
# with B_BEFORE_S=0 NCCL_TESTS_RUNS=2 NCCL_TESTS_LARGE_RUNS=3; 452 s at 1722Z with twelve communicators and
# B_BEFORE_S=430, B skipped at 446 s):
#   1. with NODE_GPU_TESTS=1 (about a minute more), the node GPU tests (tests/test_node_gpu.py: peer copies,
#      the NCCL sweep, graph-timed collectives);
#   2. node run A: `envcheck run --gpus all --quick`: the quick per-GPU suite on every GPU at once, then
#      topology, error counters, peer copies and the collective sweep 1 MiB .. 4 GiB (an untimed launch
#      learns NCCL's algorithms with its debug log on; the timed launch records each size's GPU time from
#      CUDA-graph replays and its per-call time from eager calls);
#   3. nccl-tests built from .nccl-tests/ (built while A runs), run on the same GPUs right after A with
#      -w 5, per collective:
#        eager            its default loop (-n 20): the counterpart of envcheck's per-call time (no bar);
#        graph            CUDA-graph mode, with the NCCL settings envcheck's timed sweep runs with: 1-64 MiB
#                         with -n 40 -G 100, run up to 192 MiB so that its buffers shift through more than L2
#                         holds, NCCL_TESTS_RUNS (3) times of NCCL_TESTS_CYCLES (3) cycles; 256 MiB-4 GiB with
#                         -n 20 -G 5, NCCL_TESTS_LARGE_RUNS (7) times, a fresh allocation each (see below): the
#                         reference for envcheck's GPU time. NCCL_GRAPH_MIXING_SUPPORT=0 (envcheck never has
#                         eager calls in flight during a replay; see GRAPH_TIMING_ENV in
#                         envcheck/node/collective_worker.py). NCCL_GRAPH_REGISTER=0: torch's captured calls
#                         run on caching-allocator buffers NCCL does not register
#                         (evidence/device-logs/2026-11-25_2212Z_2x-h100_nccl-tests_graph_register.txt.gz).
#                         NCCL_P2P_DIRECT_DISABLE=1: torch runs one process per GPU, nccl-tests (built without
#                         MPI) drives every GPU from one, where NCCL reaches the peer's buffers directly
#                         ("P2P/direct pointer") unless told not to; across processes it goes through its
#                         staging buffers ("P2P/CUMEM"), which this gives one process too;
#        graph_defaults   with GRAPH_DEFAULTS=1, once with NCCL's graph-mixing support left on, compared too
#                         (comparison_defaults.md);
#      NCCL's transport lines (NCCL_DEBUG=INFO at 1 MiB, direct access on and off); with DIAG=1,
#      tools/evidence/graph_calls.py with each of envcheck's two graph settings alone (graph_calls.txt);
#   4. node run B, the same as A, right after nccl-tests (skipped past B_BEFORE_S, 420 s unless given: at 0945Z A took 179 s and
#      nccl-tests 263, and B was skipped; at 1132Z 146 and 250, and B ran, 563 s in all); with NODE_ONLY=1 each
#      node run's per-GPU part is one small case, as with PAIR_ONLY, so that B fits beside nccl-tests' cycles;
#   5. the comparisons at every size (tools/evidence/compare_node.py): A and B against nccl-tests (GPU-time busbw
#      within 5 % at every size and 2 % from 64 MiB), copies against a plain torch copy;
#   6. `envcheck diff A B`: two back-to-back node runs, nothing changed, a negative control for node rows;
#   7. with L2_HOT=1, nccl-tests' alltoall and all_reduce at 1, 4 and 16 MiB each run alone (-b S -e S), so
#      that it reuses one set of buffers, L2 hot (nccl_tests_l2_hot.txt in nccl_tests.tgz, and the log);
#   8. with PAIR_ONLY=1, only A and B, each with one small per-GPU case, and the diff (about 2 minutes on two
#      GPUs): a negative control for node rows, out of sample for the node floors shipped before it ran. It
#      leaves seven files in $OUT, and a lent machine brings back eight a call: for two pairs in one call, give
#      each its own OUT and pack all but one pair's files into a tgz (at 1730Z the second pair's came back short);
#   9. with FLEET=1, a fleet of two nodes simulated on this machine (two torchrun launchers, one GPU each;
#      up to 200 s more; its reports go into work.tgz).
# Runs from a source tree with the machine's own python3; writes 8 files to $OUT:
#   device_node.log, comparison.md, node.json (A), node_b.json, node_diff.md, node_diff.json,
#   nccl_tests.tgz (nccl-tests' outputs, the transport lines, comparison_b.md, and graph_calls.txt and
#   comparison_defaults.md where asked for),
#   work.tgz (rank outputs, NCCL logs, torchrun logs)
#
#   OUT=some/dir bash tools/evidence/node.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
work=${WORK:-/tmp/envcheck-node}
rm -rf "$work" && mkdir -p "$work/nccl_tests"
nt="$work/nccl_tests"
log="$out/device_node.log"
ngpu=$(nvidia-smi -L | wc -l)

say "machine"
{ nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv; nvidia-smi topo -m;
  "$py" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } 2>&1 | tee -a "$log"

pair_only=${PAIR_ONLY:-0}
if [ "$pair_only" != 1 ]; then
say "nccl-tests build (in the background)"
nccl_home
( timeout 300 make --no-print-directory -C .nccl-tests -j16 MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=/tmp/nx \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR=/tmp/ntb > "$work/nccl-tests-build.log" 2>&1;
  echo "build exit status $?" >> "$work/nccl-tests-build.log" ) &
build_pid=$!
fi

if [ "${NODE_GPU_TESTS:-0}" = 1 ]; then
  say "GPU tests of the node workers"
  timeout 180 "$py" -m pytest -q -m gpu -p no:cacheprovider tests/test_node_gpu.py 2>&1 | tail -n 15 | tee -a "$log"
fi

# PAIR_ONLY=1 or NODE_ONLY=1: each node run's per-GPU part is one small case (the node tests are all of it).
node_args=(); [ "$pair_only" = 1 ] || [ "${NODE_ONLY:-0}" = 1 ] && node_args=(--ops vector_add --sizes 2^20 --dtypes fp32 --no-compile --no-jax)
# FULL=1: the default (full) per-GPU suite instead of --quick; RUN_ARGS: more `envcheck run` arguments (--crosscheck).
quick=(--quick); [ "${FULL:-0}" = 1 ] && quick=()
read -r -a run_args <<< "${RUN_ARGS:-}"
node_run() {  # node_run NAME: envcheck run --gpus all [--quick] into $work/NAME, the report copied to $out
  say "node run $1: envcheck run --gpus all ${quick[*]} ${run_args[*]} (per-GPU suites on all $ngpu GPUs at once, then the node tests)"
  local t0=$SECONDS
  timeout -s TERM "${RUN_TIMEOUT_S:-280}" "$py" -m envcheck run --gpus all "${quick[@]}" "${node_args[@]}" "${run_args[@]}" \
    --format json --out-dir "$work/$1" 2>&1 \
    | tail -n 60 | tee -a "$log"
  echo "exit status: ${PIPESTATUS[0]}; wall $((SECONDS - t0)) s" | tee -a "$log"
  echo $((SECONDS - t0)) > "$work/$1.wall"
  local json
  json=$(ls "$work/$1"/*.json 2>/dev/null | head -n 1)
  [ -n "$json" ] && cp "$json" "$out/$2"
}
node_run a node.json
if [ "$pair_only" != 1 ]; then

say "nccl-tests (-b 1M -e 4G -f 4 -g $ngpu -w 5): eager -n 20; -n 40 -G 100 to 64 MiB (${NCCL_TESTS_RUNS:-3} runs of ${NCCL_TESTS_CYCLES:-3} cycles), -n 20 -G 5 from 256 MiB (${NCCL_TESTS_LARGE_RUNS:-7} runs), envcheck's NCCL settings"
wait "$build_pid"
tail -n 3 "$work/nccl-tests-build.log" | tee -a "$log"
: > "$nt/nccl_tests_eager.txt"; : > "$nt/nccl_tests_graph.txt"
export LD_LIBRARY_PATH="$NH/lib:${LD_LIBRARY_PATH:-}"
args=(-b 1M -e 4G -f 4 -g "$ngpu" -w 5 -n 20)
# In -G mode nccl-tests' clock runs from the first launch of a freshly instantiated graph to the end of the
# last (its src/common.cu): the first launch's upload and the final synchronisation are shared by -n x -G
# calls. Below 64 MiB, 40 x 5 calls of ~12 us make that share a few us a call, so small sizes get -G 100.
# nccl-tests shifts its buffers through its largest size (-e) at every iteration (startColl in src/common.cu),
# one shift per iteration of the graph (-n): with -e 192M (sizes 1-64 MiB in buffers of 192 MiB, over 3x L2 on
# an H100 or H200) and 40 iterations, each size to 64 MiB meets buffers L2 does not hold, as in its default
# 1M..4G sweep and as envcheck keeps L2 cold (with -e 16M a 1-4 MiB call found part of its buffers in L2 and
# 16 MiB all of them; with -n 10 a 1 MiB all_reduce read 9% faster, 2026-11-26 0935Z). Its sizes stop at 64 MiB
# (-f 4); the large runs give the rest.
# 64 MiB belongs to the small range. Timed over 100 calls a graph's launches (-n 20 -G 5, 14 ms at 64 MiB),
# all_to_all read 223.9-232.0 GB/s busbw out of place in 14 of 42 cycles and 234.9-241.2 in the rest; over 4000
# (-n 40 -G 100, or -n 20 -G 200) 241.3-243.7 in all 21 (2 x H100, evidence/device-logs/
# 2026-11-26_1257Z_2x-h100_diag_alltoall_draws.log and 1302Z). The long loop
# settles nccl-tests' pace. envcheck's GPU time fell between the two paces in 3 of 8 node runs at 1308Z-1326Z;
# with 50 ms of untimed replays before each capture's timed ones (collective_bench.GRAPH_WARM_US), in 1 of 6 at
# 1458Z-1511Z, and the node page flags such a size (README).
# Each small run times NCCL_TESTS_CYCLES (3) cycles (-N), a graph captured afresh in each: all_to_all at 16 MiB
# read 155-166 from one cycle to the next there, so the median is of 9 draws, not 3.
small=(-b 1M -e 192M -f 4 -g "$ngpu" -w 5 -n 40 -G 100 -N "${NCCL_TESTS_CYCLES:-3}")
large=(-b 256M -e 4G -f 4 -g "$ngpu" -w 5 -n 20 -G 5)
# Where a buffer lands moves all_gather and reduce_scatter at 1-4 GiB by up to 14% on 2 x H100, while one
# allocation holds within 1% (evidence/device-logs/2026-11-26_0924Z_2x-h100_diag_large.log.gz): each nccl-tests
# process allocates once, so a run of the large sizes is one allocation's draw, as envcheck spreads its large
# sizes over collective_bench.ALLOCATIONS (12). Each process is also one communicator's draw: which communicator
# a call goes through moved all_to_all 64 MiB by up to 8% (evidence/device-logs/
# 2026-11-26_1125Z_2x-h100_diag_communicators.log), and envcheck captures its graphs on
# collective_bench.COMMUNICATORS (12, one capture each) in turn. The large sizes are run NCCL_TESTS_LARGE_RUNS
# times (7), the small ones NCCL_TESTS_RUNS times (3) of NCCL_TESTS_CYCLES cycles; compare_node.py holds envcheck
# against the median of every run's and cycle's row and shows their spread.
for t in all_reduce all_gather reduce_scatter alltoall broadcast; do
  timeout 90 /tmp/ntb/${t}_perf "${args[@]}" >> "$nt/nccl_tests_eager.txt" 2>&1
  for range in small large; do
    declare -n r=$range
    runs=${NCCL_TESTS_RUNS:-3}; [ "$range" = large ] && runs=${NCCL_TESTS_LARGE_RUNS:-7}
    for _ in $(seq "$runs"); do
      NCCL_GRAPH_MIXING_SUPPORT=0 NCCL_GRAPH_REGISTER=0 NCCL_P2P_DIRECT_DISABLE=${P2P_DIRECT_DISABLE:-1} timeout 90 \
        /tmp/ntb/${t}_perf "${r[@]}" >> "$nt/nccl_tests_graph.txt" 2>&1
    done
    [ "${GRAPH_DEFAULTS:-0}" = 1 ] && NCCL_GRAPH_REGISTER=0 NCCL_P2P_DIRECT_DISABLE=1 timeout 90 /tmp/ntb/${t}_perf \
      "${r[@]}" >> "$nt/nccl_tests_graph_defaults.txt" 2>&1
    # REGISTERED=1: -G with NCCL's registration on (its default), the counterpart of envcheck's GPU time on buffers
    # from NCCL's allocator (collective_bench._registered), as many runs.
    if [ "${REGISTERED:-0}" = 1 ]; then
      for _ in $(seq "$runs"); do
        NCCL_GRAPH_MIXING_SUPPORT=0 timeout 90 /tmp/ntb/${t}_perf "${r[@]}" >> "$nt/nccl_tests_registered.txt" 2>&1
      done
    fi
    unset -n r
  done
done
for way in direct_on direct_off; do
  extra=(); [ "$way" = direct_off ] && extra=(env NCCL_P2P_DIRECT_DISABLE=1)
  echo "== all_gather 1 MiB, NCCL_DEBUG=INFO, $way" >> "$nt/nccl_transport.txt"
  "${extra[@]}" env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P timeout 60 /tmp/ntb/all_gather_perf -b 1M -e 1M -g "$ngpu" \
    -w 1 -n 1 2>&1 | grep -E "via P2P|NCCL version" | sort | uniq -c | head -n 8 >> "$nt/nccl_transport.txt"
done
cat "$nt/nccl_transport.txt" | tee -a "$log"
grep -E "Collective test starting| 1048576 | 4294967296 " "$nt/nccl_tests_graph.txt" | tee -a "$log"

if [ "${DIAG:-0}" = 1 ]; then
  say "calls per graph against GPU time per call, with each of envcheck's two graph settings alone (tools/evidence/graph_calls.py)"
  for v in NCCL_GRAPH_MIXING_SUPPORT=0 TORCH_FR_BUFFER_SIZE=0; do
    echo "=== only $v" >> "$nt/graph_calls.txt"
    env "$v" timeout 100 "$py" -m torch.distributed.run --standalone --nproc-per-node "$ngpu" tools/evidence/graph_calls.py 2>&1 \
      | grep -E "^(NVIDIA|all_reduce|broadcast)" >> "$nt/graph_calls.txt"
  done
  cat "$nt/graph_calls.txt" | tee -a "$log"
fi

if [ "${L2_HOT:-0}" = 1 ]; then
  # nccl-tests shifts its buffers through its largest size at every iteration (src/common.cu's startColl):
  # with -e 4G every call meets buffers L2 does not hold. Run alone at one size (-b S -e S), it uses one set
  # of buffers, as envcheck did before it kept L2 cold for collectives too.
  say "nccl-tests at one size each (-b S -e S: one set of buffers, L2 hot), -G 100, envcheck's NCCL settings"
  for t in alltoall all_reduce; do
    for s in 1M 4M 16M; do
      NCCL_GRAPH_MIXING_SUPPORT=0 NCCL_GRAPH_REGISTER=0 NCCL_P2P_DIRECT_DISABLE=1 timeout 60 /tmp/ntb/${t}_perf \
        -b "$s" -e "$s" -g "$ngpu" -w 5 -n 40 -G 100 >> "$nt/nccl_tests_l2_hot.txt" 2>&1
    done
  done
  grep -E "Collective test starting|^ +[0-9]+ " "$nt/nccl_tests_l2_hot.txt" | tee -a "$log"
fi

fi  # pair_only

# A lent machine's call ends at 600 s: run B only where it can finish in time (about 110 s, then the
# comparisons and the diff); otherwise A's evidence comes back complete without it.
if [ "$SECONDS" -lt "${B_BEFORE_S:-420}" ]; then
  node_run b node_b.json
else
  say "node run B skipped: $SECONDS s used, the call must end well inside 600 s"
fi

if [ "$pair_only" != 1 ]; then
say "comparisons at every size (A and B against the median of nccl-tests' -G runs with envcheck's NCCL settings)"
# With REGISTERED=1 every mode is held: the eager loop too (where it is not launch-bound) and -G registered.
held=(); [ "${REGISTERED:-0}" = 1 ] && held=(--hold-eager --nccl-tests-registered "$nt/nccl_tests_registered.txt")
compare() {  # compare NODE_JSON WALL GRAPH_FILE OUT_MD
  "$py" tools/evidence/compare_node.py --node "$1" --nccl-tests "$nt/nccl_tests_eager.txt" --nccl-tests-graph "$3" \
    "${held[@]}" --torch-copy --wall-s "$2" --out "$4" > /dev/null 2>&1
  echo "$(basename "$4"): exit status $?" | tee -a "$log"
  grep -E "^verdict|agree" "$4" | tee -a "$log"
}
if [ -f "$out/node.json" ]; then
  compare "$out/node.json" "$(cat "$work/a.wall")" "$nt/nccl_tests_graph.txt" "$out/comparison.md"
  grep -E "^\| (all_|reduce_|broadcast)" "$out/comparison.md" | head -n 35 | tee -a "$log"
  [ -s "$nt/nccl_tests_graph_defaults.txt" ] && compare "$out/node.json" "$(cat "$work/a.wall")" \
    "$nt/nccl_tests_graph_defaults.txt" "$nt/comparison_defaults.md"
fi
[ -f "$out/node_b.json" ] && compare "$out/node_b.json" "$(cat "$work/b.wall")" "$nt/nccl_tests_graph.txt" \
  "$nt/comparison_b.md"
fi  # pair_only

say "envcheck diff A B (two back-to-back node runs; Markdown, JSON with --fail-on-regression 10)"
if [ -f "$out/node.json" ] && [ -f "$out/node_b.json" ]; then
  "$py" -m envcheck diff "$out/node.json" "$out/node_b.json" --format md --out "$out/node_diff.md" 2>&1 | tee -a "$log"
  "$py" -m envcheck diff "$out/node.json" "$out/node_b.json" --format json --fail-on-regression 10 \
    --out "$out/node_diff.json" 2>&1 | tee -a "$log"
  echo "diff --fail-on-regression 10 exit status: ${PIPESTATUS[0]}" | tee -a "$log"
  "$py" -m envcheck diff "$out/node.json" "$out/node_b.json" 2>&1 | sed -n '/Node tests/,$p' | head -n 50 | tee -a "$log"
fi

if [ "${FLEET:-0}" = 1 ]; then
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
  cat "$work"/fleet.launcher*.log | grep -E "^(fleet|  |take out)" | head -n 40 | tee -a "$log"
fi

say "packing the work folder (rank outputs, NCCL logs, torchrun logs) and nccl-tests' outputs"
tar -czf "$out/nccl_tests.tgz" -C "$work" nccl_tests
rm -rf "$nt"
# NCCL's COLL lines repeat for every call: the head and tail of each log are enough to read.
find "$work" -name 'nccl.rank*.log' -size +2M -exec sh -c 'for f; do (head -c 1000000 "$f"; echo "[...]"; tail -c 1000000 "$f") > "$f.cut" && mv "$f.cut" "$f"; done' _ {} +
tar -czf "$out/work.tgz" -C "$(dirname "$work")" "$(basename "$work")" 2>/dev/null
ls -la "$out" | tee -a "$log"
say "done"
