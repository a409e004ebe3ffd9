"""Markdown and HTML reports: content from the JSON alone, escaping, structure, files and the CLI."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from factories import report

from envcheck.errors import UsageError
from envcheck.model import Check, dump, known, missing
from envcheck.render import jinja as jj
from envcheck.render import render_html, render_markdown, write_documents

ROOT = Path(__file__).resolve().parent.parent
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class NestingChecker(HTMLParser):
    """Fails on a closing tag that does not match the open one: well-formed nesting, HTML or inline SVG."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.add(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> NestingChecker:
    p = NestingChecker()
    p.feed(html)
    p.close()
    return p


@pytest.fixture(scope="module")
def hostile():
    """A report whose machine strings try to be markup."""
    r = report(host="<script>alert(1)</script>", gpu_name="A&B <b>")
    checks = (
        Check("x.pipe", "fail", "Pipes | in <i>title</i>", "value a|b with `tick` and *stars*", fix="run `x` | tee"),
        *r.checks,
    )
    sections = dict(r.environment.sections)
    sections["env"] = {"variables": known({"GITHUB_TOKEN": "ghp_secretvalue", "PIP_INDEX_URL":
                                           "https://user:hunter2@example.org/simple"})}
    env = dataclasses.replace(r.environment, sections=sections)
    return dataclasses.replace(r, checks=checks, environment=env)


@pytest.fixture(scope="module")
def factory_html():
    return render_html(report())


def test_html_escapes_machine_strings(hostile):
    html = render_html(hostile)
    assert "<script>" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "A&amp;B &lt;b&gt;" in html
    assert "<b>" not in html and "<i>title</i>" not in html
    text = "".join(parse(html).text)
    assert "<script>alert(1)</script>" in text  # shown to the reader as text


def test_markdown_neutralises_html_and_table_syntax(hostile):
    md = render_markdown(hostile)
    assert "<script>" not in md and "<b>" not in md and "<i>" not in md
    assert r"\<script\>alert(1)\</script\>" in md
    assert "A&amp;B \\<b\\>" in md
    (row,) = [line for line in md.splitlines() if "x.pipe" in line or "Pipes" in line]
    assert len(re.findall(r"(?<!\\)\|", row)) == 5  # 4 columns: the pipes inside cells are escaped


def test_secrets_never_reach_the_documents(hostile):
    for text in (render_html(hostile), render_markdown(hostile)):
        assert "ghp_secretvalue" not in text and "hunter2" not in text
        assert "https://&lt;redacted&gt;@example.org/simple" in text or "https://<redacted>@example.org/simple" in text


def test_html_is_well_formed_and_self_contained(factory_html):
    p = parse(factory_html)
    assert p.errors == [] and p.stack == []
    assert "script" not in p.tags and "link" not in p.tags and "img" not in p.tags and "iframe" not in p.tags
    assert "svg" in p.tags and "style" in p.tags
    assert not re.search(r'\b(?:src|href)="(?!#)', factory_html)
    assert "@import" not in factory_html and not re.search(r"url\((?!#)", factory_html)


def test_inline_chart_ids_are_unique_and_resolve(factory_html):
    ids = re.findall(r'\bid="([^"]+)"', factory_html)
    assert len(ids) == len(set(ids)) and len(ids) > 100
    refs = set(re.findall(r'(?:href="#|url\(#)([^")]+)', factory_html))
    assert refs and refs <= set(ids)


def test_html_responsive_basics(factory_html):
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in factory_html
    assert ".table-wrap { overflow-x: auto" in factory_html
    assert "max-width: 100%" in factory_html
    assert factory_html.count('<div class="table-wrap">') >= factory_html.count("<table") - 0


def test_contents_of_both_formats():
    r = report()
    md, html = render_markdown(r), render_html(r)
    for text in (md, html):
        assert "NVIDIA H200" in text and "gpu-box-1" in text and "2026-11-21" in text
        assert "580.159.04" in text and "2.11.0+cu130" in text and "4 814 GB/s" in text
        assert "not supported on this GPU (NVML: Not Supported)" in text  # a missing fact shows its reason
        assert "torch.compile unavailable: no C compiler" in text  # skipped case
        assert "L2 kept cold for memory-bound cases" in text  # run notes
        assert "device-to-device copy of 2 GiB in this run" in text  # ceiling source
        assert "is launch-bound at small sizes" in text and "torch 1 048 576" in text
        assert "TF32" in text
        assert "persistent 128x256x64 s4 w8" in text  # the kernel a Triton matmul ran
    assert '<td class="val missing">not supported on this GPU' in html


def test_checks_are_listed_failures_first():
    r = report(checks=(Check("a", "pass", "A ok", "fine"), Check("b", "warn", "B", "hmm", fix="b-fix"),
                       Check("c", "fail", "C broken", "bad", fix="c-fix")))
    md = render_markdown(r)
    assert md.index("C broken") < md.index("| B |") < md.index("A ok")
    assert "Broken:" in md


def test_probe_report_without_bench_renders_environment_only():
    r = dataclasses.replace(report(), bench=None, checks=(), kind="probe")
    md, html = render_markdown(r), render_html(r)
    assert "## Environment" in md and "## Summary" not in md and "## Methodology" not in md
    assert parse(html).errors == []
    assert "No health checks" in md


def test_wsl_details_only_on_wsl():
    r = report()
    assert "WSL version" not in render_markdown(r)
    sections = dict(r.environment.sections)
    sections["wsl"] = {"is_wsl": known(True), "wsl_version": known(2), "distro_name": missing("WSL_DISTRO_NAME unset")}
    r2 = dataclasses.replace(r, environment=dataclasses.replace(r.environment, sections=sections))
    md = render_markdown(r2)
    assert "| WSL version | 2 |" in md and "*WSL\\_DISTRO\\_NAME unset*" in md


def test_chinese_report_is_translated():
    md = render_markdown(report(), "zh-CN")
    assert md.startswith("# envcheck 报告：gpu-box-1 上的 NVIDIA H200，2026-11-21")
    assert "## 环境" in md and "## 测量方法" in md
    assert "4 814 GB/s" in md  # numbers and units stay the same


# --------------------------------------------------------------------------- filters


@pytest.mark.parametrize(("value", "expected"), [
    (None, "–"), (0, "0"), (1.1, "1.10"), (18.04, "18.0"), (744.2, "744"), (4348.3, "4 348"), (1 << 20, "1 048 576"),
    (2e-7, "2.00e-07"), (12, "12"),
])
def test_num(value, expected):
    assert jj.num(value) == expected


@pytest.mark.parametrize(("us", "expected"), [(1.104, "1.10 µs"), (744.0, "744 µs"), (4_200.0, "4.20 ms"),
                                              (2.5e6, "2.50 s"), (None, "–")])
def test_duration(us, expected):
    assert jj.duration_us(us) == expected


def test_pct_keeps_small_shares_visible():
    assert jj.pct(0.23) == "0.2%" and jj.pct(90.4) == "90%" and jj.pct(None) == "–"


def test_md_escape():
    assert jj.md("a|b") == r"a\|b"
    assert jj.md("x_y *z*") == r"x\_y \*z\*"
    assert jj.md("line\nbreak") == "line break"
    assert jj.md("&lt;") == "&amp;lt;"


# --------------------------------------------------------------------------- files


def test_write_documents_layout_and_relative_chart_links(tmp_path):
    r = report()
    src = tmp_path / "run.json"
    dump(r, src)
    written = write_documents(r, src, ["md", "html"])
    names = {p.relative_to(tmp_path).as_posix() for p in written}
    assert {"run.md", "run.html", "run_charts/roofline.svg"} <= names
    md = (tmp_path / "run.md").read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert links and all((tmp_path / link).is_file() for link in links)
    assert all(not Path(link).is_absolute() for link in links)


def test_write_documents_refuses_to_replace_without_force(tmp_path):
    r = report()
    src = tmp_path / "run.json"
    (tmp_path / "run.html").write_text("mine", encoding="utf-8")
    with pytest.raises(UsageError, match=r"run\.html already exists.*--force replaces it"):
        write_documents(r, src, ["md", "html"])
    assert not (tmp_path / "run.md").exists()  # nothing written when refused
    assert (tmp_path / "run.html").read_text(encoding="utf-8") == "mine"
    write_documents(r, src, ["html"], force=True)
    assert (tmp_path / "run.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_write_documents_language_suffix_and_out_dir(tmp_path):
    r = report()
    out = tmp_path / "docs"
    written = write_documents(r, tmp_path / "run.json", ["md"], lang="zh-CN", out_dir=out)
    assert out / "run.zh-CN.md" in written
    assert "](run.zh-CN_charts/" in (out / "run.zh-CN.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(("formats", "lang", "message"), [
    (["pdf"], "en", "unknown format 'pdf'"), ([], "en", "no format"), (["md"], "fr", "unknown language 'fr'")])
def test_write_documents_validates_input(tmp_path, formats, lang, message):
    with pytest.raises(UsageError, match=message):
        write_documents(report(), tmp_path / "r.json", formats, lang=lang)


# --------------------------------------------------------------------------- the command line


def envcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_cli_render_writes_then_refuses_then_forces(tmp_path):
    dump(report(), tmp_path / "r.json")
    first = envcheck("render", "r.json", "--format", "html", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "r.html").is_file()
    again = envcheck("render", "r.json", "--format", "html", cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr.count("\n") == 1 and "envcheck render: error:" in again.stderr and "--force" in again.stderr
    assert envcheck("render", "r.json", "--format", "html", "--force", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize(("content", "message"), [
    ('{"hello": 1}', "not an envcheck report"),
    ('{"format": "envcheck-report", "schema_version": 99}', "newer than this envcheck understands"),
    ("{not json", "not valid JSON"),
])
def test_cli_render_rejects_bad_files_with_one_line(tmp_path, content, message):
    (tmp_path / "bad.json").write_text(content, encoding="utf-8")
    res = envcheck("render", "bad.json", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and message in res.stderr and "Traceback" not in res.stderr
    assert not list(tmp_path.glob("bad.*html")) and not (tmp_path / "bad.md").exists()


def test_cli_render_bad_format_is_one_line(tmp_path):
    dump(report(), tmp_path / "r.json")
    res = envcheck("render", "r.json", "--format", "md,pdf", cwd=tmp_path)
    assert res.returncode == 2 and "unknown format 'pdf'" in res.stderr and res.stderr.count("\n") == 1


def test_rendering_reads_the_json_alone(tmp_path):
    """The JSON round trip renders exactly like the in-memory report."""
    r = report()
    dump(r, tmp_path / "r.json")
    from envcheck.model import load

    assert render_markdown(load(tmp_path / "r.json")) == render_markdown(r)
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["host"] == "gpu-box-1"


def _h200_context(lang: str = "en"):
    from envcheck.model import load
    from envcheck.render.context import build

    path = Path(__file__).resolve().parent.parent / "reports" / "2026-11-21_2341Z_vm_h200.json"
    return build(load(path), lang, str)


def test_tolerances_are_a_range_per_precision_not_the_first_seen():
    """fp32 tolerances run from vector_add's 3.6e-07 to IEEE matmul's (they grow with sqrt K); IEEE matmul reaches 3.4e-05."""
    m = _h200_context()["methodology"]
    tol = {p: (lo, hi) for p, lo, hi, _ in m["tolerances"]}
    assert tol["fp32"][0] == pytest.approx(3.5762786865234375e-07)
    ctx = _h200_context()
    fp32 = [c.error.tolerance for c in ctx["bench"].cases if c.error and c.error.precision == "fp32"]
    assert tol["fp32"][1] == max(fp32) > 30 * tol["fp32"][0]  # IEEE matmul's, not vector_add's


@pytest.mark.parametrize("lang, first_call, copy", [("en", "First call", "copy bandwidth (measured)"),
                                                    ("zh-CN", "首次调用", "拷贝带宽（实测）")])
def test_first_call_column_tolerance_ranges_and_copy_bandwidth_in_documents(lang, first_call, copy):
    from envcheck.model import load
    from envcheck.render.i18n import translate

    path = Path(__file__).resolve().parent.parent / "reports" / "2026-11-21_2341Z_vm_h200.json"
    r = load(path)
    md, html = render_markdown(r, lang=lang), render_html(r, lang=lang, charts=[])
    for text in (md, html):
        assert first_call in text and translate(lang, "method.first_call") in text
        assert translate(lang, "method.copy_ceiling") in text
        assert re.search(r"fp32 3\.6e-07–[0-9.]+e-05", text)
        assert copy in text  # the bandwidth finding names the measured ceiling as a copy
    assert "| Compile |" not in md and "| 编译 |" not in md
