"""Dated report file names that say what the report is, sort by time and never replace an existing report
(``2026-11-21_2215Z_gpu-box-1_h200.json``); a name any file of a report set already uses gets ``-2``, ``-3``, ...
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from envcheck import model
from envcheck.files import exists
from envcheck.render.i18n import LANGS, document_stem

SIBLING_SUFFIXES = (".json", ".md", ".html", "_charts")  # what a render writes beside the JSON
MAX_ATTEMPTS = 1000
_VENDOR_WORDS = ("nvidia", "geforce")  # in every NVIDIA name: they make file names long, not distinct


def stamp(when: datetime) -> str:
    """``2026-11-21_2215Z``: UTC, to the minute, sorts as text."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d_%H%MZ")


def slug(text: str | None, fallback: str, max_len: int = 40) -> str:
    """Lower case letters, digits, dots and dashes only: safe on every file system and shell."""
    s = re.sub(r"[^a-z0-9.]+", "-", (text or "").lower()).strip("-.")
    s = s[:max_len].rstrip("-.")
    return s or fallback


def device_slug(gpu_name: str | None) -> str:
    """``NVIDIA GeForce RTX 4090`` -> ``rtx-4090``; no GPU -> ``cpu``."""
    if not gpu_name:
        return "cpu"
    words = [w for w in gpu_name.split() if w.lower() not in _VENDOR_WORDS]
    return slug(" ".join(words) or gpu_name, fallback="gpu")


def report_stem(when: datetime, host: str | None, gpu_name: str | None) -> str:
    return f"{stamp(when)}_{slug(host, fallback='host')}_{device_slug(gpu_name)}"


def node_stem(when: datetime, host: str | None, gpu_names: Sequence[str]) -> str:
    """A node run's: ``2026-11-28_2058Z_vm_4x-h200_node``, ``..._2x-gpus_node`` for GPUs of different kinds."""
    kinds = {device_slug(n) for n in gpu_names}
    what = kinds.pop() if len(kinds) == 1 else "gpus"
    return f"{stamp(when)}_{slug(host, fallback='host')}_{len(gpu_names)}x-{what}_node"


def name_for(report: model.Report, when: datetime) -> str:
    if report.fleet is not None:
        host = report.fleet.nodes[0].host if report.fleet.nodes else "fleet"
        return f"{stamp(when)}_fleet-{report.fleet.nnodes}x_{slug(host, 'host')}"
    if report.node is not None:
        return node_stem(when, report.host, [b.device.name for b in report.benches])
    if report.burn is not None and not report.benches:
        gpus = [g.device.name for g in report.burn.gpus if g.device is not None and g.device.backend == "cuda"]
        return report_stem(when, report.host, gpus[0] if gpus else None) + "_burn"
    bench = report.bench
    stem = report_stem(when, report.host, bench.device.name if bench and bench.device.backend == "cuda" else None)
    declared = [o.name for o in bench.ops] if bench else []  # envcheck bench: the user's own ops
    return f"{stem}_bench-{slug('-'.join(declared), 'ops')}" if declared else stem


def _taken(out_dir: Path, name: str) -> bool:
    return any(exists(out_dir / f"{document_stem(name, lang)}{suffix}") for lang in LANGS for suffix in SIBLING_SUFFIXES)


def write_report(out_dir: Path, stem: str, content: str) -> Path:
    """Write a new report JSON under a free dated name; never replaces a file, even in a race."""
    for name in (stem, *(f"{stem}-{i}" for i in range(2, MAX_ATTEMPTS + 1))):
        if _taken(out_dir, name):
            continue
        try:
            return model.write_new(out_dir / f"{name}.json", content)
        except FileExistsError:  # another run took the name between the check and the write
            continue
    raise model.ReportError("error.names_taken", path=out_dir, count=MAX_ATTEMPTS, stem=stem)
