"""``envcheck export REPORT.json --format junit|prometheus|health``: a saved report for CI, node_exporter or Slurm.
Whatever the format, the exit status is the report's verdict (0 passed, 1 failed, 2 bad usage), as ``check``'s."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from envcheck.analysis import Analysis
from envcheck.commands import check_out, write_out
from envcheck.commands.options import ExportOptions
from envcheck.errors import EXIT_FAIL, EXIT_OK, UsageError


def emit(analysis: Analysis, fmt: str, out: str | None = None, slurm_drain: bool = False) -> int:
    """Print (or write to ``out``) ``analysis`` as ``fmt``; the exit status is the verdict's, for every format."""
    from envcheck.analysis.verdict import verdict

    status = EXIT_OK if verdict(analysis).ok else EXIT_FAIL
    if fmt == "health":
        from envcheck.render.health import drain_reason, health_line

        line, status = health_line(analysis)  # the same status
        reason = drain_reason(analysis)
        if slurm_drain and reason is not None:
            from envcheck import slurm

            slurm.drain(reason)
        if out:
            write_out(out, line + "\n", "report")
        print(line)
    elif fmt == "prometheus" and out:
        from envcheck.render.prometheus import write_textfile

        try:
            write_textfile(analysis, Path(out))
        except OSError as e:
            raise UsageError("error.cannot_write", path=Path(out), error=e.strerror or e) from None
    elif fmt in ("junit", "prometheus"):
        from envcheck.render.junit import junit_xml
        from envcheck.render.prometheus import prometheus_text

        text = junit_xml(analysis) if fmt == "junit" else prometheus_text(analysis)
        if out:
            write_out(out, text, "report")
        else:
            sys.stdout.write(text)
    else:
        raise UsageError("error.unknown_format", format=repr(fmt))
    return status


def main(args: ExportOptions) -> int:
    from envcheck import model
    from envcheck.analysis import analyse
    from envcheck.model.codec import VERDICT_KINDS

    if args.out:  # refused before the report is read: a textfile is replaced whole, any other file never
        if os.path.isdir(args.out):  # False, not an OSError, for a name too long
            raise UsageError("error.out_is_folder", path=args.out, example=Path(args.out) / "envcheck.prom")
        if args.format != "prometheus":
            check_out(args.out, "report")
    return emit(analyse(model.load(args.report, VERDICT_KINDS)), args.format, args.out)
