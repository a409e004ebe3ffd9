"""envcheck's own reasons for a missing fact, each with the catalogue key that phrases it; others as recorded."""

from __future__ import annotations

NO_CUDA_DEVICE = "no CUDA device"
TRITON_NO_GPU = "no CUDA GPU: Triton needs one to compile (envcheck run tests Triton kernels only on a GPU)"
NO_CUDA_ARCHS = "no CUDA architectures: CPU-only build"
CPU_ONLY_BUILD = "CPU-only build"
NOT_WSL = "not WSL"
NOT_PROBED = "not probed"
NO_ERROR = "no error"
NO_OUTPUT = "no output"
NO_NVCC = "nvcc not found on PATH or in the CUDA toolkit"
NOT_CAPTURED = "not captured in this snapshot"
NOT_CAPTURED_RUN = "not run: the snapshot holds no run of it"
NO_TORCH, NO_TRITON = "PyTorch is not installed for this Python", "Triton is not installed for this Python"

# Each reason's catalogue key is its name in lower case.
KEYS: dict[str, str] = {v: f"fact_reason.{k.lower()}" for k, v in dict(globals()).items() if k.isupper()}
