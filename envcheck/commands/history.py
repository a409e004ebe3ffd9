"""``envcheck history DIR|FILES...``: each machine's reports over time."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.commands import check_out
from envcheck.commands.diff import emit, labels, per_node, terminal_text
from envcheck.commands.options import HistoryOptions
from envcheck.errors import EXIT_OK, UsageError
from envcheck.files import REPORT_SUFFIXES
from envcheck.render.i18n import t

if TYPE_CHECKING:
    from envcheck.compare.history import Histories, LeftOut
    from envcheck.model import Report


SNAPSHOT = "envcheck-snapshot-"  # envcheck snapshot's default file names (commands/snapshot.py)


def _folder(p: Path) -> list[Path]:
    """Every report entry of a folder but snapshots; the loader refuses a pipe or a device so named."""
    try:
        return sorted(q for q in p.iterdir() if q.name.endswith(REPORT_SUFFIXES) and not q.name.startswith(SNAPSHOT))
    except OSError as e:
        raise UsageError("error.cannot_list", path=p, error=e.strerror or e) from None


def collect(paths: list[str]) -> tuple[list[tuple[str, Report]], list[LeftOut]]:
    """Reports from folders and files, a fleet report one per node, and what was left out: in a folder what is not a
    readable report is left out with its one-line error; a file named must be one."""
    from envcheck.compare.history import UNREADABLE, LeftOut
    from envcheck.model import ReportError, load

    files: list[Path] = []
    explicit: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(_folder(p))
        else:
            files.append(p)
            explicit.add(p)
    left_out: list[LeftOut] = []
    loaded = []
    unique: dict[str, Path] = {}  # a file named twice (or through a link) read once
    for f in files:
        unique.setdefault(os.path.realpath(f), f)
    for f in unique.values():
        try:
            loaded.append((f, load(f)))
        except ReportError as e:
            if f in explicit:
                raise
            left_out.append(LeftOut(f.name, UNREADABLE, str(e)))
    if not loaded:
        raise UsageError("error.no_reports", paths=paths)
    names = labels([str(f) for f, _ in loaded])
    return [nr for name, (_, r) in zip(names, loaded, strict=True) for nr in per_node(name, r)], left_out


def _note(x: LeftOut) -> str:
    from envcheck.compare.history import NO_BENCHMARK

    if x.reason == NO_BENCHMARK:
        return t("history.note.left_out", label=x.label, kind=x.detail)
    return t("history.note.skipped", detail=x.detail)


def _tell(text: str) -> None:
    """A note on stderr, wrapped to the terminal's width at spaces only, so a path or a file name stays whole."""
    import textwrap

    from envcheck.render.escape import visible

    try:
        width = int(os.environ.get("COLUMNS", "")) or os.get_terminal_size(sys.stderr.fileno()).columns
    except (ValueError, OSError):
        width = 100
    lines = textwrap.wrap(visible(text), width=max(width, 20), subsequent_indent="  ", break_long_words=False,
                          break_on_hyphens=False)
    print("\n".join(lines), file=sys.stderr)


def render(hs: Histories, fmt: str, to_file: bool) -> str:
    """Every machine's history in one output: a section per machine."""
    if fmt == "text":
        from envcheck.render.terminal.compare import print_history

        def draw(console: object) -> None:
            for h in hs.machines:
                print_history(console, h)  # type: ignore[arg-type]

        return terminal_text(draw, to_file=to_file)
    from envcheck.render.documents import render_histories

    return render_histories(hs.machines, fmt)


def main(args: HistoryOptions) -> int:
    from envcheck.compare.history import histories

    check_out(args.out)
    paths = args.paths
    if not paths:
        from envcheck.userdirs import reports_dir

        paths = [str(reports_dir())]
    reports, left_out = collect(paths)
    hs = histories(reports, left_out)
    for x in hs.left_out:
        _tell(t("history.note", note=_note(x)))
    if not hs.machines:
        raise UsageError("error.no_bench_results", paths=paths)
    if len(hs.machines) > 1:
        _tell(t("history.note", note=t("history.note.machines", count=len(hs.machines))))
    emit(render(hs, args.format, bool(args.out)), args.out)
    return EXIT_OK
