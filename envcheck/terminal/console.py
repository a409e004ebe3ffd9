"""The rich Console envcheck prints with: colors on a terminal, plain text in a pipe."""

from __future__ import annotations

import os
import sys
from typing import IO

from rich import box
from rich.console import Console

PIPE_WIDTH = 120  # a pipe has no width: wide enough for one check per line, narrow enough for a log viewer


def make_console(file: IO[str] | None = None) -> Console:
    """A Console for ``file`` (stdout by default).

    Not a TTY (a pipe, a file, CI logs): no ANSI codes, no emoji or markup guessing in
    machine text, and a fixed width (``COLUMNS`` when set) so lines do not wrap at 80.
    """
    stream = file or sys.stdout
    tty = bool(getattr(stream, "isatty", lambda: False)())
    width = None
    if not tty:
        try:
            width = int(os.environ.get("COLUMNS", "")) or PIPE_WIDTH
        except ValueError:
            width = PIPE_WIDTH
    return Console(
        file=stream,
        force_terminal=tty,
        no_color=not tty or "NO_COLOR" in os.environ,
        color_system="auto" if tty else None,
        width=width,
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )


def table_box(console: Console) -> box.Box:
    """Unicode rules on a terminal, ASCII in a pipe (logs and old terminals read it)."""
    return box.SIMPLE_HEAD if console.is_terminal else box.ASCII2
