"""Every kind of report, rendered in zh-CN, shows no English of envcheck's own (issue 38, item 9).

Each document (run on a GPU and on a CPU, node run, fleet, burn on GPUs and on a CPU, diff, history,
user bench, check) is rendered in zh-CN as HTML (charts inlined) and as Markdown, and every ASCII word of
three letters or more left in its text must be one of: code (a ``<code>`` element, a Markdown code span
or block), a URL, a document title in 《》, what the machine recorded (the report's own strings: names,
paths, versions, errors, except envcheck's own fact reasons, which are phrased), a registry name (an op,
an implementation, a precision) or a technical name from ``TECHNICAL``.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import re
from collections.abc import Callable
from pathlib import Path

import compare_data
import factories
import factories_cpu
import node_reports
import pytest
from in_lang import render_diff, render_history, render_html, render_markdown
from text_cut import without

from envcheck.analysis.fleet import DEFAULT_RULES
from envcheck.compare.diff import diff as compare_diff
from envcheck.model import Report, dumps, load, reasons
from envcheck.ops import IMPLS, OPS, PRECISIONS

# One pytest-xdist worker runs this module: its reports (a module fixture, seconds to load) are read once.
pytestmark = pytest.mark.xdist_group("zh_cn_everywhere")
ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "evidence"
FIXTURES = ROOT / "tests" / "fixtures" / "reports"

# Names a Chinese reader sees in English in every Chinese text about GPUs: products, libraries, units,
# standards, and the terms of the tools envcheck compares with (nccl-tests' busbw and algbw, a rank).
TECHNICAL = frozenset("""
GPU GPUs CPU CUDA NVML NCCL Triton PyTorch JAX TFLOP GFLOP FLOP SDC MiB GiB KiB TiB MHz GHz NVIDIA NVLink NVSwitch PCIe PCI SIG
bit ECC Xid DCGM IEEE JSON Markdown HTML envcheck cuBLAS cuDNN Tensor Core SXM HBM MIG WSL UUID VBIOS Python Roofline
min rank Rank ranks busbw algbw CRC flit NUMA SYS NODE PHB PXB PIX JIT NaN ROCm GeForce GEMM Gen gloo torchrun
Ubuntu ACS DMA IOMMU fabric Fabric wheel Benjamini Hochberg Ctrl float triad fill copy read eager graph graphs nvcc ptxas libcuda Intel AMD EPYC Xeon
""".split())
WORD = re.compile(r"[A-Za-z]{3,}")


def _registry() -> frozenset[str]:
    names = [*OPS, *IMPLS, *PRECISIONS, "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
             "send_recv"]
    return frozenset(w for n in names for w in re.split(r"[^A-Za-z]+", n) if w)


def _leaves(obj: object, key: str | None = None):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, k)
    elif isinstance(obj, list):
        for v in obj:
            yield from _leaves(v, key)
    elif isinstance(obj, str) and not (key == "reason" and obj in reasons.KEYS):
        yield obj  # envcheck's own reasons are phrased: they are not what the machine said


def machine_strings(*reports: Report) -> list[str]:
    found = {s for r in reports for s in _leaves(json.loads(dumps(r)))}
    found |= {part for s in found for part in re.split(r"; |\n", s)}  # what a view shows of a list of them
    found |= {s.split(": ", 1)[1] for s in found if ": " in s}  # a recorded error after its kind
    found |= {"hw_slowdown", "full.json", "quick.json"}  # the diffs' own: a throttle reason, report labels
    found |= {str(v) for v in dataclasses.asdict(compare_data.Strings()).values() if isinstance(v, str)}
    found |= {r.metric for r in DEFAULT_RULES}  # a fleet rule's name is what --rule takes
    return sorted((s for s in found if len(s) >= 3), key=len, reverse=True)


def html_text(page: str) -> str:
    page = re.sub(r"<(code|pre|style)\b.*?</\1>", " ", page, flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def markdown_text(doc: str) -> str:
    doc = re.sub(r"^```.*?^```", " ", doc, flags=re.DOTALL | re.MULTILINE)
    doc = re.sub(r"(`+).+?\1", " ", doc)
    doc = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|<>])", r"\1", doc)  # Markdown's escapes undone
    return re.sub(r"\]\([^)]*\)", "]", doc)  # link targets (chart files)


def _without_word(text: str, s: str) -> str:
    """The machine's word ``s`` cut out of ``text``, never a part of one of envcheck's ("check" in "envcheck")."""
    return without(text, s, re.compile(rf"(?<![A-Za-z]){re.escape(s)}(?![A-Za-z])"))


def english(text: str, machine: list[str]) -> list[str]:
    text = re.sub(r"https?://\S+|《[^》]*》|nccl-tests|envcheck (?:diff|history)|[\w./-]+\.json", " ", text)  # commands, files
    for s in machine:
        if s in text:
            text = _without_word(text, s)
    allowed = TECHNICAL | _registry()
    return sorted({w for w in WORD.findall(text) if w not in allowed})


def _settings_diff():
    """A full run against a --quick one: the diff names the run settings that differ."""
    full = factories.report(created="2026-11-22T00:57:00Z")
    b = full.benches[0]
    quick = dataclasses.replace(full, created="2026-11-22T01:04:00Z", benches=(dataclasses.replace(
        b, settings=dataclasses.replace(b.settings, quick=True, warmup_ms=b.settings.warmup_ms / 2)),))
    return compare_diff([("full.json", full), ("quick.json", quick)]), (full, quick)


def _cpu_check() -> Report:
    env = factories_cpu.environment()
    from envcheck.checks import evaluate

    sections = dict(env.sections)
    sections["torch_runtime"] = {**sections["torch_runtime"], "arch_list": _missing(reasons.NO_CUDA_ARCHS),
                                 "smoke_ok": _missing(reasons.NO_CUDA_DEVICE)}
    sections["triton_runtime"] = {"smoke_ok": _missing(reasons.TRITON_NO_GPU)}
    env = dataclasses.replace(env, sections=sections)
    return Report(tool_version="0.1.0", created="2026-11-22T09:00:00Z", host="cpu-box", kind="check", environment=env,
                  checks=evaluate(env))


def _missing(reason: str):
    from envcheck.model import missing

    return missing(reason)


def _reports() -> dict[str, Report]:
    return {
        "run": load(REPORTS / "2026-11-22_0104Z_vm_h200.json.gz"),
        "run.cpu": factories_cpu.report(),
        "node": node_reports.node_report(trouble=True),
        "fleet": node_reports.fleet_report(),
        "burn": load(REPORTS / "2026-11-28_1737Z_vm_2x-h200_burn_healthy.json.gz"),
        "burn.cpu": load(FIXTURES / "cpu_burn.json"),
        "userbench": load(REPORTS / "2026-11-26_0225Z_vm_h200_userbench_softmax-wsum.json.gz"),
        "userbench.cpu": load(FIXTURES / "cpu_userbench.json"),
        "check": load(REPORTS / "2026-11-22_0104Z_vm_h200_check.json.gz"),
        "check.cpu": _cpu_check(),
    }


REPORT_KINDS = ["run", "run.cpu", "node", "fleet", "burn", "burn.cpu", "userbench", "userbench.cpu", "check",
                "check.cpu"]


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    return _reports()


@pytest.fixture(scope="module")
def zh_html(reports) -> Callable[[str], str]:
    """A report's Chinese page (charts drawn), rendered the first time a test asks for it."""
    return functools.cache(lambda kind: render_html(reports[kind], "zh-CN"))


@pytest.mark.parametrize("kind", REPORT_KINDS)
def test_a_report_in_zh_cn_has_no_english_of_envchecks_own(reports, zh_html, kind):
    r = reports[kind]
    machine = machine_strings(r)
    assert english(html_text(zh_html(kind)), machine) == []
    assert english(markdown_text(render_markdown(r, "zh-CN")), machine) == []


def test_a_diff_and_a_history_in_zh_cn_have_no_english_of_envchecks_own():
    d = compare_data.diff()
    machine = machine_strings()
    assert english(html_text(render_diff(d, "html", "zh-CN")), machine) == []
    assert english(markdown_text(render_diff(d, "md", "zh-CN")), machine) == []
    h = compare_data.history()
    assert english(html_text(render_history(h, "html", "zh-CN")), machine) == []
    sd, pair = _settings_diff()
    machine = machine_strings(*pair)
    page = render_diff(sd, "html", "zh-CN")
    assert "warmup_ms" in page  # the setting that differs is named (as code) ...
    assert english(html_text(page), machine) == []  # ... and nothing around it is English


def test_envchecks_own_fact_reasons_and_values_are_phrased(zh_html):
    page = zh_html("check.cpu")
    for english_reason in (reasons.NO_CUDA_DEVICE, reasons.NO_CUDA_ARCHS, reasons.TRITON_NO_GPU):
        assert english_reason not in page
    assert "highest" not in zh_html("run").replace("`highest`", "")


def test_a_cpu_run_is_titled_by_its_cpu_and_its_bandwidth_chart_is_the_rams(zh_html):
    page = zh_html("run.cpu")
    title = re.search(r"<h1>(.*?)</h1>", page).group(1)
    assert "Intel(R) Xeon(R) Platinum 8480+" in title and "无 GPU" not in title
    assert "显存" not in html_text(page)  # a CPU has RAM, not GPU memory
