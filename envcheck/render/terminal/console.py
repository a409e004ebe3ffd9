"""The one console policy: a terminal's width and colours; in a pipe no ANSI codes, ASCII rules and a fixed width
(``COLUMNS``, else ``PIPE_WIDTH``). Below ``WIDE_FROM`` columns layouts drop columns and abbreviate, and a table
still too wide prints as several (``print_fitted``): no cell wraps at 100 columns or is cut at 80."""

from __future__ import annotations

import io
import os
import re
import sys
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

# A rule under the header and nothing else: columns are told apart by two spaces, so a row stays
# one line at 100 columns and a pipe gets plain ASCII.
RULE_UNDER_HEAD = box.Box("    \n    \n ── \n    \n    \n    \n    \n    \n")
ASCII_RULE_UNDER_HEAD = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)
PIPE_WIDTH = 120  # a pipe has no width: wide enough for a log line, narrow enough for a log viewer
WIDE_FROM = 130  # columns from which the wide layouts are used
# The colour of each status word, in every layout (checks, cases, node cells, burns, cross-checks).
STYLE = {"fail": "bold red", "error": "bold red", "warn": "yellow", "stopped": "yellow", "pass": "green", "skip": "dim",
         "muted": "dim"}


def _pipe_width() -> int:
    try:
        return max(40, int(os.environ.get("COLUMNS", ""))) or PIPE_WIDTH
    except ValueError:
        return PIPE_WIDTH


_TRAILING = re.compile(r"(?<![ \t])[ \t]+((?:\x1b\[[0-9;]*m)*)(?=\n)")  # from a run's first blank only


class _Trimmed:
    """A stream without the spaces rich pads lines with at their end (colour codes kept): no trailing whitespace."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_TRAILING.sub(r"\1", text))
        return len(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def make_console(file: IO[str] | None = None, width: int | None = None, terminal: bool | None = None) -> Console:
    """A Console for ``file`` (stdout by default). ``width``/``terminal`` override detection (tests, ``--out``)."""
    stream = file if file is not None else sys.stdout
    tty = bool(getattr(stream, "isatty", lambda: False)()) if terminal is None else terminal
    if width is None and not tty:
        width = _pipe_width()
    return Console(
        file=_Trimmed(stream),  # type: ignore[arg-type]
        force_terminal=tty,
        no_color=not tty or "NO_COLOR" in os.environ,
        color_system="auto" if tty else None,
        width=width,
        highlight=False,
        emoji=False,
        markup=True,
        soft_wrap=False,
    )


def capture(draw: Callable[[Console], None], *, width: int | None = None, terminal: bool = False) -> str:
    """What ``draw`` prints, as text: for ``--out FILE`` and tests."""
    buf = io.StringIO()
    console = make_console(buf, width=width or _pipe_width(), terminal=terminal)
    draw(console)
    return buf.getvalue()


def wide(console: Console) -> bool:
    return console.width >= WIDE_FROM


def table(console: Console, title: str | None = None, caption: str | None = None) -> Table:
    """The one table style: a rule under the header, no frame, two spaces between columns; ASCII in a pipe."""
    return Table(title=title, caption=caption, box=RULE_UNDER_HEAD if console.is_terminal else ASCII_RULE_UNDER_HEAD,
                 show_edge=False, pad_edge=False, collapse_padding=True, title_justify="left",
                 caption_justify="left", title_style="bold", caption_style="dim")


def _natural_width(console: Console, tab: Table) -> int:
    """How wide ``tab`` is with no cell cut (measured against an unbounded width)."""
    return Measurement.get(console, console.options.update_width(1 << 16), tab).maximum


def _columns(tab: Table, picked: Sequence[int], title: bool = True, caption: bool = True) -> Table:
    """The columns ``picked`` of ``tab`` as a table of its style, with its title and caption where asked (built
    through rich's public API: a copied Table would lean on its private fields)."""
    out = Table(title=tab.title if title else None, caption=tab.caption if caption else None, box=tab.box,
                show_edge=tab.show_edge, pad_edge=tab.pad_edge, collapse_padding=tab.collapse_padding,
                title_justify=tab.title_justify, caption_justify=tab.caption_justify, title_style=tab.title_style,
                caption_style=tab.caption_style)
    cells = [list(c.cells) for c in tab.columns]
    for i in picked:
        c = tab.columns[i]
        out.add_column(c.header, justify=c.justify, no_wrap=c.no_wrap, overflow=c.overflow, style=c.style)
    for r in range(tab.row_count):
        out.add_row(*(cells[i][r] for i in picked))
    return out


def print_fitted(console: Console, tab: Table, keep: int = 1) -> None:
    """Print ``tab`` without cutting a cell: wider than the console, as several tables of its columns, the first
    ``keep`` (what names a row) repeated in each. A number cut to "23.6 …" loses its unit; a second table does not."""
    if _natural_width(console, tab) <= console.width or len(tab.columns) <= keep + 1:
        console.print(tab)
        return
    head = list(range(keep))
    groups: list[list[int]] = [[]]
    for i in range(keep, len(tab.columns)):
        if groups[-1] and _natural_width(console, _columns(tab, head + groups[-1] + [i])) > console.width:
            groups.append([])
        groups[-1].append(i)
    for n, group in enumerate(groups):
        if n:
            console.print()
        console.print(_columns(tab, head + group, title=n == 0, caption=n == len(groups) - 1))


def print_rows(console: Console, heads: Sequence[str], rows: Iterable[Sequence[str]], right: int | Sequence[bool] = 1,
               title: str | None = None, caption: str | None = None, keep: int = 1, lead: str | None = None) -> None:
    """A table after a blank line (and ``lead``, a heading of its own line), fitted; ``right``: the columns set
    right, or the first of them (every one after it is too)."""
    tab = table(console, title=title, caption=caption)
    for i, head in enumerate(heads):
        at_right = i >= right if isinstance(right, int) else right[i]
        tab.add_column(head, justify="right" if at_right else "left", no_wrap=True)
    for row in rows:
        tab.add_row(*row)
    console.print()
    if lead:
        console.print(lead)
    print_fitted(console, tab, keep=keep)


_HEADED: weakref.WeakSet[Console] = weakref.WeakSet()


def heading(console: Console, text: str) -> None:
    """A section heading (markup: escape machine text), a blank line above unless nothing was printed before."""
    if console in _HEADED:
        console.print()
    _HEADED.add(console)
    console.print(f"[bold underline]{text}[/]")


def started(console: Console) -> None:
    """Something was printed: the next ``heading`` gets its blank line above."""
    _HEADED.add(console)


def styled(text: str, style: str) -> str:
    return f"[{style}]{text}[/]" if style and text else text


def print_written(console: Console, written: Sequence[Path]) -> None:
    """The files a command wrote, under their heading, each path on one line however narrow the terminal (a path
    folded by the console is a path the user cannot copy)."""
    from envcheck.render.escape import term
    from envcheck.render.i18n import t
    from envcheck.render.writing import written_lines

    if written:
        heading(console, t("term.report"))
        for line in written_lines(written):
            console.print(f"  {term(line)}", soft_wrap=True)


def bullets(console: Console, items: Sequence[tuple[str, str]]) -> None:
    """(mark, text) lines, each text wrapping under itself: a hanging indent, not a table cell."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for mark, text in items:
        grid.add_row(f" {mark}", text)
    console.print(grid)
