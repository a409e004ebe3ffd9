"""The fixed reasons probes record for a missing fact, each with the catalogue key it is shown by.

A fact's reason is text (``Fact.reason``): most are what the machine said (an error, a path). These
are envcheck's own sentences, always written the same; the probes write them from here and the
renderers phrase them by their key in the reader's language (reports of every version recorded
the same English, so older reports are phrased too). A reason not listed here is shown as recorded.
"""

from __future__ import annotations

NO_CUDA_DEVICE = "no CUDA device"
TRITON_NO_GPU = "no CUDA GPU: Triton needs one to compile (envcheck run tests Triton kernels only on a GPU)"
NO_CUDA_ARCHS = "no CUDA architectures: CPU-only build"
CPU_ONLY_BUILD = "CPU-only build"
NOT_WSL = "not WSL"
NOT_PROBED = "not probed"
NO_ERROR = "no error"
NO_OUTPUT = "no output"

KEYS: dict[str, str] = {
    NO_CUDA_DEVICE: "fact_reason.no_cuda_device",
    TRITON_NO_GPU: "fact_reason.triton_no_gpu",
    NO_CUDA_ARCHS: "fact_reason.no_cuda_archs",
    CPU_ONLY_BUILD: "fact_reason.cpu_only_build",
    NOT_WSL: "fact_reason.not_wsl",
    NOT_PROBED: "fact_reason.not_probed",
    NO_ERROR: "fact_reason.no_error",
    NO_OUTPUT: "fact_reason.no_output",
}
