"""A machine in one JSON file: what every probe read, to be probed again anywhere.

``envcheck snapshot`` records the machine at the seams (``probes/recording.py`` for files,
folders, links, commands, variables, packages and the runtime children; the NVML child's
answers for NVML) and writes it here; ``envcheck check --replay`` and ``probe --replay`` run
the same probes and checks against it (``probes/replay.py``, ``probes/nvml_table.py``), on any
machine, without a GPU. It is what a user attaches to a support thread, and what the tests
are made of (``tests/fixtures/snapshots/``).

Format (``format``: ``envcheck-snapshot``)::

    {"format": "envcheck-snapshot", "version": 1,
     "meta": {"id", "title", "captured", "envcheck_version", "host", "sources": [url, ...],
              "derived": [how a part was converted], "hand_written": [what nobody posted], "notes"},
     "host": {"machine", "cpu_count", "cwd", "python": {executable, version, prefix, base_prefix, include_dir},
              "environ": {name: value (secrets redacted)},
              "files": {path: text or null (exists, not read)}, "errors": {path: {errno, strerror}},
              "links": {path: target}, "dirs": [path],
              "which": {name: path or null}, "disk_free": {path: bytes},
              "commands": [{argv, returncode, stdout, stderr, timed_out, error, wall_s}],
              "runs": {"torch_runtime" | "triton_runtime": {returncode, stdout, stderr, ...}},
              "packages": {name: {version, location, requires} or null}},
     "nvml": <an NVML table, see probes/nvml_table.py>}

Reading one (``load``) has the report reader's discipline: regular files of at most
``MAX_SNAPSHOT_BYTES`` only (a pipe or a device is refused without being read), integers and
nesting bounded, and every field the replay reads checked against ``envcheck/snapshot_schema.py``
(the one schema: a new probe adds what it reads there). Every failure is one ``SnapshotError``
line naming the file and the field. Every string is made encodable as it is read (a lone surrogate,
which JSON can spell and no UTF-8 writer accepts, becomes U+FFFD): what is replayed can be written.

Format history (``version``):
  1 - first format (2026-11).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envcheck.errors import first_line
from envcheck.outside_text import encodable, json_value

FORMAT = "envcheck-snapshot"
VERSION = 1
# A snapshot holds the text of a few hundred small files and command outputs: kilobytes to a few
# megabytes. Anything past this limit is not one, and is refused before it is read.
MAX_SNAPSHOT_BYTES = 32 << 20


class SnapshotError(Exception):
    """A file that cannot be read as a snapshot (one-line message)."""


@dataclass(frozen=True)
class Snapshot:
    meta: dict[str, Any] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    nvml: dict[str, Any] = field(default_factory=dict)

    @property
    def hostname(self) -> str:
        return str(self.meta.get("host") or self.meta.get("id") or "snapshot")


def to_dict(snap: Snapshot) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "meta": snap.meta, "host": snap.host, "nvml": snap.nvml}


def dumps(snap: Snapshot) -> str:
    return json.dumps(to_dict(snap), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def from_dict(data: Any) -> Snapshot:
    """A Snapshot from its JSON form; every field the replay reads is checked (``snapshot_schema``)."""
    from envcheck.snapshot_schema import SchemaError, check_sections

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SnapshotError(f"not an envcheck snapshot (no 'format': '{FORMAT}' field)")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise SnapshotError("version: expected an integer")
    if version > VERSION:
        raise SnapshotError(f"snapshot version {version} is newer than this envcheck understands ({VERSION}): "
                            "upgrade envcheck (pip install -U envcheck)")
    if version < 1:
        raise SnapshotError(f"unknown snapshot version {version}")
    sections = {k: {} if data.get(k) is None else data.get(k) for k in ("meta", "host", "nvml")}
    try:
        check_sections(sections)
    except SchemaError as e:
        raise SnapshotError(str(e)) from None
    except RecursionError:
        raise SnapshotError("nested too deeply to be a snapshot") from None
    return Snapshot(**sections)


def loads(text: str) -> Snapshot:
    """A Snapshot from its JSON text; every string in it made encodable (``outside_text.encodable``)."""
    try:
        data = json_value(text)
    except json.JSONDecodeError as e:
        raise SnapshotError(f"not valid JSON ({e.msg} at line {e.lineno})") from None
    except ValueError as e:  # an integer literal of thousands of digits (int's string conversion limit)
        raise SnapshotError(f"not a snapshot ({first_line(e)})") from None
    except RecursionError:
        raise SnapshotError("nested too deeply to be a snapshot") from None
    return from_dict(data)


def _read(p: Path) -> str:
    """The text of a regular file of at most MAX_SNAPSHOT_BYTES, without ever blocking on a pipe or
    reading a device without end: opened non-blocking, then checked on the open file itself (so a
    file swapped for a pipe between a check and the open is caught too)."""
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise SnapshotError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise SnapshotError(f"{p}: is a directory, not a snapshot file") from None
    except OSError as e:
        raise SnapshotError(f"{p}: cannot read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise SnapshotError(f"{p}: cannot read ({e.strerror or e})") from None
    problem = None
    if stat.S_ISDIR(st.st_mode):
        problem = "is a directory, not a snapshot file"
    elif not stat.S_ISREG(st.st_mode):
        problem = "not a regular file (a pipe, socket or device), not a snapshot"
    elif st.st_size > MAX_SNAPSHOT_BYTES:
        problem = f"{st.st_size} bytes, too large to be a snapshot (at most {MAX_SNAPSHOT_BYTES >> 20} MiB)"
    if problem is not None:
        os.close(fd)
        raise SnapshotError(f"{p}: {problem}")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_SNAPSHOT_BYTES + 1)
        except OSError as e:
            raise SnapshotError(f"{p}: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_SNAPSHOT_BYTES:  # a file that grew while it was read
        raise SnapshotError(f"{p}: too large to be a snapshot (at most {MAX_SNAPSHOT_BYTES >> 20} MiB)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SnapshotError(f"{p}: not UTF-8 text (byte {e.start}), not a snapshot") from None


def load(path: str | os.PathLike[str]) -> Snapshot:
    """Read a snapshot; every failure is a SnapshotError whose message names the file (and the field)."""
    p = Path(path)
    text = _read(p)
    try:
        return loads(text)
    except SnapshotError as e:
        raise SnapshotError(f"{p}: {e}") from None


def replay(snap: Snapshot) -> tuple[Any, Any]:
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
    meta = {
        "id": None,
        "title": None,
        "captured": utc_now(),
        "envcheck_version": __version__,
        "host": hostname(),
        "sources": ["recorded by envcheck snapshot"],
        "derived": [],
        "hand_written": [],
    }
    # What the recording seams read (variables, file names and texts, children's output) may hold lone
    # surrogates, Python's spelling of bytes that are not UTF-8: made encodable, as loads() does.
    return Snapshot(meta=meta, host=encodable(section), nvml=encodable(nvml.table))
