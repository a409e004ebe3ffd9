"""``envcheck snapshot``: record what the probes read on this machine into one JSON file.

Attach the file to a support thread: ``envcheck check --replay FILE`` shows, on any machine and
without a GPU, what envcheck sees here. Secrets are redacted as everywhere; ``--anonymize``
also replaces host and user names, addresses, GPU UUIDs and serials. It goes where every report goes
(the reports folder, ``--out-dir`` or ``ENVCHECK_REPORTS_DIR``), or to ``--out FILE``; never overwritten:
the default name takes ``-2``, ``-3``, ... when another snapshot of the same second has it. The
destination is checked before anything is probed.
"""

from __future__ import annotations

import re
import sys

from envcheck.commands.options import SnapshotOptions
from envcheck.errors import EXIT_OK, UsageError


def default_name(hostname: str, when: str) -> str:
    """``envcheck-snapshot-<host>-<UTC time>.json``, safe as a file name."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", hostname).strip("-.") or "host"
    return f"envcheck-snapshot-{safe}-{when.replace(':', '').replace('-', '')}.json"


def main(s: SnapshotOptions) -> int:
    from envcheck import snapshot
    from envcheck.commands import check_out, write_out
    from envcheck.commands.run import output_dir

    out = check_out(s.out)
    folder = output_dir(s.out_dir) if out is None else None
    key = None
    if s.anonymize:
        from envcheck.anonymize import command_key

        key = command_key()
    snap = snapshot.capture(timeout=s.timeout)
    if key is not None:
        from envcheck.anonymize import anonymize_snapshot, for_this_machine

        snap = anonymize_snapshot(snap, for_this_machine(snap.hostname, key))
    text = snapshot.dumps(snap)
    if out is not None:
        path = write_out(out, text)
    else:  # two snapshots of one second: the second takes -2 (reportname's rule)
        from envcheck import reportname

        try:
            path = reportname.write_report(folder, default_name(snap.hostname, str(snap.meta.get("captured") or ""))
                                           .removesuffix(".json"), text)
        except OSError as e:
            raise UsageError(f"cannot write the snapshot: {e.strerror or e}") from None
    from envcheck.render.escape import visible

    print(visible(f"snapshot written to {path}; replay it anywhere with: envcheck check --replay {path}"),
          file=sys.stderr)
    return EXIT_OK
