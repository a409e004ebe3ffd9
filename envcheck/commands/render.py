"""``envcheck render REPORT.json``: regenerate the Markdown / HTML documents of a report (no GPU needed)."""

from __future__ import annotations

import argparse
from pathlib import Path


def main(args: argparse.Namespace) -> int:
    from envcheck.model import load
    from envcheck.render import write_documents

    report = load(args.report)  # a foreign, corrupt or future-schema file raises ReportError: one line, exit 2
    out_dir = Path(args.out) if args.out else None
    written = write_documents(report, Path(args.report), args.format, lang=args.lang, out_dir=out_dir,
                              force=args.force)
    chart_dirs: dict[Path, int] = {}
    for path in written:
        if path.suffix == ".svg":
            chart_dirs[path.parent] = chart_dirs.get(path.parent, 0) + 1
        else:
            print(path)
    for folder, count in chart_dirs.items():
        print(f"{folder}/ ({count} charts)")
    return 0
