"""The environment of every process envcheck starts: an allow-list of the user's (never a token it could print),
NVLink multicast off last (it can put every GPU of a shared host out of service), CUDA's devices in NVML's
order unless the user chose one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from envcheck.redact import is_secret_name

NO_MULTICAST: dict[str, str] = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                "NVSHMEM_DISABLE_NVLS": "1"}
DEVICE_ORDER: dict[str, str] = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
# Names, or prefixes ending in "*": the libraries' and the GPU stack's own settings, and the tests' hooks.
ALLOWED: tuple[str, ...] = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "LD_LIBRARY_PATH", "CC", "CXX",
    "LC_*", "CUDA_*", "NVIDIA_*", "NCCL_*", "NVSHMEM_*", "TORCH*", "PYTORCH_*", "TRITON_*", "XDG_*", "CUBLAS_*",
    "CUDNN_*", "OMP_*", "JAX_*", "XLA_*", "FI_*", "UCX_*", "GLOO_*", "HIP_*", "ROCR_*", "HSA_*", "ENVCHECK_TEST_*",
)


def clean_env(extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None,
              allow: Iterable[str] = ()) -> dict[str, str]:
    """``base`` (default: this process's) cut to ``ALLOWED`` and ``allow``, secret names out (NCCL_IB_PKEY is a
    partition, not a key), then ``extra``, multicast off last."""
    names = (*ALLOWED, *allow)
    env = dict(DEVICE_ORDER)
    env.update({k: v for k, v in (os.environ if base is None else base).items()
                if any(k == a or (a.endswith("*") and k.startswith(a[:-1])) for a in names)
                and (k.startswith("NCCL_") or not is_secret_name(k))})
    env.update(extra or {})
    env.update(NO_MULTICAST)
    return env


def user_path(base: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Where a user's own module (``envcheck bench mod:OPS``) is looked for, as their Python would, for the end of a
    child's ``sys.path``: the current folder, then PYTHONPATH's."""
    entries = (os.environ if base is None else base).get("PYTHONPATH", "").split(os.pathsep)
    return tuple(dict.fromkeys(os.path.abspath(e) for e in ["", *entries]))
