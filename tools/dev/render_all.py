#!/usr/bin/env python3
"""Render every committed report in every output and language into one folder, deterministically.

    python tools/dev/render_all.py OUT [--only SUBSTRING ...] [--jobs N]

Reads each report under evidence/, tests/golden/ and examples/ (run, check, burn, node, fleet) and the
diffs and histories whose inputs evidence holds (the reports named in the "Reports" table of a committed
diff or history page), and writes, per report and language (en, zh-CN): the Markdown with its charts, the
HTML, the terminal summary at 100 and 150 columns without colour (both layouts), JUnit, the health line and
drain reason, and once the Prometheus textfile. Times and local paths are normalised as tests/golden does,
so two runs of one tree give the same bytes, and ``diff -r BEFORE AFTER`` shows what a change does to what
users see.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGS = ("en", "zh-CN")
WIDTHS = (100, 150)
CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
LABEL = re.compile(r"^\| ((?:[^|\\]|\\.)+?\.json(?:\.gz)?)(?: \([^)]*\))? \|", re.M)


def normalise(text: str) -> str:
    return CREATED.sub("YYYY-MM-DDTHH:MM:SSZ", text).replace(str(ROOT), "<root>")


def reports() -> list[Path]:
    found = [*sorted((ROOT / "evidence").glob("*.json.gz")), *sorted((ROOT / "evidence").glob("*.json")),
             *sorted((ROOT / "tests" / "golden").glob("*.json")), *sorted((ROOT / "examples").rglob("*.json*"))]
    return [p for p in found if b"envcheck-report" in _text(p)[:200].encode()]


def _text(p: Path) -> str:
    import gzip

    raw = p.read_bytes()
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")


def comparisons() -> list[tuple[str, str, list[Path]]]:
    """(name, diff|history, its input reports) of every committed diff or history page whose inputs are all in
    evidence/."""
    have = {p.name.removesuffix(".gz"): p for p in (ROOT / "evidence").glob("*.json*")}
    out = []
    for page in sorted([*(ROOT / "evidence").glob("*.md"), *(ROOT / "examples").rglob("*.md")]):
        kind = "history" if "history" in page.name else "diff" if "diff" in page.name else None
        if kind is None or page.name.endswith(".zh-CN.md"):
            continue
        labels = list(dict.fromkeys(m.replace("\\", "").split(":")[0] for m in LABEL.findall(page.read_text())))
        inputs = [have[x.removesuffix(".gz")] for x in labels if x.removesuffix(".gz") in have]
        if len(labels) >= (2 if kind == "diff" else 1) and len(inputs) == len(labels) \
                and (kind, inputs) not in [(k, i) for _, k, i in out]:
            out.append((page.stem, kind, inputs))
    # No committed page compares fleets: the evidence's fleet reports against one another, and over time.
    fleets = [p for p in sorted(have.values()) if "fleet" in p.name and b'"fleet"' in _text(p)[:400].encode()]
    if len(fleets) > 1:
        out += [("fleets", "diff", fleets), ("fleets", "history", fleets)]
    return out


def _write(folder: Path, name: str, text: str | bytes) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(normalise(text), encoding="utf-8")


def _terminal(draw) -> dict[int, str]:
    from envcheck.render.terminal.console import capture

    return {w: capture(draw, width=w) for w in WIDTHS}


def render_report(path: Path, out: Path) -> str:
    from envcheck.analysis import analyse
    from envcheck.model import load
    from envcheck.render.health import drain_reason, health_line
    from envcheck.render.i18n import language
    from envcheck.render.prometheus import prometheus_text
    from envcheck.render.writing import document_set

    report = load(path)
    analysis = analyse(report)
    folder = out / "reports" / path.name.removesuffix(".gz").removesuffix(".json")
    _write(folder, "report.prom", prometheus_text(analysis))
    for lang in LANGS:
        with language(lang):
            files = document_set(report, analysis, path, ["md", "html", "junit"], out_dir=folder)
            for p, text in files.files.items():
                _write(folder, f"{lang}{''.join(p.suffixes[-2:]) if p.name.endswith('.junit.xml') else p.suffix}", text)
            for charts in files.folders.values():
                for name, body in sorted(charts.items()):
                    _write(folder, f"{lang}_charts/{name}", body if isinstance(body, (str, bytes)) else bytes(body))
            line, status = health_line(analysis)
            _write(folder, f"{lang}.health", f"{status} {line}\n{drain_reason(analysis)}\n")
            for w, text in _terminal(lambda c: _print_report(c, report, analysis)).items():
                _write(folder, f"{lang}.{w}.txt", text)
    return str(path.name)


def _print_report(console, report, analysis) -> None:
    """What the command that wrote the report prints about it (run, bench and node runs, fleet, burn, check)."""
    if report.kind == "fleet":
        from envcheck.render.terminal.crosscheck import print_crosscheck
        from envcheck.render.terminal.node import print_fleet

        print_fleet(console, report, analysis, ())
        for host, cross in analysis.fleet_crosschecks:
            print_crosscheck(console, cross, host)
    elif report.kind == "burn":
        from envcheck.render.terminal.burn import print_burn

        print_burn(console, analysis.burn)
    elif report.kind in ("check", "probe"):
        from envcheck.render.terminal.checks import print_checks
        from envcheck.render.terminal.environment import print_environment

        print_environment(console, report.environment, replayed=report.replayed_from is not None)
        if report.kind == "check":
            print_checks(console, report.checks, report.environment.probe_s)
    else:
        from envcheck.render.terminal.bench import print_run

        print_run(console, report, analysis)
        if analysis.crosscheck is not None:
            from envcheck.render.terminal.crosscheck import print_crosscheck

            print_crosscheck(console, analysis.crosscheck)
        if analysis.burn is not None:
            from envcheck.render.terminal.burn import print_burn

            print_burn(console, analysis.burn)


def render_comparison(name: str, kind: str, inputs: list[Path], out: Path) -> str:
    from envcheck.commands.diff import load_files
    from envcheck.commands.history import collect
    from envcheck.compare.diff import diff_analysed, diff_nodes
    from envcheck.compare.history import histories
    from envcheck.render.documents import render_diff, render_histories
    from envcheck.render.i18n import language
    from envcheck.render.terminal.compare import print_diff, print_history

    folder = out / kind / name
    if kind == "diff":
        files = load_files([str(p) for p in inputs])
        per_file = [nodes for nodes, _ in files]
        fleets = any(n.fleet for nodes in per_file for n, _ in nodes)
        d = (diff_nodes(per_file, [w for _, w in files]) if fleets and len(per_file) > 1
             else diff_analysed([(n.label, a) for nodes in per_file for n, a in nodes]))
        for lang in LANGS:
            with language(lang):
                for fmt in ("md", "html"):
                    _write(folder, f"{lang}.{fmt}", render_diff(d, fmt))
                for w, text in _terminal(lambda c: print_diff(c, d)).items():
                    _write(folder, f"{lang}.{w}.txt", text)
    else:
        reports, left_out = collect([str(p) for p in inputs])
        hs = histories(reports, left_out).machines
        for lang in LANGS:
            with language(lang):
                for fmt in ("md", "html"):
                    _write(folder, f"{lang}.{fmt}", render_histories(hs, fmt))
                for w, text in _terminal(lambda c: [print_history(c, h) for h in hs]).items():
                    _write(folder, f"{lang}.{w}.txt", text)
    return f"{kind} {name}"


def _run(job: tuple) -> str:
    try:
        return job[0](*job[1:])
    except Exception as e:  # noqa: BLE001 -- one failed render is reported, the others go on
        import traceback

        buf = io.StringIO()
        traceback.print_exc(file=buf)
        return f"FAILED {job[1]}: {type(e).__name__}: {e}\n{buf.getvalue()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", nargs="*", default=None, help="render only inputs whose name contains one of these")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))

    def wanted(name: str) -> bool:
        return not args.only or any(s in name for s in args.only)

    jobs: list[tuple] = [(render_report, p, args.out) for p in reports() if wanted(p.name)]
    jobs += [(render_comparison, n, k, i, args.out) for n, k, i in comparisons() if wanted(n)]
    failed = 0
    pool = ProcessPoolExecutor(args.jobs) if args.jobs > 1 else None
    for line in (pool.map(_run, jobs) if pool else map(_run, jobs)):
        failed += line.startswith("FAILED")
        print(line, flush=True)
    if pool:
        pool.shutdown()
    print(f"{len(jobs)} rendered into {args.out}, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
