"""tools/dev/render_all.py, the before/after comparison of every committed report's outputs: a report of
each kind (run, check, burn, node, fleet, cross-check, a diff, a history) renders in every output and both
languages, and its outputs (charts left out) are the committed digests.

Regenerate the digests after an intended change with ``ENVCHECK_UPDATE_GOLDEN=1`` and review the change
with ``tools/dev/render_all.py`` run before and after it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIGESTS = ROOT / "tests" / "golden" / "render_all.sha256"
SAMPLE = ("cpu_small.json", "node_x2.json", "fleet_2x.json", "2026-11-22_2139Z_vm_h200_check",
          "2026-11-28_1741Z_vm_2x-h200_burn_control-flip_bit", "2026-11-28_2045Z_vm_h200_run-speed",
          "2026-11-26_diff_h200_0456Z_vs_0459Z", "2026-11-22_history_h200")
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("charts_not_drawn")]


def _render_all():
    spec = importlib.util.spec_from_file_location("render_all", ROOT / "tools" / "dev" / "render_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digests(folder: Path) -> str:
    lines = []
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.suffix != ".svg":
            text = re.sub(r"<svg\b.*?</svg>", "<svg/>", p.read_text(encoding="utf-8"), flags=re.DOTALL)
            lines.append(f"{hashlib.sha256(text.encode()).hexdigest()}  {p.relative_to(folder)}")
    return "\n".join(lines) + "\n"


def test_a_report_of_each_kind_renders_in_every_output_and_language(tmp_path):
    assert _render_all().main([str(tmp_path), "--only", *SAMPLE]) == 0
    folders = sorted(p for kind in ("reports", "diff", "history") for p in (tmp_path / kind).glob("*"))
    assert len(folders) == len(SAMPLE)
    for folder in folders:
        outputs = {"md", "html", "100.txt", "150.txt"} | ({"junit.xml", "health"} if "reports" in str(folder) else set())
        for lang in ("en", "zh-CN"):
            for out in outputs:
                assert (folder / f"{lang}.{out}").stat().st_size > 0, f"{folder.name}: {lang}.{out}"
        # Translated, not the English again.
        assert (folder / "en.md").read_text() != (folder / "zh-CN.md").read_text()
    digests = _digests(tmp_path)
    if os.environ.get("ENVCHECK_UPDATE_GOLDEN") == "1":
        DIGESTS.write_text(digests, encoding="utf-8")
    assert digests == DIGESTS.read_text(encoding="utf-8")
