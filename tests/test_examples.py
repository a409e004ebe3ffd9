"""The example reports under examples/reports, rendered by today's code: each is made again from its
committed evidence and must read the same, so they never go stale.

Regenerate after an intended change with ``ENVCHECK_UPDATE_EXAMPLES=1 pytest tests/test_examples.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from in_lang import document_set

from envcheck import cli
from envcheck.model import load

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "evidence"
EXAMPLES = ROOT / "examples" / "reports"
UPDATE = os.environ.get("ENVCHECK_UPDATE_EXAMPLES") == "1"
# One of each kind a user opens: a GPU's full suite, a node, a fleet that lost a rank, a burn, a user's
# kernels; each in English and Chinese.
REPORTS = ("2026-11-26_0456Z_vm_h200", "2026-11-26_1508Z_vm_2x-h100_node", "2026-11-25_2218Z_fleet-2x_vm_rank-killed",
           "2026-11-28_1735Z_vm_4x-h200_burn_healthy", "2026-11-26_0810Z_vm_h100_userbench_softmax-wsum")
DIFF = ("2026-11-26_0456Z_vm_h200", "2026-11-26_0459Z_vm_h200")  # two runs back to back on one H200
LANGS = ("en", "zh-CN")

pytestmark = pytest.mark.slow  # every chart of five reports drawn twice


def _same(path: Path, content: str | bytes) -> None:
    data = content.encode("utf-8") if isinstance(content, str) else content
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return
    assert path.exists(), f"{path.relative_to(ROOT)} is missing: ENVCHECK_UPDATE_EXAMPLES=1 makes it"
    assert path.read_bytes() == data, f"{path.relative_to(ROOT)} is stale: ENVCHECK_UPDATE_EXAMPLES=1 makes it anew"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name", REPORTS)
def test_an_example_report_is_what_today_s_code_renders_from_its_evidence(name, lang):
    source = EVIDENCE / f"{name}.json.gz"
    files = document_set(load(source), source, ["md"], lang, out_dir=EXAMPLES)
    for path, content in files.files.items():
        _same(path, content)
    for folder, inside in files.folders.items():
        for file, content in inside.items():
            _same(folder / file, content)
        if not UPDATE:
            assert sorted(p.name for p in folder.iterdir()) == sorted(inside)


@pytest.mark.parametrize("lang", LANGS)
def test_the_example_diff_is_what_today_s_code_says(tmp_path, lang):
    out = tmp_path / "diff.md"
    a, b = (str(EVIDENCE / f"{n}.json.gz") for n in DIFF)
    assert cli.main(["diff", a, b, "--format", "md", "--lang", lang, "--out", str(out)]) == 0
    suffix = "" if lang == "en" else f".{lang}"
    _same(EXAMPLES / f"diff_h200_back-to-back{suffix}.md", out.read_text(encoding="utf-8"))


def test_the_examples_folder_holds_only_what_the_tests_make():
    made = {f"{n}{'' if lang == 'en' else '.' + lang}" for n in REPORTS for lang in LANGS}
    made |= {"diff_h200_back-to-back", "diff_h200_back-to-back.zh-CN"}
    found = {p.name.removesuffix(".md").removesuffix("_charts") for p in EXAMPLES.iterdir() if p.name != "README.md"}
    assert found == made
