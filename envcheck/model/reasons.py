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

KEYS: dict[str, str] = {
    NO_CUDA_DEVICE: "fact_reason.no_cuda_device",
    TRITON_NO_GPU: "fact_reason.triton_no_gpu",
    NO_CUDA_ARCHS: "fact_reason.no_cuda_archs",
    CPU_ONLY_BUILD: "fact_reason.cpu_only_build",
    NOT_WSL: "fact_reason.not_wsl",
    NOT_PROBED: "fact_reason.not_probed",
    NO_ERROR: "fact_reason.no_error",
    NO_OUTPUT: "fact_reason.no_output",
    **{r: f"fact_reason.{k}" for k, r in (("no_nvcc", NO_NVCC), ("not_captured", NOT_CAPTURED), ("no_torch", NO_TORCH),
                                          ("not_captured_run", NOT_CAPTURED_RUN), ("no_triton", NO_TRITON))},
}
