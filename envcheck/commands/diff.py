"""``envcheck diff A.json B.json [C.json ...]``: every report against the first."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envcheck.errors import EXIT_FAIL, EXIT_OK, UsageError


def labels(paths: list[str]) -> list[str]:
    """File names as row labels; the paths as given when two files share a name."""
    names = [Path(p).name for p in paths]
    return names if len(set(names)) == len(names) else list(paths)


def check_out(out: str | None) -> None:
    """Refuse an existing --out file before any work is done (the write itself re-checks atomically)."""
    if out and Path(out).exists():
        raise UsageError(f"{out} already exists: envcheck never overwrites a file; choose another --out")


def emit(text: str, out: str | None) -> None:
    """Print ``text`` or write it to a new file ``out``."""
    if not out:
        sys.stdout.write(text)
        return
    from envcheck.model import write_new

    try:
        path = write_new(out, text)
    except FileExistsError:
        raise UsageError(f"{out} already exists: envcheck never overwrites a file; choose another --out") from None
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror or e}") from None
    print(f"wrote {path}", file=sys.stderr)


def terminal_text(draw: Callable[[Any], None], *, to_file: bool) -> str:
    """What ``draw`` prints, captured: colours only on a real terminal, a wide page otherwise."""
    import io

    from rich.console import Console

    tty = not to_file and sys.stdout.isatty()
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=tty, no_color=not tty, width=None if tty else 160,
                      highlight=False, soft_wrap=False)
    if tty:
        import shutil

        console.width = shutil.get_terminal_size((120, 40)).columns
    draw(console)
    return buf.getvalue()


def load_analysed(paths: list[str]) -> list[tuple[str, Any]]:
    """(label, analysis) of each report, loaded and analysed once."""
    from envcheck.analysis import analyse
    from envcheck.model import load

    return [(label, analyse(load(p))) for label, p in zip(labels(paths), paths, strict=True)]


def main(args: argparse.Namespace) -> int:
    from envcheck.compare.diff import diff_analysed

    if len(args.reports) < 2:
        raise UsageError("diff needs at least two reports: a baseline and one or more to compare with it")
    check_out(args.out)
    d = diff_analysed(load_analysed(args.reports))
    if args.format == "json":
        from envcheck.compare.export import to_json

        out = to_json(d, args.fail_on_regression)
    elif args.format == "text":
        from envcheck.compare import text

        out = terminal_text(lambda console: text.print_diff(console, d, args.lang), to_file=bool(args.out))
    else:
        from envcheck.compare import document

        out = document.render_diff(d, args.format, args.lang)
    emit(out, args.out)
    if args.fail_on_regression is not None:
        regressions = d.regressions(args.fail_on_regression)
        for cmp, c in regressions:
            print(f"envcheck diff: regression: {c.name}: {c.ratio:.3f}x the time "
                  f"[{c.low:.3f}, {c.high:.3f}, run-to-run noise included] in {cmp.other.label} vs {cmp.base.label}",
                  file=sys.stderr)
        if regressions:
            print(f"envcheck diff: {len(regressions)} case(s) slower by more than {args.fail_on_regression:g}%",
                  file=sys.stderr)
            return EXIT_FAIL
    return EXIT_OK
