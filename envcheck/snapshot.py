"""A machine in one JSON file: what every probe read at the seams (``envcheck snapshot``), probed again anywhere
without a GPU (``check --replay``). Format: ``{"format": "envcheck-snapshot", "version": 1, "meta": ..., "host":
..., "nvml": ...}``, typed by ``snapshot_schema.py``; a problem is one ``SnapshotError`` line naming the field.
Format history (``version``): 1 - first format (2026-11).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.errors import Said
from envcheck.outside_json import Json, read_json, read_text
from envcheck.outside_text import encodable

if TYPE_CHECKING:
    from envcheck.probes.nvml_table import TableNvml
    from envcheck.probes.replay import ReplayHost

FORMAT = "envcheck-snapshot"
VERSION = 1
MAX_SNAPSHOT_BYTES = 32 << 20


class SnapshotError(Said):
    """A file that cannot be read as a snapshot (one-line message)."""


@dataclass(frozen=True)
class Snapshot:
    meta: dict[str, Json] = field(default_factory=dict)
    host: dict[str, Json] = field(default_factory=dict)
    nvml: dict[str, Json] = field(default_factory=dict)

    @property
    def hostname(self) -> str:
        return str(self.meta.get("host") or self.meta.get("id") or "snapshot")


def dumps(snap: Snapshot) -> str:
    data = {"format": FORMAT, "version": VERSION, "meta": snap.meta, "host": snap.host, "nvml": snap.nvml}
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def from_dict(data: Json) -> Snapshot:
    """A Snapshot from its JSON form; every field the replay reads is checked (``snapshot_schema``)."""
    from envcheck.snapshot_schema import check_sections

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) and isinstance(data.get("format"), str) else None
        raise SnapshotError(f"error.not_snapshot{'.got' if got else ''}", got=repr(got and got[:40]))
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise SnapshotError("error.version_not_int", field="version")
    if version > VERSION:
        raise SnapshotError("error.snapshot_newer", version=version, known=VERSION)
    if version < 1:
        raise SnapshotError("error.snapshot_version", version=version)
    sections: dict[str, Json] = {k: {} if data.get(k) is None else data.get(k) for k in ("meta", "host", "nvml")}
    try:
        check_sections(sections)
    except ValueError as e:
        raise SnapshotError("error.as_is", error=e) from None
    return Snapshot(**sections)


def loads(text: str) -> Snapshot:
    """A Snapshot from its JSON text; every string in it made encodable (``outside_text.encodable``)."""
    return from_dict(read_json(text, SnapshotError, "snapshot"))


def load(path: str | os.PathLike[str]) -> Snapshot:
    """Read a snapshot; every failure is a SnapshotError whose message names the file (and the field)."""
    p = Path(path)
    text = read_text(p, MAX_SNAPSHOT_BYTES, SnapshotError, "snapshot")
    try:
        return loads(text)
    except SnapshotError as e:
        raise SnapshotError("error.flag", flag=p, error=e) from None


def replay(snap: Snapshot) -> tuple[ReplayHost, TableNvml]:
    """(host, nvml): the seams of the recorded machine, for ``collect(host=..., nvml=...)``."""
    from envcheck.probes.nvml import NOT_CAPTURED
    from envcheck.probes.nvml_table import TableNvml
    from envcheck.probes.replay import ReplayHost

    return ReplayHost.from_section(snap.host), TableNvml(snap.nvml, absent=(NOT_CAPTURED, "not captured"))


def capture(timeout: float = 120.0) -> Snapshot:
    """Probe this machine (runtime children included) through recording seams."""
    from envcheck import __version__
    from envcheck.probes.collect import collect, hostname, utc_now
    from envcheck.probes.nvml_isolated import NVML_TIMEOUT_S, IsolatedNvml
    from envcheck.probes.recording import RecordingHost

    host = RecordingHost()
    nvml = IsolatedNvml(host, timeout=min(timeout, NVML_TIMEOUT_S))
    collect(host=host, nvml=nvml, runtime=True, timeout=timeout)
    section = host.section()
    meta = {"id": None, "title": None, "captured": utc_now(), "envcheck_version": __version__, "host": hostname(),
            "sources": ["recorded by envcheck snapshot"], "derived": [], "hand_written": []}
    # What the seams read may hold lone surrogates (bytes that are not UTF-8): made encodable, as loads() does.
    return Snapshot(meta=meta, host=encodable(section), nvml=encodable(nvml.table))
