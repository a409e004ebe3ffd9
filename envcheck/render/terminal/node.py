"""A node run's and a fleet's terminal: the documents' sections (``render.node_view``), a table's detail columns
and second lines dropped below ``console.WIDE_FROM`` columns and an item/value table as a list."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from envcheck.analysis import Analysis
from envcheck.model import Report
from envcheck.render.escape import term
from envcheck.render.fleet_view import fleet_view
from envcheck.render.i18n import escaping, t
from envcheck.render.node_view import Cell, Line, Part, Section, Table, Tile
from envcheck.render.terminal.console import STYLE, bullets, heading, print_rows, print_written, styled, wide

MARK = {"fail": "[bold red]✗[/]", "warn": "[yellow]![/]", "pass": "[green]✓[/]"}


def line_items(console: Console, items: Sequence[Line]) -> None:
    bullets(console, [(MARK.get(x.level, "-"), x.text) for x in items])


def print_tiles(console: Console, tiles: Sequence[Tile]) -> None:
    bullets(console, [(MARK.get(x.status or "", "-"), f"{x.label}: [bold]{x.value}[/]"
                       + (f" [dim]({'; '.join(x.lines)})[/]" if x.lines else "")) for x in tiles])


def _cell(c: Cell, subs: bool) -> str:
    text = styled(c.text, STYLE.get(c.status, ""))
    return f"{text} [dim]{c.sub}[/]" if subs and c.sub else text


def print_table(console: Console, tbl: Table) -> None:
    is_wide, title = wide(console), f"[bold]{tbl.title}[/]" if tbl.title else None
    if tbl.layout == "facts":
        if title:
            console.print()
            console.print(title)
        bullets(console, [("-", f"{row[0].text}: {_cell(row[1], True)}") for row in tbl.rows])
    else:
        keep = [i for i in range(len(tbl.cols)) if is_wide or i not in tbl.detail]
        subs = is_wide or tbl.subs == "always"
        print_rows(console, [tbl.cols[i] for i in keep], [[_cell(row[i], subs) for i in keep] for row in tbl.rows],
                   [tbl.right[i] for i in keep], lead=title)
    line_items(console, tbl.notes)


def print_part(console: Console, part: Part) -> None:
    if part.title:
        console.print()
        console.print(f"[bold underline]{part.title}[/]")
    line_items(console, part.lines)
    for tbl in part.tables:
        print_table(console, tbl)


def print_section(console: Console, sec: Section) -> None:
    title = sec.title
    if sec.status:
        style = STYLE[sec.status if sec.status in ("pass", "fail") else "warn"]
        title += " " + styled(t(f"node.status.{sec.status}").upper(), style)
    heading(console, title)
    line_items(console, sec.lines)
    for part in sec.parts:
        print_part(console, part)


def print_fleet(console: Console, report: Report, analysis: Analysis, written: Sequence[Path] = (),
                full: bool = False) -> None:
    """What ``envcheck fleet``'s rank 0 prints: the verdicts and their reasons, the ranks, the collectives across
    nodes, and per node its verdict, problems and GPUs (``full``: every part of every node, as the documents)."""
    with escaping(term):
        v = fleet_view(report, analysis)
        heading(console, v.title)
        console.print(f"[dim]{v.machine}[/]")
        print_tiles(console, v.tiles)
        nodes = [sec for sec in v.sections if sec.id.startswith("node-")]
        for sec in v.sections:
            gpus = tuple(p for p in sec.parts if p.id.endswith("gpus"))
            print_section(console, sec if full or sec not in nodes else replace(sec, parts=gpus))
        if nodes and not full:
            console.print()
            console.print(f"[dim]{t('fleet.node.details')}[/]")
        print_written(console, written)
