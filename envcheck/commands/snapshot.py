"""``envcheck snapshot``: what the probes read on this machine, in one JSON file that ``envcheck check --replay``
shows on any machine. It goes where every report goes, or to ``--out FILE``; never overwritten.
"""

from __future__ import annotations

import re

from envcheck.commands.options import SnapshotOptions
from envcheck.errors import EXIT_OK, UsageError
from envcheck.render.i18n import t


def default_name(hostname: str, when: str) -> str:
    """``envcheck-snapshot-<host>-<UTC time>.json``, safe as a file name."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", hostname).strip("-.") or "host"
    return f"envcheck-snapshot-{safe}-{when.replace(':', '').replace('-', '')}.json"


def main(s: SnapshotOptions) -> int:
    from envcheck import snapshot
    from envcheck.commands import anonymize_key, check_out, tell, write_out
    from envcheck.commands.publish import output_dir

    out = check_out(s.out)
    folder = output_dir(s.out_dir) if out is None else None
    key = anonymize_key(s.anonymize)
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
            raise UsageError("error.snapshot_write", error=e.strerror or e) from None
    tell(t("snapshot.written", path=path))
    return EXIT_OK
