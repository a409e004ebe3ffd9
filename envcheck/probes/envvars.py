"""Section ``env``: the environment variables that change how CUDA, PyTorch and Triton behave, secrets redacted
(reports get shared, pasted into issues and committed)."""

from __future__ import annotations

from envcheck.model import Facts, known
from envcheck.probes.host import Host
from envcheck.redact import redact_value

KEYS = ("variables",)

RELEVANT_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_HOME", "CUDA_PATH",
    "CUDA_LAUNCH_BLOCKING", "PATH", "PYTHONPATH",
})
# TORCHINDUCTOR_ and TORCHDYNAMO_: torch.compile's settings decide what the "compile" implementation measures.
RELEVANT_PREFIXES = ("TRITON_", "TORCH_", "PYTORCH_", "NCCL_", "CUDA_", "CUBLAS_", "CUDNN_", "NVIDIA_",
                     "TORCHINDUCTOR_", "TORCHDYNAMO_")
# Container-image metadata, not settings: NVIDIA's CUDA images set NVIDIA_REQUIRE_CUDA to kilobytes of constraints.
IGNORED_PREFIXES = ("NVIDIA_REQUIRE_",)


def is_relevant(name: str) -> bool:
    return not name.startswith(IGNORED_PREFIXES) and (name in RELEVANT_NAMES or name.startswith(RELEVANT_PREFIXES))


def probe_env(host: Host) -> Facts:
    env = host.environ
    return {"variables": known({name: redact_value(name, env[name]) for name in sorted(env) if is_relevant(name)})}
