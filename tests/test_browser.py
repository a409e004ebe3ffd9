"""The HTML report in a real browser: headless Chromium renders it at laptop and phone widths.

Skipped where no Chromium is installed (``apt-get install -y chromium``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from factories import report

from envcheck.render import render_html

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "screenshot_report.sh"
BROWSER = os.environ.get("CHROMIUM") or next(
    (b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(BROWSER is None, reason="no Chromium on PATH (apt-get install -y chromium)"),
]


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def test_screenshots_at_laptop_and_phone_width(tmp_path):
    html = tmp_path / "report.html"
    html.write_text(render_html(report()), encoding="utf-8")
    res = subprocess.run(["bash", str(SCRIPT), str(html), str(tmp_path / "shots")], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    desktop, phone = tmp_path / "shots" / "report.desktop.png", tmp_path / "shots" / "report.phone.png"
    assert png_size(desktop) == (1280, 2400)
    assert png_size(phone) == (390, 2400)
    # a blank page compresses to almost nothing; a rendered report does not
    assert desktop.stat().st_size > 50_000 and phone.stat().st_size > 30_000


def test_script_usage_errors(tmp_path):
    res = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "missing.html")], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 2 and "no such file" in res.stderr
