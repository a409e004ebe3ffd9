"""Section ``env``: the environment variables that change how CUDA, PyTorch and Triton behave.

Only those variables are kept, and any secret among them is redacted before it reaches a
report: reports get shared, pasted into issues and committed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from envcheck.model import Facts, known, missing
from envcheck.probes.host import Host

KEYS = ("variables",)
REDACTED = "<redacted>"

RELEVANT_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_HOME", "CUDA_PATH",
    "CUDA_LAUNCH_BLOCKING", "PATH",
})
RELEVANT_PREFIXES = (
    "TRITON_", "TORCH_", "PYTORCH_", "NCCL_", "CUDA_", "CUBLAS_", "CUDNN_", "NVIDIA_",
    # torch.compile's settings: they decide what the "compile" implementation measures.
    "TORCHINDUCTOR_", "TORCHDYNAMO_",
)

# Parts of a variable name that mark its value as a secret.
SECRET_NAME_PARTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")

# Userinfo in a URL (scheme://user:pass@host, or a bare token as the user: https://ghp_x@github.com).
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#@\s]+)@")
# Well-known token formats, in case one sits in a variable with an innocent name.
# The look-behind keeps ordinary words ("/opt/desk-environment") from matching.
_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:(?:ghp_|gho_|ghs_|ghu_|github_pat_|glpat-|hf_|xox[abpr]-|sk-)[A-Za-z0-9_\-]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}\b)"
)


# Container-image metadata, not settings: NVIDIA's CUDA images set NVIDIA_REQUIRE_CUDA to a
# multi-kilobyte list of driver constraints that nothing on the machine reads at run time.
IGNORED_PREFIXES = ("NVIDIA_REQUIRE_",)


def is_relevant(name: str) -> bool:
    if name.startswith(IGNORED_PREFIXES):
        return False
    return name in RELEVANT_NAMES or name.startswith(RELEVANT_PREFIXES)


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def redact(name: str, value: str) -> str:
    """``value`` as it may appear in a report.

    The whole value goes when the name marks a secret (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``)
    or a known token format appears in it; otherwise only the credentials inside URLs go
    (``https://user:pass@host/simple`` -> ``https://<redacted>@host/simple``).
    """
    if is_secret_name(name):
        return REDACTED
    if _TOKEN_SHAPES.search(value):
        return REDACTED
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", value)


def relevant_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The relevant variables of ``environ``, redacted, sorted by name."""
    return {name: redact(name, environ[name]) for name in sorted(environ) if is_relevant(name)}


def probe_env(host: Host) -> Facts:
    """Facts of section ``env``: ``variables`` (name -> redacted value); never raises."""
    try:
        return {"variables": known(relevant_variables(host.environ))}
    except Exception as e:  # noqa: BLE001 - a probe records its failure instead of raising
        return {"variables": missing(f"env probe failed ({type(e).__name__}: {e})")}
