"""``envcheck snapshot``: record what the probes read on this machine into one JSON file.

Attach the file to a support thread: ``envcheck check --replay FILE`` shows, on any machine and
without a GPU, what envcheck sees here. Secrets are redacted as everywhere; ``--anonymize``
also replaces host and user names, addresses, GPU UUIDs and serials. The file is never
overwritten.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from envcheck.errors import EXIT_OK, UsageError


def default_name(hostname: str, when: str) -> str:
    """``envcheck-snapshot-<host>-<UTC time>.json``, safe as a file name."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", hostname).strip("-.") or "host"
    return f"envcheck-snapshot-{safe}-{when.replace(':', '').replace('-', '')}.json"


def main(args: argparse.Namespace) -> int:
    from envcheck import model, snapshot
    from envcheck.commands.check import _check_out

    out = _check_out(getattr(args, "out", None))
    key = None
    if getattr(args, "anonymize", False):
        from envcheck.anonymize import command_key

        key = command_key()
    snap = snapshot.capture(timeout=args.timeout)
    if key is not None:
        from envcheck.anonymize import anonymize_snapshot, for_this_machine

        snap = anonymize_snapshot(snap, for_this_machine(snap.hostname, key))
    path = out or Path(default_name(snap.hostname, str(snap.meta.get("captured") or "")))
    try:
        model.write_new(path, snapshot.dumps(snap))
    except FileExistsError:
        raise UsageError(f"{path} already exists: choose a new file name (envcheck never overwrites a file)") from None
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    print(f"snapshot written to {path}; replay it anywhere with: envcheck check --replay {path}", file=sys.stderr)
    return EXIT_OK
