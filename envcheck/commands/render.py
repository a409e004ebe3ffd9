"""``envcheck render REPORT.json``: regenerate the Markdown / HTML documents of a report (no GPU needed).

The documents are written as one set (``render.writing``): after a refusal or a failure none of
them was written and the existing ones are as they were, so the message can say so and the same
command, fixed, works.
"""

from __future__ import annotations

from pathlib import Path

from envcheck.commands.options import RenderOptions
from envcheck.errors import EXIT_OK, UsageError


def main(args: RenderOptions) -> int:
    from envcheck.model import load
    from envcheck.render.writing import write_documents, written_lines

    report = load(args.report)  # a foreign, corrupt or future-schema file raises ReportError: one line, exit 2
    out_dir = Path(args.out) if args.out else None
    if out_dir is not None:
        from envcheck.destination import DestinationError, prepare_folder

        try:
            prepare_folder(out_dir, create=False)
        except DestinationError as e:
            raise UsageError(f"--out: {e}; nothing was written") from None
    try:
        written = write_documents(report, Path(args.report), args.format, lang=args.lang, out_dir=out_dir,
                                  force=args.force)
    except OSError as e:
        where = out_dir or Path(args.report).parent
        raise UsageError(f"cannot write to {where} ({e.strerror or e}); nothing was written, "
                         "the files there are as they were") from None
    for line in written_lines(written):
        print(line)
    return EXIT_OK
