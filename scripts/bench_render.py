#!/usr/bin/env python3
"""Time ``envcheck render`` of full-suite reports and check the size of the HTML it writes.

    python scripts/bench_render.py [REPORT.json ...] [--repeat N] [--lang en|zh-CN]
                                   [--max-seconds 3] [--max-html-bytes 1000000]

Each repeat runs the command a user runs, ``python -m envcheck render REPORT --out TMP``, in a fresh
process (imports, JSON load, analysis, charts, Markdown and HTML, files written), so the figure is the
wall time a user waits. Prints one line per report (fastest and median of the repeats, the HTML
size and the number of chart files) and exits 1 when the median exceeds ``--max-seconds`` or the HTML
``--max-html-bytes``. Without REPORT, the committed full-suite reports under reports/.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = sorted(p for p in (ROOT / "reports").glob("*.json") if not p.stem.endswith("_check"))


def render_once(report: Path, out: Path, lang: str) -> float:
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "envcheck", "render", str(report), "--out", str(out), "--lang", lang],
                         cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f"bench_render: envcheck render {report} failed:\n{res.stderr}")
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="*", type=Path, default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--lang", default="en")
    ap.add_argument("--max-seconds", type=float, default=3.0)
    ap.add_argument("--max-html-bytes", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    ok = True
    for report in args.reports:
        times = []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeat):
                times.append(render_once(report, Path(tmp) / str(i), args.lang))
            out = Path(tmp) / "0"
            html = next(out.glob("*.html"))
            size = html.stat().st_size
            charts = len(list(out.glob("*_charts/*.svg")))
        median = statistics.median(times)
        within = median <= args.max_seconds and size <= args.max_html_bytes
        ok &= within
        print(f"{report.name}: render {min(times):.2f} s fastest, {median:.2f} s median of {len(times)}; "
              f"HTML {size} bytes, {charts} charts; {'ok' if within else 'OVER BUDGET'} "
              f"(budget {args.max_seconds:g} s, {args.max_html_bytes} bytes)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
