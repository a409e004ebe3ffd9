#!/usr/bin/env python3
"""Time ``envcheck render`` of full-suite reports and check the size of the HTML it writes.

    python tools/dev/bench_render.py [REPORT.json ...] [--repeat N] [--lang en|zh-CN]
                                   [--max-seconds S] [--max-html-bytes 1000000]

Each repeat runs the command a user runs, ``python -m envcheck render REPORT --out TMP``, in a fresh
process (imports, JSON load, analysis, matplotlib charts, Markdown and HTML, files written), so the
figure is the wall time a user waits; the CPU seconds of the process and its chart workers are printed
beside it (on a shared machine the wall time also measures the neighbours). Prints one line per report
(fastest, median and slowest of the repeats, the HTML size and the number of chart files) and exits 1
when the median wall time exceeds the report's budget or the HTML ``--max-html-bytes``.

Without REPORT, the budgets of issue 21 on a 2-core machine: the full single-GPU report in 4 s, the
2-GPU node report in 8 s. ``--max-seconds`` sets one budget for every report named.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = {ROOT / "evidence" / "2026-11-22_2139Z_vm_h200.json.gz": 4.0,
           ROOT / "evidence" / "2026-11-22_2326Z_vm_2x-h200_node.json.gz": 8.0}


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def render_once(report: Path, out: Path, lang: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one render in a fresh process."""
    cpu = _children_cpu()
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "envcheck", "render", str(report), "--out", str(out), "--lang", lang],
                         cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f"bench_render: envcheck render {report} failed:\n{res.stderr}")
    return took, _children_cpu() - cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="*", type=Path, default=list(BUDGETS))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--lang", default="en")
    ap.add_argument("--max-seconds", type=float, default=None)
    ap.add_argument("--max-html-bytes", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    ok = True
    for report in args.reports:
        budget = args.max_seconds if args.max_seconds is not None else BUDGETS.get(report.resolve(), 4.0)
        times, cpus = [], []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeat):
                wall, cpu = render_once(report, Path(tmp) / str(i), args.lang)
                times.append(wall)
                cpus.append(cpu)
            out = Path(tmp) / "0"
            html = next(out.glob("*.html"))
            size = html.stat().st_size
            charts = len(list(out.glob("*_charts/*.svg")))
        median = statistics.median(times)
        within = median <= budget and size <= args.max_html_bytes
        ok &= within
        print(f"{report.name}: render {min(times):.2f} / {median:.2f} / {max(times):.2f} s wall (min / median / max "
              f"of {len(times)}), {statistics.median(cpus):.2f} s CPU median; HTML {size} bytes, {charts} charts; "
              f"{'ok' if within else 'OVER BUDGET'} (budget {budget:g} s, {args.max_html_bytes} bytes)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
