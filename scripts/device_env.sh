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
