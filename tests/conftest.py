"""Shared test set-up: GPU-only tests skip cleanly without a usable CUDA GPU."""

from __future__ import annotations

import functools

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run, so a CI failure reproduces as it was;
# `pytest --hypothesis-profile=explore` draws fresh ones.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("repeatable")


@functools.cache
def cuda_gpu_reason() -> str | None:
    """None when a CUDA GPU with torch and Triton is usable, else why not."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = cuda_gpu_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"GPU test: {reason}"))
