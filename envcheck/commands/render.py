"""``envcheck render REPORT.json``: regenerate the documents of a report (no GPU needed), as one set: after a
refusal or a failure none was written. What can be refused without rendering is refused first.
"""

from __future__ import annotations

from pathlib import Path

from envcheck.commands.options import RenderOptions
from envcheck.errors import EXIT_OK, UsageError


def preflight(args: RenderOptions) -> Path | None:
    """The output folder (None: beside the report), once what a render would replace is checked."""
    from envcheck.files import exists, report_stem
    from envcheck.render.i18n import document_stem
    from envcheck.render.writing import validate

    out_dir = Path(args.out) if args.out else None
    if out_dir is not None:
        from envcheck.destination import DestinationError, prepare_folder

        try:
            prepare_folder(out_dir, create=False)
        except DestinationError as e:
            raise UsageError("error.out_nothing_written", error=e) from None
    stem = report_stem(args.report)
    doc = document_stem(stem)
    names = {"md": f"{doc}.md", "html": f"{doc}.html", "junit": f"{doc}.junit.xml", "prometheus": f"{stem}.prom"}
    taken = [p for f in validate(args.format) if f in names
             and exists(p := (out_dir or Path(args.report).parent) / names[f])]
    if taken and not args.force:
        raise UsageError("error.rendered_exists", path=taken[0])
    return out_dir


def main(args: RenderOptions) -> int:
    from envcheck.analysis import analyse
    from envcheck.model import load
    from envcheck.render.writing import write_documents, written_lines

    out_dir = preflight(args)
    report = load(args.report)  # a foreign, corrupt or future-schema file raises ReportError: one line, exit 2
    try:
        written = write_documents(report, analyse(report), Path(args.report), args.format, out_dir=out_dir,
                                  force=args.force)
    except OSError as e:
        where = out_dir or Path(args.report).parent
        raise UsageError("error.render_write", path=where, error=e.strerror or e) from None
    for line in written_lines(written):
        print(line)
    return EXIT_OK
