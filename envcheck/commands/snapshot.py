"""``envcheck snapshot``: record what the probes read on this machine into one JSON file.

Attach the file to a support thread: ``envcheck check --replay FILE`` shows, on any machine and
without a GPU, what envcheck sees here. Secrets are redacted as everywhere; ``--anonymize``
also replaces host and user names, addresses, GPU UUIDs and serials. The file is never
overwritten: ``--out`` must name a new file, and the default name takes ``-2``, ``-3``, ... when
another snapshot of the same second has it. The destination is checked before anything is probed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from envcheck.commands.options import SnapshotOptions
from envcheck.errors import EXIT_OK, UsageError


def default_name(hostname: str, when: str) -> str:
    """``envcheck-snapshot-<host>-<UTC time>.json``, safe as a file name."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", hostname).strip("-.") or "host"
    return f"envcheck-snapshot-{safe}-{when.replace(':', '').replace('-', '')}.json"


MAX_ATTEMPTS = 1000


def _write_free(folder: Path, name: str, text: str) -> Path:
    """``name`` in ``folder``, or ``<stem>-2.json``, ``-3``, ... when taken (two snapshots in one second)."""
    from envcheck import model

    stem = name[:-len(".json")] if name.endswith(".json") else name
    for i in range(1, MAX_ATTEMPTS + 1):
        path = folder / (f"{stem}.json" if i == 1 else f"{stem}-{i}.json")
        try:
            return model.write_new(path, text)
        except FileExistsError:
            continue
    raise UsageError(f"{folder}: {MAX_ATTEMPTS} snapshots named {stem}* already exist")


def main(s: SnapshotOptions) -> int:
    from envcheck import model, snapshot
    from envcheck.commands.check import _check_out

    out = _check_out(s.out)
    if out is None:
        from envcheck.destination import DestinationError, prepare_folder

        try:
            prepare_folder(Path("."))  # the current folder takes the snapshot: checked before probing
        except DestinationError as e:
            raise UsageError(str(e)) from None
    key = None
    if s.anonymize:
        from envcheck.anonymize import command_key

        key = command_key()
    snap = snapshot.capture(timeout=s.timeout)
    if key is not None:
        from envcheck.anonymize import anonymize_snapshot, for_this_machine

        snap = anonymize_snapshot(snap, for_this_machine(snap.hostname, key))
    text = snapshot.dumps(snap)
    try:
        if out is None:
            path = _write_free(Path("."), default_name(snap.hostname, str(snap.meta.get("captured") or "")), text)
        else:
            path = model.write_new(out, text)
    except FileExistsError:
        raise UsageError(f"{out} already exists: choose a new file name (envcheck never overwrites a file)") from None
    except OSError as e:
        raise UsageError(f"cannot write {out or 'the snapshot'}: {e.strerror or e}") from None
    from envcheck.render.escape import visible

    print(visible(f"snapshot written to {path}; replay it anywhere with: envcheck check --replay {path}"),
          file=sys.stderr)
    return EXIT_OK
