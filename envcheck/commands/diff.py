"""``envcheck diff A.json B.json [C.json ...]``: every report against the first."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envcheck.errors import EXIT_FAIL, EXIT_OK, UsageError
from envcheck.model import Report


def labels(paths: list[str]) -> list[str]:
    """File names as row labels; the paths as given when two files share a name."""
    names = [Path(p).name for p in paths]
    return names if len(set(names)) == len(names) else list(paths)


def check_out(out: str | None) -> None:
    """Refuse a bad --out before any work is done: a taken name (the write itself re-checks atomically),
    a folder that is a file, cannot be made or written."""
    if not out:
        return
    from envcheck.destination import DestinationError, prepare_destination

    try:
        prepare_destination(Path(out))
    except FileExistsError:
        raise UsageError(f"{out} already exists: envcheck never overwrites a file; choose another --out") from None
    except DestinationError as e:
        raise UsageError(f"--out: {e}") from None


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
    """What ``draw`` prints, captured under the one console policy: a terminal's width and colours
    when stdout is one and no ``--out`` was given, else plain text at the pipe width."""
    from envcheck.render.terminal.console import capture

    tty = not to_file and sys.stdout.isatty()
    if tty:
        import shutil

        return capture(draw, width=shutil.get_terminal_size((100, 40)).columns, terminal=True)
    return capture(draw)


def per_node(label: str, report: Report) -> list[tuple[str, Report]]:
    """A fleet report as one report per node (``label:host``), each shaped like that node's own
    ``envcheck run --gpus`` report; any other report as it is."""
    if report.fleet is None:
        return [(label, report)]
    out = []
    for node in report.fleet.nodes:
        out.append((f"{label}:{node.host}", dataclasses.replace(
            report, kind="run", host=node.host, environment=node.environment or report.environment,
            checks=node.checks, benches=node.benches, node=node.node, fleet=None)))
    return out


def on_gpu(label: str, report: Report, index: int | None) -> Report:
    """The report as diff compares it: with ``--gpu N`` only GPU N's suite (a node report, or a fleet
    report's node, holds one per GPU), else as it is (its first suite is compared)."""
    if index is None:
        return report
    cuda = [b for b in report.benches if b.device.backend == "cuda"]
    chosen = [b for b in cuda if b.device.index == index]
    if not chosen:
        have = sorted({b.device.index for b in cuda if b.device.index is not None})
        where = f"its GPUs: {', '.join(map(str, have))}" if have else "it ran on no GPU"
        raise UsageError(f"--gpu {index}: {label} has no results of GPU {index} ({where})")
    return dataclasses.replace(report, benches=(chosen[0],), node=None)


def several_gpus(analysed: list[tuple[str, Any]]) -> str | None:
    """The note that a comparison without ``--gpu`` reads each report's first GPU only, when a report
    holds the suites of several."""
    many = [(label, len(a.report.benches)) for label, a in analysed if len(a.report.benches) > 1]
    if not many:
        return None
    label, n = many[0]
    more = f" (and {len(many) - 1} more reports)" if len(many) > 1 else ""
    return (f"{label} holds the suites of {n} GPUs{more}; each report's first is compared: --gpu N compares "
            "GPU N of each")


def load_analysed(paths: list[str], gpu: int | None = None) -> list[tuple[str, Any]]:
    """(label, analysis) of each report, loaded and analysed once; a fleet report gives one per node;
    ``gpu``: compare that GPU's suite of each (``on_gpu``)."""
    from envcheck.analysis import analyse
    from envcheck.model import load

    out = []
    for label, p in zip(labels(paths), paths, strict=True):
        out += [(name, analyse(on_gpu(name, r, gpu))) for name, r in per_node(label, load(p))]
    return out


def main(args: argparse.Namespace) -> int:
    from envcheck.compare.diff import diff_analysed
    from envcheck.render.documents import render_diff
    from envcheck.render.terminal.compare import print_diff

    check_out(args.out)
    gpu = getattr(args, "gpu", None)
    analysed = load_analysed(args.reports, gpu)
    if len(analysed) < 2:
        raise UsageError("diff needs at least two reports (a fleet report counts one per node): a baseline "
                         "and one or more to compare with it")
    d = diff_analysed(analysed)
    note = several_gpus(analysed) if gpu is None else None
    if note:
        from envcheck.render.escape import visible

        print(visible(f"envcheck diff: note: {note}"), file=sys.stderr)
    if args.format == "json":
        from envcheck.compare.export import to_json
        from envcheck.render.escape import json_text

        out = json_text(to_json(d, args.fail_on_regression))
    elif args.format == "text":
        out = terminal_text(lambda console: print_diff(console, d, args.lang), to_file=bool(args.out))
    else:
        out = render_diff(d, args.format, args.lang)
    emit(out, args.out)
    if args.fail_on_regression is not None:
        regressions = d.regressions(args.fail_on_regression)
        from envcheck.render import fmt
        from envcheck.render.escape import visible

        for cmp, c in regressions:
            print(visible(f"envcheck diff: regression: {c.name}: {fmt.ratio(c.ratio)} the time "
                          f"{fmt.interval(c.low, c.high)} (run-to-run noise included) in {cmp.other.label} vs "
                          f"{cmp.base.label}"), file=sys.stderr)
        if regressions:
            print(f"envcheck diff: {len(regressions)} case(s) slower by more than {args.fail_on_regression:g}%",
                  file=sys.stderr)
            return EXIT_FAIL
    return EXIT_OK
