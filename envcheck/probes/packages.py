"""The package-metadata seam: what pip installed, read without importing the package (``import torch`` costs
seconds and can crash)."""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class PackageInfo:
    """An installed distribution: ``location`` is its site-packages folder, ``requires`` its Requires-Dist lines."""

    name: str
    version: str
    location: str
    requires: tuple[str, ...] = ()

    def path(self, *parts: str) -> str:
        return os.path.join(self.location, *parts)


Lookup = Callable[[str], "PackageInfo | None"]


def find_package(name: str) -> PackageInfo | None:
    """The installed distribution ``name`` in this interpreter, or None; never raises."""
    try:
        dist = importlib.metadata.distribution(name)
    except Exception:  # noqa: BLE001 - not installed; a corrupt METADATA file reads the same, never a crash
        return None
    try:
        location = str(dist.locate_file(""))
    except Exception:  # noqa: BLE001 - same: exotic finders may not support locate_file
        location = ""
    return PackageInfo(name, dist.version or "", location, tuple(dist.requires or ()))
