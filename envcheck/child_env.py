"""The environment of every process envcheck starts: the user's, with NVLink multicast off and
CUDA's device order set to NVML's.

A program that uses NVLink multicast (NCCL's NVLS algorithms, PyTorch's symmetric memory,
NVSHMEM) can put every GPU of a shared host out of service; envcheck never needs it. So the
three switches are set in every child: the benchmark workers, the node tests, torchrun and its
ranks, nccl-tests, and the probes' subprocesses. They are applied last, so nothing in the
user's environment can turn multicast back on for a child of envcheck.

CUDA numbers devices fastest first by default, NVML (and nvidia-smi) by PCI bus id; envcheck
names GPUs by their NVML index (``--gpus``, topology, counters) and hands the same numbers to CUDA
in its children, so a child gets ``CUDA_DEVICE_ORDER=PCI_BUS_ID``. That one is a default: a user
who set ``CUDA_DEVICE_ORDER`` keeps their order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

NO_MULTICAST: dict[str, str] = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                "NVSHMEM_DISABLE_NVLS": "1"}
# A default, unlike NO_MULTICAST: the user's own CUDA_DEVICE_ORDER wins.
DEVICE_ORDER: dict[str, str] = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def child_env(extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: ``base`` (this process's by default) plus ``extra``, with the
    multicast switches always set last; CUDA's device order is PCI bus order unless ``base`` or
    ``extra`` name one."""
    env = dict(DEVICE_ORDER)
    env.update(os.environ if base is None else base)
    env.update(extra or {})
    env.update(NO_MULTICAST)
    return env
