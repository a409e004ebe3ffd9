"""``envcheck check``: facts, isolated runtime probes and health checks with exact fixes.

Exit status 0 when no check fails (warnings allowed), 1 when one does: scripts can gate GPU
work on it. ``--out`` writes the report JSON and never replaces an existing file.
``--replay SNAPSHOT`` checks a machine recorded by ``envcheck snapshot`` instead of this one;
``--anonymize`` replaces what identifies the machine and its users (``envcheck/anonymize.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from envcheck.errors import EXIT_FAIL, EXIT_OK, UsageError


def _check_out(path: str | None) -> Path | None:
    """Refuse a bad --out before probing for a minute, not after."""
    if not path:
        return None
    p = Path(path)
    if p.exists():
        raise UsageError(f"{p} already exists: choose a new file name (envcheck never overwrites a report)")
    parent = p.parent if str(p.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise UsageError(f"{parent} is not a folder")
    return p


def seams(args: argparse.Namespace) -> tuple[object | None, object | None, str | None]:
    """(host, nvml, host name) to probe: this machine (None, None, None) or a ``--replay`` snapshot."""
    path = getattr(args, "replay", None)
    if not path:
        return None, None, None
    from envcheck import snapshot

    try:
        snap = snapshot.load(path)
    except snapshot.SnapshotError as e:
        raise UsageError(str(e)) from None
    host, nvml = snapshot.replay(snap)
    return host, nvml, snap.hostname


def main(args: argparse.Namespace) -> int:
    from envcheck import model
    from envcheck.checks import evaluate
    from envcheck.probes.collect import collect, new_report

    if getattr(args, "slurm_drain", False) and args.format != "health":
        raise UsageError("--slurm-drain goes with --format health")
    out = _check_out(getattr(args, "out", None))
    key = None
    if getattr(args, "anonymize", False):
        from envcheck.anonymize import command_key

        key = command_key()
    host, nvml, hostname = seams(args)
    env = collect(host=host, nvml=nvml, runtime=True, timeout=args.timeout)  # type: ignore[arg-type]
    checks = evaluate(env)
    report = new_report("check", env, checks, host=hostname)
    if key is not None:
        from envcheck.anonymize import for_this_machine

        report = for_this_machine(report.host, key).report(report)
        env, checks = report.environment, report.checks
    text = model.dumps(report)
    if out is not None:
        try:
            model.write_new(out, text)
        except FileExistsError:
            raise UsageError(f"{out} already exists: choose a new file name (envcheck never overwrites a report)") \
                from None
        except OSError as e:
            raise UsageError(f"cannot write {out}: {e.strerror or e}") from None
    if args.format in ("junit", "prometheus", "health"):
        from envcheck.analysis import analyse
        from envcheck.commands.export import emit

        status = emit(analyse(report), args.format, slurm_drain=getattr(args, "slurm_drain", False))
        # Whatever the format, the exit status says whether a check failed, as in text and json.
        return max(status, EXIT_FAIL if any(c.status == "fail" for c in checks) else EXIT_OK)
    if args.format == "json":
        sys.stdout.write(text)
    else:
        from envcheck.render.escape import term
        from envcheck.render.i18n import translate
        from envcheck.render.terminal.checks import print_checks
        from envcheck.render.terminal.console import make_console
        from envcheck.render.terminal.environment import print_environment

        lang = getattr(args, "lang", "en")
        console = make_console()
        print_environment(console, env, lang)
        print_checks(console, checks, env.probe_s, lang)
        if out is not None:
            console.print(translate(lang, "check.written", path=term(out)))
    return EXIT_FAIL if any(c.status == "fail" for c in checks) else EXIT_OK
