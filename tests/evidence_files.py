"""The committed evidence as text: its report JSON is kept gzip-compressed (``evidence/*.json.gz``)."""

from __future__ import annotations

import gzip
from pathlib import Path

EVIDENCE = Path(__file__).resolve().parents[1] / "evidence"


def text(path: Path) -> str:
    """The JSON text of a committed report, compressed or not."""
    raw = Path(path).read_bytes()
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
