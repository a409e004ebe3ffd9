"""Parsers for ``nvidia-smi topo -m`` and ``nvlink -s``: a cross-check of NVML, and a fallback where a binding
is missing. nvidia-smi prints tab-separated columns, the header underlined with ANSI escapes even into a pipe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envcheck.model.node import TopoCell

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"^GPU(\d+)$")


def parse_topo_matrix(text: str) -> tuple[TopoCell, ...]:
    """The GPU-to-GPU cells of ``nvidia-smi topo -m`` (``NV18``, ``SYS``...), without self cells, NICs, affinity
    and legend. ValueError when the text has no GPU matrix (nvidia-smi printed an error instead)."""
    header: list[str] | None = None
    cells: list[TopoCell] = []
    for ln in (_ANSI.sub("", ln) for ln in text.splitlines()):
        parts = [p.strip() for p in ln.split("\t")]
        if header is None:
            names = [p for p in parts if p]
            if names and _GPU.match(names[0]):
                header = parts[1:] if parts and not parts[0] else parts
            continue
        if not _GPU.match(parts[0]):
            if ln.lstrip().startswith(("Legend", "NIC Legend")):
                break
            continue
        row = int(_GPU.match(parts[0]).group(1))  # type: ignore[union-attr]
        for name, value in zip(header, parts[1:], strict=False):  # a row may lack trailing columns
            m = _GPU.match(name)
            if m is None:
                continue
            col = int(m.group(1))
            if col != row and value and value != "X":
                cells.append(TopoCell(row, col, value))
    if header is None:
        raise ValueError("no GPU matrix in nvidia-smi topo -m output")
    return tuple(cells)


@dataclass(frozen=True)
class LinkSpeed:
    """One line of ``nvidia-smi nvlink -s``: ``Link 3: 26.562 GB/s`` or ``Link 3: <inactive>``."""

    gpu: int
    link: int
    gbps: float | None  # per direction; None when inactive


_GPU_LINE = re.compile(r"^GPU (\d+):")
_LINK_LINE = re.compile(r"^\s*Link (\d+):(.*)$")
_SPEED = re.compile(r"^([0-9.]+)\s*GB/s$")


def parse_nvlink_speeds(text: str) -> tuple[LinkSpeed, ...]:
    """Every link line of ``nvidia-smi nvlink -s`` (same text as ``nvlink --status`` on recent drivers)."""
    out: list[LinkSpeed] = []
    gpu: int | None = None
    for ln in text.splitlines():
        m = _GPU_LINE.match(ln)
        if m:
            gpu = int(m.group(1))
            continue
        m = _LINK_LINE.match(ln)
        if m and gpu is not None:
            s = _SPEED.match(m.group(2).strip())
            out.append(LinkSpeed(gpu, int(m.group(1)), float(s.group(1)) if s else None))
    return tuple(out)
