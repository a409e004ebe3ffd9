"""Section ``env``: the environment variables that change how CUDA, PyTorch and Triton behave.

Only those variables are kept, and any secret among them is redacted before it reaches a
report: reports get shared, pasted into issues and committed.
"""

from __future__ import annotations

from collections.abc import Mapping

from envcheck.model import Facts, known, missing
from envcheck.probes.host import Host
from envcheck.redact import REDACTED, is_secret_name, redact_value

__all__ = ["KEYS", "REDACTED", "is_relevant", "is_secret_name", "probe_env", "redact", "relevant_variables"]

KEYS = ("variables",)

RELEVANT_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_HOME", "CUDA_PATH",
    "CUDA_LAUNCH_BLOCKING", "PATH", "PYTHONPATH",
})
RELEVANT_PREFIXES = (
    "TRITON_", "TORCH_", "PYTORCH_", "NCCL_", "CUDA_", "CUBLAS_", "CUDNN_", "NVIDIA_",
    # torch.compile's settings: they decide what the "compile" implementation measures.
    "TORCHINDUCTOR_", "TORCHDYNAMO_",
)


# Container-image metadata, not settings: NVIDIA's CUDA images set NVIDIA_REQUIRE_CUDA to a
# multi-kilobyte list of driver constraints that nothing on the machine reads at run time.
IGNORED_PREFIXES = ("NVIDIA_REQUIRE_",)


def is_relevant(name: str) -> bool:
    if name.startswith(IGNORED_PREFIXES):
        return False
    return name in RELEVANT_NAMES or name.startswith(RELEVANT_PREFIXES)


def redact(name: str, value: str) -> str:
    """``value`` as it may appear in a report (see :func:`envcheck.redact.redact_value`)."""
    return redact_value(name, value)


def relevant_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The relevant variables of ``environ``, redacted, sorted by name."""
    return {name: redact(name, environ[name]) for name in sorted(environ) if is_relevant(name)}


def probe_env(host: Host) -> Facts:
    """Facts of section ``env``: ``variables`` (name -> redacted value); never raises."""
    try:
        return {"variables": known(relevant_variables(host.environ))}
    except Exception as e:  # noqa: BLE001 - a probe records its failure instead of raising
        return {"variables": missing(f"env probe failed ({type(e).__name__}: {e})")}
