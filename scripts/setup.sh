#!/usr/bin/env bash
# Set up .venv for envcheck. `--test` adds what the tests need.
#
# The venv sees the system's packages, so a torch (and Triton) you already have is
# used as it is, never replaced. Only where no torch is importable is one installed,
# and then only the CPU build, pinned with its +cpu tag so pip can never fall back to
# the multi-gigabyte CUDA build; on a machine with an NVIDIA GPU nothing is installed
# for torch (install the CUDA build that matches your driver yourself). Without an NVIDIA GPU
# the pinned Triton is installed too where none is importable: the CPU commands of the README
# run Triton kernels in its interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[ "${1:-}" = "--test" ] && want_test=1
PY=${PYTHON:-python3}
TORCH_CPU="torch==2.13.0+cpu"
TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"
TRITON="triton==3.6.0"

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv --system-site-packages .venv
fi
pip() { .venv/bin/python -m pip "$@"; }

# What an extra of pyproject.toml installs, by name (said before it is installed; pyproject is the one list).
extra() {
  "$PY" -c 'import re, sys
m = re.search(r"^%s = \[(.*?)\]" % sys.argv[1], open("pyproject.toml").read(), re.S | re.M)
print(", ".join(re.findall(r"\"([A-Za-z0-9_.-]+)", m.group(1))) if m else "")' "$1" 2>/dev/null || true
}
extras=""
if [ $want_test = 1 ]; then
  extras="[test]"
  echo "setup: installing envcheck into .venv with its dependencies and the test tools: $(extra test) (JAX's CPU build: the tests measure JAX as an implementation)"
else
  echo "setup: installing envcheck into .venv with its dependencies"
fi
pip install -q -e ".${extras}"

has() { .venv/bin/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('$1') is None)"; }
has_nvidia_gpu() { [ -e /dev/nvidiactl ] || [ -e /dev/dxg ] || command -v nvidia-smi >/dev/null 2>&1; }

if ! has torch; then
  if has_nvidia_gpu && [ $want_test = 0 ]; then
    echo "setup: no PyTorch here. This machine has an NVIDIA GPU: install the CUDA build of torch that matches your driver, then run envcheck again (envcheck check will tell you which)." >&2
  else
    echo "setup: no PyTorch here; installing the CPU build ($TORCH_CPU)"
    # The indexes pip is configured with come first (a local mirror or wheel folder may hold the
    # build); PyPI has no +cpu builds, so "no matching distribution" there means: ask PyTorch's CPU
    # index. That expected miss is not shown; any other failure is.
    if ! log=$(pip install -q "$TORCH_CPU" 2>&1); then
      if grep -q "No matching distribution found" <<<"$log"; then
        pip install -q "$TORCH_CPU" --extra-index-url "$TORCH_CPU_INDEX"
      else
        printf '%s\n' "$log" >&2
        exit 1
      fi
    fi
  fi
fi
if ! has triton; then
  if [ $want_test = 1 ] || ! has_nvidia_gpu; then
    # Without a GPU, Triton's kernels run in its interpreter (TRITON_INTERPRET=1): the README's CPU
    # commands (envcheck bench of the worked example) and the tests need it. It is the plain PyPI
    # wheel, CPU-only torch stays as it is. On a GPU machine Triton comes with the CUDA build of torch.
    echo "setup: no Triton here; installing $TRITON (on a CPU it runs kernels in its interpreter: TRITON_INTERPRET=1)"
    if ! pip install -q "$TRITON"; then
      [ $want_test = 1 ] && exit 1
      echo "setup: could not install $TRITON; envcheck check and run work without it, envcheck bench of a Triton kernel needs it (pip install $TRITON)" >&2
    fi
  else
    echo "setup: no Triton here. This machine has an NVIDIA GPU: the CUDA build of torch brings the Triton it was built with; install that torch, then run envcheck again." >&2
  fi
fi
echo "setup: ready (.venv)"
