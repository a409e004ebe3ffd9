"""``envcheck diff A.json B.json [C.json ...]``: every report against the first."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.commands import check_out, tell, write_out
from envcheck.commands.options import DiffOptions
from envcheck.errors import EXIT_FAIL, EXIT_NOTHING_COMPARED, EXIT_OK, UsageError
from envcheck.model import Report
from envcheck.render.i18n import t

if TYPE_CHECKING:
    from rich.console import Console

    from envcheck.analysis import Analysis
    from envcheck.compare.diff import NodeReport, NodeSide


def labels(paths: list[str]) -> list[str]:
    """File names as row labels; the paths as given when two files share a name."""
    names = [Path(p).name for p in paths]
    return names if len(set(names)) == len(names) else list(paths)


def emit(text: str, out: str | None) -> None:
    """Print ``text`` or write it to a new file ``out``."""
    if not out:
        sys.stdout.write(text)
        return
    path = write_out(out, text)
    tell(t("cli.wrote", path=path))


def terminal_text(draw: Callable[[Console], None], *, to_file: bool) -> str:
    """What ``draw`` prints: the terminal's width and colours on a tty without ``--out``, else plain."""
    from envcheck.render.terminal.console import capture

    tty = not to_file and sys.stdout.isatty()
    if tty:
        import shutil

        return capture(draw, width=shutil.get_terminal_size((100, 40)).columns, terminal=True)
    return capture(draw)


def per_node(label: str, report: Report) -> list[tuple[str, Report]]:
    """A fleet report as one report per node (``label:host``); any other report as it is."""
    from envcheck.compare.diff import nodes_of

    return [(n.label, n.report) for n in nodes_of(label, report)]


def on_gpu(label: str, report: Report, index: int | None) -> Report:
    """The report as diff compares it: with ``--gpu N`` only GPU N's suite, else as it is."""
    if index is None:
        return report
    cuda = [b for b in report.benches if b.device.backend == "cuda"]
    chosen = [b for b in cuda if b.device.index == index]
    if not chosen:
        have = sorted({b.device.index for b in cuda if b.device.index is not None})
        raise UsageError(f"error.diff_gpu{'' if have else '_none'}", index=index, label=label, have=have)
    return dataclasses.replace(report, benches=(chosen[0],), node=None)


def several_gpus(analysed: list[tuple[str, Analysis]]) -> str | None:
    """The note that without ``--gpu`` only each report's first GPU is compared, when one holds several."""
    many = [(label, len(a.report.benches)) for label, a in analysed if len(a.report.benches) > 1]
    if not many:
        return None
    (label, n), more = many[0], len(many) - 1
    return t(f"diff.cli.several_gpus{'.more' if more else ''}", label=label, count=n, more=more)


def load_files(paths: list[str], gpu: int | None = None
               ) -> list[tuple[list[tuple[NodeReport, Analysis]], tuple[str, NodeSide | None]]]:
    """Per file, (node, analysis) of each of its nodes (one for a report that is not a fleet's; ``gpu``: that GPU's
    suite of each), and (label, its collectives across the fleet's nodes: None unless a fleet ran them)."""
    from envcheck.analysis import analyse
    from envcheck.compare.diff import nodes_of, world_of
    from envcheck.model import load
    from envcheck.model.codec import VERDICT_KINDS

    out = []
    for label, p in zip(labels(paths), paths, strict=True):
        report = load(p, VERDICT_KINDS)
        nodes = nodes_of(label, report)
        out.append(([(n, analyse(on_gpu(n.label, n.report, gpu))) for n in nodes], (label, world_of(report))))
    return out


def main(args: DiffOptions) -> int:
    from envcheck.compare.diff import diff_analysed, diff_nodes
    from envcheck.render.documents import render_diff
    from envcheck.render.terminal.compare import print_diff

    check_out(args.out)
    gpu = args.gpu
    files = load_files(args.reports, gpu)
    per_file = [nodes for nodes, _ in files]
    analysed = [(n.label, a) for nodes in per_file for n, a in nodes]
    if len(analysed) < 2:
        raise UsageError("error.diff_two")
    fleets = any(n.fleet for nodes in per_file for n, _ in nodes)
    # Fleets: each node against the baseline's node that is the same machine, never by position.
    d = diff_nodes(per_file, [w for _, w in files]) if fleets and len(per_file) > 1 else diff_analysed(analysed)
    note = several_gpus(analysed) if gpu is None else None
    if note:
        tell(t("diff.cli.note", note=note))
    if args.format == "json":
        from envcheck.compare.export import to_json
        from envcheck.render.escape import json_text

        out = json_text(to_json(d, args.fail_on_regression))
    elif args.format == "text":
        out = terminal_text(lambda console: print_diff(console, d), to_file=bool(args.out))
    else:
        out = render_diff(d, args.format)
    emit(out, args.out)
    pct = args.fail_on_regression
    if pct is not None:
        from envcheck.render import fmt
        from envcheck.render.compare_view import node_row_name

        cases = [(c.name, c, cmp.other.label, cmp.base.label) for cmp, c in d.regressions(pct)]
        nodes = [(node_row_name(r), r.change, other, base) for base, other, r in d.node_regressions(pct)]
        for rows, what in ((cases, "case"), (nodes, "node")):
            for name, r, other, base in rows:
                tell(t(f"diff.cli.regression.{what}", name=name, ratio=fmt.ratio(r.ratio), other=other,
                       interval=fmt.interval(r.low, r.high), base=base))
            if rows:
                print(t(f"diff.cli.slower.{what}", count=len(rows), pct=f"{pct:g}"), file=sys.stderr)
        if cases or nodes:
            return EXIT_FAIL
        if not d.judged:
            print(t("diff.cli.nothing_compared"), file=sys.stderr)
            return EXIT_NOTHING_COMPARED
    return EXIT_OK
