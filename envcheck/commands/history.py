"""``envcheck history DIR|FILES...``: one machine's reports over time."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.commands.diff import check_out, emit, labels, terminal_text
from envcheck.errors import EXIT_OK, UsageError

if TYPE_CHECKING:
    from envcheck.model import Report


def collect(paths: list[str]) -> tuple[list[tuple[str, Report]], list[str]]:
    """Reports from folders (every ``*.json`` in them) and files, plus notes on skipped files.

    A folder may hold other JSON (rendered data, configs): those are skipped with a
    note. A file named explicitly must be a report: anything else is an error.
    """
    from envcheck.model import ReportError, load

    files: list[Path] = []
    explicit: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(q for q in p.glob("*.json") if q.is_file()))
        else:
            files.append(p)
            explicit.add(p)
    notes: list[str] = []
    loaded = []
    seen: set[Path] = set()
    for f in files:
        key = f.resolve()
        if key in seen:
            continue
        seen.add(key)
        try:
            loaded.append((f, load(f)))
        except ReportError as e:
            if f in explicit:
                raise
            notes.append(f"skipped {e}")
    if not loaded:
        raise UsageError(f"no envcheck reports found in {', '.join(paths)}")
    names = labels([str(f) for f, _ in loaded])
    return [(name, r) for name, (_, r) in zip(names, loaded, strict=True)], notes


def main(args: argparse.Namespace) -> int:
    from envcheck.compare.history import history
    from envcheck.render.documents import render_history
    from envcheck.render.escape import visible
    from envcheck.render.terminal.compare import print_history

    check_out(args.out)
    reports, notes = collect(args.paths)
    for note in notes:
        print(visible(f"envcheck history: note: {note}"), file=sys.stderr)
    h = history(reports)
    if args.format == "text":
        out = terminal_text(lambda console: print_history(console, h, args.lang), to_file=bool(args.out))
    else:
        out = render_history(h, args.format, args.lang)
    emit(out, args.out)
    return EXIT_OK
