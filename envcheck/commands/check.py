"""``envcheck check``: facts, isolated runtime probes and health checks with fixes; exit 1 when a check fails.
``--replay SNAPSHOT`` checks a machine ``envcheck snapshot`` recorded, and says so (a banner, ``replayed_from``)."""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.commands import anonymize_key, check_out, write_out
from envcheck.commands.options import CheckOptions
from envcheck.errors import EXIT_FAIL, EXIT_OK, UsageError

if TYPE_CHECKING:
    from envcheck.anonymize import Anonymizer
    from envcheck.model import ReplaySource, Report
    from envcheck.probes.host import Host
    from envcheck.probes.nvml import NvmlSeam
    from envcheck.snapshot import Snapshot


@dataclass(frozen=True)
class Seams:
    """What to probe: this machine (all None) or a ``--replay`` snapshot's recorded seams."""

    host: Host | None = None
    nvml: NvmlSeam | None = None
    snapshot: Snapshot | None = None
    source: ReplaySource | None = None


def seams(path: str | None) -> Seams:
    """This machine's seams, or those of the ``--replay`` snapshot ``path`` (read with every field checked)."""
    if not path:
        return Seams()
    from envcheck import snapshot
    from envcheck.model import ReplaySource
    from envcheck.probes.collect import utc_now

    try:
        snap = snapshot.load(path)
    except snapshot.SnapshotError as e:
        raise UsageError("error.as_is", error=e) from None
    host, nvml = snapshot.replay(snap)
    captured = snap.meta.get("captured")
    source = ReplaySource(file=Path(path).name, host=snap.hostname, replayed=utc_now(),
                          captured=str(captured) if captured else None)
    return Seams(host, nvml, snap, source)


def replayed(report: Report, s: Seams) -> Report:
    """A report made from a snapshot says so; its time is the capture's, else the replay's (one clock reading)."""
    if s.source is None:
        return report
    return dataclasses.replace(report, created=s.source.captured or s.source.replayed, replayed_from=s.source)


def anonymizer(host: str, key: bytes, s: Seams) -> Anonymizer:
    """This machine's anonymizer, with a replayed snapshot's users and home folder added."""
    from envcheck.anonymize import Anonymizer, for_this_machine, homes_in, users_in

    mine = for_this_machine(host, key)
    if s.snapshot is None:
        return mine
    environ = s.snapshot.host.get("environ") or {}
    return Anonymizer(key, hosts=mine.hosts + [host], users=[*mine.users, *users_in(environ)],
                      homes=[*mine.homes, *homes_in(environ)])


def anonymized(report: Report, anon: Anonymizer) -> Report:
    report = anon.report(report)
    if report.replayed_from is None:
        return report
    src = report.replayed_from
    # The default snapshot name holds the host between dashes, where the word rule of free text does not see it.
    file = anon.text(src.file)
    if src.host and src.host not in ("unknown", "localhost"):
        file = re.sub(re.escape(src.host), anon.host(src.host), file, flags=re.IGNORECASE)
    return dataclasses.replace(report, replayed_from=dataclasses.replace(src, file=file, host=anon.host(src.host)))


def main(s: CheckOptions, probe: bool = False) -> int:
    """``probe``: ``envcheck probe``, the facts alone (no runtime probe, no check)."""
    from envcheck import model
    from envcheck.checks import evaluate
    from envcheck.probes.collect import collect, new_report
    from envcheck.render.escape import json_text

    if s.slurm_drain:
        if s.format != "health":
            raise UsageError("error.slurm_drain_format")
        if s.replay:
            raise UsageError("error.slurm_drain_replay")
        from envcheck.slurm import ready

        ready()  # no scontrol, or not one node's name, is refused before anything is probed
    out = check_out(s.out, "report")
    key = anonymize_key(s.anonymize)
    seam = seams(s.replay)
    env = collect(host=seam.host, nvml=seam.nvml, runtime=not probe, timeout=s.timeout)
    checks = () if probe else evaluate(env)
    host = seam.source.host if seam.source is not None else None
    report = replayed(new_report("probe" if probe else "check", env, checks, host=host), seam)
    if key is not None:
        report = anonymized(report, anonymizer(report.host, key, seam))
        env, checks = report.environment, report.checks
    text = json_text(model.dumps(report))
    if out is not None:
        write_out(out, text, "report")
    if s.format in ("junit", "prometheus", "health"):
        from envcheck.analysis import analyse
        from envcheck.commands.export import emit

        status = emit(analyse(report), s.format, slurm_drain=s.slurm_drain)
        # Whatever the format, the exit status says whether a check failed, as in text and json.
        return max(status, EXIT_FAIL if any(c.status == "fail" for c in checks) else EXIT_OK)
    if s.format == "json":
        sys.stdout.write(text)
    else:
        from envcheck.render.escape import term
        from envcheck.render.i18n import t
        from envcheck.render.terminal.checks import print_checks
        from envcheck.render.terminal.console import make_console
        from envcheck.render.terminal.environment import print_environment
        from envcheck.render.terminal.replay import print_replay_banner

        console = make_console()
        print_replay_banner(console, report.replayed_from)
        print_environment(console, env, replayed=report.replayed_from is not None)
        if not probe:
            print_checks(console, checks, env.probe_s)
        if out is not None:
            console.print(t("check.written", path=term(out)))
    return EXIT_FAIL if any(c.status == "fail" for c in checks) else EXIT_OK
