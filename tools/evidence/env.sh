# Sourced by the device scripts from the project root: the environment every step on a lent machine starts from.
# NVLink multicast stays off for everything started below (envcheck also sets these in every child).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The copied tree is imported through a link of this name, so a report's PYTHONPATH shows the name,
# never the folder the tree was copied to.
ln -sfn "$PWD" /tmp/envcheck-tree
export PYTHONPATH="/tmp/envcheck-tree${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# Where the call's files go ($OUT on a lent machine, ./out elsewhere), made and absolute, and the python3
# every step runs with (the machine's own unless PYTHON names another).
out=${OUT:-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}

# nccl_home: the NCCL that torch loads (pip's nvidia-nccl) as a NCCL_HOME for building nccl-tests against:
# NH its folder, /tmp/nx its headers and an unversioned libnccl.so (make NCCL_HOME=/tmp/nx).
nccl_home() {
  NH=$("$py" -c "import nvidia.nccl as m; print(list(m.__path__)[0])")
  mkdir -p /tmp/nx/lib
  ln -sfn "$NH/include" /tmp/nx/include
  ln -sf "$NH/lib/libnccl.so.2" /tmp/nx/lib/libnccl.so
}

# build_nccl_tests LOG BINARY...: nccl-tests' BINARYs (e.g. alltoall_perf) built from .nccl-tests/ into /tmp/ntb
# against that NCCL, in the background: the build's output and its exit status go to LOG, build_pid is its pid.
build_nccl_tests() {
  local blog=$1; shift
  nccl_home
  ( timeout 240 make --no-print-directory -C .nccl-tests/src -j16 MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=/tmp/nx \
      NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR=/tmp/ntb os.build "${@/#//tmp/ntb/}" \
      > "$blog" 2>&1; echo "build exit status $?" >> "$blog" ) &
  build_pid=$!
}

# diag_begin LOG: a diagnostic's start. work: a scratch folder; log: $out/LOG, where say writes a headed line with
# the seconds since the start and the time; ngpu; the GPUs, torch and NCCL in the log; nvidia-smi dmon (power and
# clocks every second) into $out/dmon.txt in the background, dmon_pid its pid.
diag_begin() {
  work=$(mktemp -d)
  log="$out/$1"
  ngpu=$(nvidia-smi -L | wc -l)
  say "machine"
  { nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm --format=csv
    "$py" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } 2>&1 \
    | tee -a "$log"
  nvidia-smi dmon -s pc -d 1 -o T > "$out/dmon.txt" 2>&1 &
  dmon_pid=$!
}
# say TEXT: a step's heading in the call's log ($log, set by the script), with the seconds since the script
# started and the UTC time.
say() { printf '\n== %s (%s s, %s)\n' "$*" "$SECONDS" "$(date -u +%H:%M:%S)" | tee -a "$log"; }
# want STEP: whether STEP is among the space-separated $steps the script was asked for (STEPS=...).
want() { [[ "$steps" == *" $1 "* ]]; }
