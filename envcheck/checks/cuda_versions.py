"""CUDA version arithmetic the checks share: what a driver runs, which torch wheel fits it (sources: the CUDA
Toolkit release notes' driver table for Linux x86_64, the wheel indexes on download.pytorch.org)."""

from __future__ import annotations

import re

Version = tuple[int, int]

# Oldest Linux driver that fully supports each CUDA release (no minor-version caveats).
MIN_DRIVER: dict[Version, str] = {
    (11, 8): "520.61.05",
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
}

# CUDA builds of torch on download.pytorch.org, oldest first (each torch release offers a subset).
WHEEL_CUDA: tuple[Version, ...] = ((11, 8), (12, 1), (12, 4), (12, 6), (12, 8), (12, 9), (13, 0))
INDEX_URL = "https://download.pytorch.org/whl/{tag}"

# Oldest CUDA whose toolkit (and so whose torch wheels) compiles for each compute capability major.minor.
ARCH_MIN_CUDA: dict[Version, Version] = {
    (8, 9): (11, 8),
    (9, 0): (11, 8),
    (10, 0): (12, 8),
    (10, 3): (12, 9),
    (12, 0): (12, 8),
    (12, 1): (12, 9),
}
# Maxwell, Pascal and Volta (sm_50..sm_70) left the CUDA 12.8+ builds: cu126 is the newest index with them.
LAST_WHEEL_FOR_OLD_ARCH: Version = (12, 6)


def parse(text: str | None) -> Version | None:
    """(12, 8) from "12.8", "12.8.93" or "cu128"; None when unreadable."""
    if not text:
        return None
    m = re.match(r"^\s*cu(\d+)(\d)\s*$", text) or re.match(r"^\s*(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def text(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def tag(v: Version) -> str:
    return f"cu{v[0]}{v[1]}"


def pip_install(v: Version, force: bool = True) -> str:
    """The pip command for torch's CUDA ``v`` build (``--force-reinstall`` replaces a wrong build)."""
    again = "--force-reinstall " if force else ""
    return f"pip install {again}torch --index-url {INDEX_URL.format(tag=tag(v))}"


def wheel_for_driver(driver_cuda: Version) -> Version | None:
    """The newest torch CUDA build this driver runs without minor-version caveats, or None."""
    return max((w for w in WHEEL_CUDA if w <= driver_cuda), default=None)


def compat_wheel_for_driver(driver_cuda: Version) -> Version | None:
    """The torch CUDA build to install under this driver: the newest it runs outright, else the oldest of the
    driver's CUDA major, which runs by minor-version compatibility (a CUDA 11.4 driver runs cu118 wheels)."""
    return wheel_for_driver(driver_cuda) or next((w for w in WHEEL_CUDA if w[0] == driver_cuda[0]), None)


def install_for_driver(driver_cuda: Version, force: bool = True) -> dict[str, str] | None:
    """How to install the build :func:`compat_wheel_for_driver` picks, as a fix's parameters; None when none runs."""
    wheel = compat_wheel_for_driver(driver_cuda)
    if wheel is None:
        return None
    said = {"pip": pip_install(wheel, force=force), "install_key": "check.install"}
    if wheel > driver_cuda:
        said |= {"install_key": "check.install.compat", "wheel": text(wheel), "driver_cuda": text(driver_cuda)}
    return said


def pick_index_by_hand() -> dict[str, str]:
    """The parameters of the fix "torch.pick_index.fix" when the driver's CUDA version is unknown."""
    return {"url": INDEX_URL.format(tag="cu<XY>"), "tags": ", ".join(tag(w) for w in WHEEL_CUDA)}


def min_driver(cuda: Version) -> str | None:
    """Oldest driver for CUDA ``cuda`` (the exact release or the next one listed)."""
    return next((MIN_DRIVER[v] for v in sorted(MIN_DRIVER) if v >= cuda), None)


def wheel_for_arch(cc: Version, driver_cuda: Version | None) -> Version | None:
    """The newest torch CUDA build this driver runs that compiles for ``cc``; None when none fits both."""
    fits = [w for w in WHEEL_CUDA if (w <= LAST_WHEEL_FOR_OLD_ARCH if cc < (7, 5) else w >= arch_min_cuda(cc))]
    return max((w for w in fits if driver_cuda is None or w <= driver_cuda), default=None)


def arch_min_cuda(cc: Version) -> Version:
    """Oldest CUDA that compiles for ``cc`` (11.8 for anything up to Hopper)."""
    return ARCH_MIN_CUDA.get(cc) or max((v for k, v in ARCH_MIN_CUDA.items() if k <= cc), default=(11, 8))
