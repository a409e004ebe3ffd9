"""Markdown and HTML reports: content from the report and its analysis, escaping, language, files, the CLI."""

from __future__ import annotations

import dataclasses
import re
import string
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import factories
import factories_cpu
import pytest
from in_lang import outcome_message, print_run, render_after_run, render_html, render_markdown, write_documents

from envcheck import cli
from envcheck.analysis import analyse
from envcheck.errors import UsageError
from envcheck.model import Check, Note, Stop, StopCause, dump, known, legacy, load
from envcheck.render import fmt
from envcheck.render.i18n import LANGS, case_label, catalog, placeholders
from envcheck.render.terminal.console import capture

# One pytest-xdist worker runs this module: the committed H200 report and its pages (module fixtures, seconds each with their charts) are made once.
pytestmark = pytest.mark.xdist_group("render")
ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "evidence" / "2026-11-22_0104Z_vm_h200.json.gz"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Parsed(HTMLParser):
    """Tags, attributes, ids, links and text of a document; nesting errors recorded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: set[str] = set()
        self.attrs: set[tuple[str, str]] = set()
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for k, v in attrs:
            self.attrs.add((tag, k))
            if k == "id":
                self.ids.append(v)
            if k == "href":
                self.hrefs.append(v)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.add(tag)
        for k, _ in attrs:
            self.attrs.add((tag, k))

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> Parsed:
    p = Parsed()
    p.feed(html)
    p.close()
    return p


@pytest.fixture(scope="module")
def h200():
    return load(H200)


@pytest.fixture(scope="module")
def h200_html(h200):
    return render_html(h200)


@pytest.fixture(scope="module")
def h200_md(h200):
    return render_markdown(h200)


@pytest.fixture(scope="module")
def h200_zh_html(h200):
    return render_html(h200, "zh-CN")


def with_env(report, variables=None, checks=None, host=None, gpu=None):
    sections = dict(report.environment.sections)
    if variables is not None:
        sections["env"] = {"variables": known(variables)}
    env = dataclasses.replace(report.environment, sections=sections)
    out = dataclasses.replace(report, environment=env)
    if checks is not None:
        out = dataclasses.replace(out, checks=checks)
    if host is not None:
        out = dataclasses.replace(out, host=host)
    return out


@pytest.fixture
def no_charts(undrawn_charts):
    """charts_not_drawn for one test: the files, refusals and command lines it checks never look inside a chart
    (a placeholder SVG is written where each chart goes)."""
    with undrawn_charts():
        yield


# --------------------------------------------------------------------------- escaping


INJECTION = {
    # The two cases the issue reports: a double backtick closing the code span, a CR ending the row.
    "CUDA_LAUNCH_BLOCKING": "0``<img src=x onerror=alert(5)>``",
    "NCCL_DEBUG": "INFO\r# injected heading\r\n| a | b |",
    "PIP_INDEX_URL": "https://user:hunter2@example.org/simple",
    "GITHUB_TOKEN": "ghp_secretvalue",
}


@pytest.fixture(scope="module")
def hostile():
    r = factories.report()
    checks = (Check("x.pipe", "fail", "Pipes | in <i>title</i>", "value a|b with `tick` and *stars*",
                    fix="run ``x`` | tee <img src=y onerror=alert(6)>"), *r.checks)
    return with_env(r, INJECTION, checks, host="<script>alert(1)</script>\u202egnp.exe")


def test_markdown_code_spans_and_rows_cannot_be_broken_out_of(hostile):
    markdown_it = pytest.importorskip("markdown_it")  # a test extra: without it this test alone skips
    md = render_markdown(hostile)
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(md)
    doc = parse(html)
    assert "script" not in doc.tags and "i" not in doc.tags
    assert not [a for a in doc.attrs if a[1].startswith("on")]
    assert set(re.findall(r'<img src="([^"]+)"', html)) <= {f"charts/{n}.svg" for n in re.findall(r"charts/(\w+)\.svg", md)}
    assert not re.search(r"<h\d>[^<]*injected heading", html)
    assert "injected heading" in "".join(doc.text)  # shown, as text inside the code span
    assert "<img src=x onerror=alert(5)>" in "".join(doc.text)  # literally
    assert "\r" not in md and "\u202e" not in md


def test_markdown_tables_keep_their_columns(hostile):
    md = render_markdown(hostile)
    for block in re.split(r"\n\n", md):
        lines = [ln for ln in block.splitlines() if ln.startswith("|")]
        if len(lines) < 2:
            continue
        widths = {len(re.findall(r"(?<!\\)\|", re.sub(r"(`+).*?\1", "", ln))) for ln in lines}
        assert len(widths) == 1, lines


def test_html_escapes_machine_strings_and_neutralises_bidi(hostile):
    html = render_html(hostile)
    doc = parse(html)
    assert "script" not in doc.tags and "img" not in doc.tags and "i" not in doc.tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\u202e" not in html and "\\u{202e}" in html
    assert not doc.errors


def test_secrets_never_reach_the_documents(hostile):
    for text in (render_html(hostile), render_markdown(hostile)):
        assert "ghp_secretvalue" not in text and "hunter2" not in text


def test_documents_redact_by_the_probes_rule_also_a_token_under_a_harmless_name():
    # A report written by another tool may carry a token-shaped value under a name that marks no
    # secret; the documents apply envcheck.redact's rule, not a weaker one of their own.
    token = "hf_abcdefghijklmnopqrstuvwxyz0123"
    r = with_env(factories.report(), {"PYTORCH_HUB_ARGS": f"--token {token}",
                                      "PIP_INDEX_URL": "postgres://u:p4ss@h/db"})
    html, md = render_html(r), render_markdown(r)
    for text in (html, md):
        assert token not in text and "p4ss" not in text
    assert "`PYTORCH_HUB_ARGS=<redacted>`" in md and "`PIP_INDEX_URL=postgres://<redacted>@h/db`" in md
    assert "<code>PYTORCH_HUB_ARGS=&lt;redacted&gt;</code>" in html


def test_html_is_well_formed_and_self_contained(h200_html):
    doc = parse(h200_html)
    assert not doc.errors and not doc.stack
    assert not {"script", "link", "img", "iframe"} & doc.tags
    assert not [h for h in doc.hrefs if not h.startswith("#")]
    assert len(doc.ids) == len(set(doc.ids)), "an id repeats"
    assert all(h[1:] in doc.ids for h in doc.hrefs), "a link to a row that is not there"


# --------------------------------------------------------------------------- what the report says


def test_findings_are_one_sentence_with_a_count_and_their_rows_folded(h200, h200_html, h200_md):
    power = analyse(h200).bench.findings
    capped = next(f for f in power if f.key == "finding.power_capped")
    li = re.search(r'<li class="level-info">27 rows ran at the GPU&#39;s software power cap.*?</details>', h200_html, re.S)
    assert li, "the power-cap finding is one list item starting with its count"
    sentence, details = li.group(0).split("<details>", 1)
    assert sentence.count("×") == 0 and "4096" not in sentence  # no row inline in the sentence
    assert len(re.findall(r'<li><a href="#case-', details)) == len(capped.rows) == 27
    # Markdown: the sentence, then the rows compacted under it.
    block = h200_md.split("- 27 rows ran at the GPU's software power cap", 1)[1].split("\n- ", 1)[0]
    assert "  - matmul fp16 torch, triton: 2048×2048×2048, 4096×4096×4096, 4096×11008×4096, 8192×8192×8192" in block


def test_tiles_give_speedups_per_precision(h200_md):
    line = next(ln for ln in h200_md.splitlines() if ln.startswith("- **matmul:"))
    assert "triton vs torch: fp16 0.91× · bf16 0.92× · tf32 0.95× · fp32 0.32×" in line
    assert "0.75×" not in line  # the all-precision mean the issue complained about


def test_sizes_in_numeric_order_and_one_notation(h200_md):
    section = h200_md.split("## Benchmark: vector\\_add", 1)[1].split("\n## ", 1)[0]
    rows = [ln.split(" | ") for ln in section.splitlines() if re.match(r"\| \d", ln)]
    sizes = [(r[2], r[0].strip("| ")) for r in rows]  # (dtype, size) in the order shown
    for dtype in ("fp32", "fp16", "bf16"):
        shown = [s for d, s in sizes if d == dtype]
        assert shown == sorted(shown, key=lambda s: int(s[:-1]) << {"K": 10, "M": 20, "G": 30}[s[-1]]
                               if s[-1] in "KMG" else int(s))
    assert "2^" not in section and "1024" not in section.split("|---", 1)[1].split("![")[0]
    assert sizes[0][1] == "1K" and ("fp32", "100K") in sizes and ("fp32", "256M") in sizes


def test_tolerances_read_the_same_in_every_layout(h200, h200_md):
    wide = capture(lambda c: print_run(c, h200, analyse(h200)), width=170)
    for text in (h200_md, wide):
        assert "23% (2.8e-8" in text  # err/bound, then the error itself, one short exponent form
        assert "e-07" not in text and "e-08" not in text


def test_cpu_report_reads_as_a_cpu_report():
    r = factories_cpu.report()
    a = analyse(r)
    for text in (render_markdown(r), render_html(r), capture(lambda c: print_run(c, r, a), width=100)):
        assert "GPU time" not in text and "Launch time" not in text
        assert "nvidia-smi" not in text  # no advice about GPU processes
        assert "L2 kept cold" not in text and "cold_l2" not in text
        assert "Roofline" not in text
    md = render_markdown(r)
    assert "`threads=16`" in md and "Time (host clock)" in md
    assert "matmul_time.svg" not in md  # one size per precision: nothing a chart shows better than the table


def test_a_stopped_run_says_how_it_stopped_once():
    r = factories.report()
    bench = dataclasses.replace(r.bench, stop=Stop(StopCause.USER, finished=12, planned=208))
    html = render_html(dataclasses.replace(r, benches=(bench,)))
    assert "stopped with Ctrl-C after 12 of 208 cases" in html
    assert "interrupted (interrupted" not in html and html.count("stopped with Ctrl-C") == 1


def test_unknown_keys_are_shown_generically_and_legacy_text_as_recorded():
    r = factories.report()
    notes = (Note("bench.some_future_note", {"size_bytes": 1 << 20, "op": "relu"}), legacy("as it was <recorded>"))
    bench = dataclasses.replace(r.bench, notes=notes)
    md = render_markdown(dataclasses.replace(r, benches=(bench,)))
    assert "- bench.some\\_future\\_note (op=relu, size\\_bytes=1.0 MiB)" in md
    assert "- as it was \\<recorded\\>" in md


def test_probe_report_renders_environment_and_no_benchmark():
    r = dataclasses.replace(factories.report(), kind="probe", checks=(), benches=())
    md = render_markdown(r)
    assert "## Environment" in md and "## Benchmark" not in md and "## Findings" not in md


# --------------------------------------------------------------------------- languages


def _po(lang: str):
    from babel.messages.pofile import read_po

    with (ROOT / "envcheck" / "render" / "locale" / lang.replace("-", "_") / "LC_MESSAGES" / "envcheck.po").open("rb") as f:
        return read_po(f)


def test_catalogues_have_the_same_keys_plural_forms_and_placeholders():
    """The .po files, the source: every key in every language, a plural entry in all of them, and each form of
    a message with the placeholders of the English."""
    en = {m.id if isinstance(m.id, str) else m.id[0]: m for m in _po("en") if m.id}
    for lang in LANGS:
        other = {m.id if isinstance(m.id, str) else m.id[0]: m for m in _po(lang) if m.id}
        assert set(other) == set(en), f"{lang}: {set(en) ^ set(other)}"
        for key, m in en.items():
            ours, theirs = ((x,) if isinstance(x, str) else tuple(x) for x in (m.string, other[key].string))
            assert len(ours) == len(theirs) and all(theirs), f"{lang} {key}: a form missing"
            assert [placeholders(x) for x in ours] == [placeholders(x) for x in theirs], f"{lang} {key}"


def test_the_compiled_catalogues_are_their_po_files():
    """envcheck reads the committed .mo files (the standard library's gettext): each must hold its .po's messages
    (after editing a .po: ``python tools/dev/catalog.py compile``)."""
    import io
    from gettext import GNUTranslations

    from babel.messages.mofile import write_mo

    from envcheck.render.i18n import translations

    for lang in LANGS:
        buf = io.BytesIO()
        write_mo(buf, _po(lang))
        buf.seek(0)
        assert translations(lang)._catalog == GNUTranslations(buf)._catalog, lang


def _code_keys() -> set[str]:
    """Keys the analysis hands to the presentation as data: every one must be phrased."""
    from envcheck.analysis import flags as fl
    from envcheck.analysis import peaks

    src = "".join((ROOT / "envcheck" / "analysis" / name).read_text() for name in
                  ("findings.py", "peaks.py", "ceilings.py"))
    keys = set(re.findall(r'"((?:finding|rec|peak|ceiling)\.[a-z_]+[a-z])"', src))
    keys |= {f"finding.stopped.{c.value}" for c in StopCause}
    keys |= {f"flag.{f}" for f in fl.FLAGS} | {f"flag.{f}.explain" for f in fl.FLAGS}
    kinds = set(re.findall(r'Source\("([a-z_]+[a-z])"', src)) | set(re.findall(r'kind = "([a-z_]+)"', src))
    kinds |= {"datasheet_computed", "datasheet_computed_up_to", "derived_geforce", "derived_tensor_clock"}
    kinds |= {f"measured_{k}" for k in ("copy", "read", "fill", "triad", "matmul")}
    keys |= {f"peak_source.{k}" for k in kinds}
    assert peaks.compute_peaks  # the module the peak keys come from
    return keys - {"finding.stopped."}


def test_every_key_the_analysis_uses_is_in_the_catalogue():
    missing = sorted(k for k in _code_keys() if k not in catalog("en"))
    assert not missing


def test_every_key_the_code_and_the_templates_name_is_in_the_catalogue():
    """Babel's extraction (babel.cfg: Python, and Jinja's templates) of every key given to t() or phrase() as
    written, or to an error of envcheck's own words (errors.Said): a key named in the code has its message."""
    from babel.messages.extract import extract_from_dir
    from babel.messages.frontend import parse_mapping_cfg

    with (ROOT / "babel.cfg").open() as f:
        methods, options = parse_mapping_cfg(f)
    found = {(Path(name).name, msg if isinstance(msg, str) else msg[0]) for name, _, msg, _, _ in
             extract_from_dir(ROOT / "envcheck", [(p.removeprefix("envcheck/"), m) for p, m in methods],
                              {k.removeprefix("envcheck/"): v for k, v in options.items()},
                              keywords={"t": None, "phrase": None, "_": None, "UsageError": None, "ReportError": None,
                                        "SnapshotError": None, "DestinationError": None, "error": None})}
    assert {k for _, k in found} >= {"report.title", "section.health", "burn.col.device", "diff.node.col.test"}
    # Key-shaped strings only: Babel's tokenizer also takes a tensor named ``t`` for the function (collective_bench).
    keys = {(name, k) for name, k in found if re.fullmatch(r"[a-z0-9_]+(\.[\w-]+)+", k)}
    assert not sorted((name, k) for name, k in keys if k not in catalog("en"))


def _english_fragments() -> list[str]:
    """Pieces of English catalogue text long enough that finding one in a render means it was not translated."""
    en, zh = catalog("en"), catalog("zh-CN")
    out = []
    for key, message in en.items():
        if message == zh[key]:
            continue
        for literal, *_ in string.Formatter().parse(message):
            literal = literal.strip(" .,:;()")
            if len(literal) >= 14 and literal.count(" ") >= 2:
                out.append(literal)
    return out


def test_a_chinese_render_has_no_english_catalogue_sentence(h200, h200_zh_html):
    a = analyse(h200)
    texts = [render_markdown(h200, "zh-CN", analysis=a), h200_zh_html,
             capture(lambda c: print_run(c, h200, a, lang="zh-CN"), width=100),
             render_markdown(factories_cpu.report(), "zh-CN")]
    # What the machine wrote in English (check findings, notes of old reports) may contain a phrase.
    machine = " ".join([c.finding for c in h200.checks] + [n.params.get("text", "") for n in h200.bench.notes])
    fragments = [f for f in _english_fragments() if f not in machine]
    assert len(fragments) > 200
    for text in texts:
        found = [f for f in fragments if f in text]
        assert not found, found[:5]


def test_chinese_charts_are_in_chinese(h200_zh_html):
    svgs = "".join(re.findall(r"<svg.*?</svg>", h200_zh_html, re.S))
    assert "每次调用时间（µs）" in svgs and "规模（元素数）" in svgs
    assert "time per call" not in svgs and "size (elements)" not in svgs


# --------------------------------------------------------------------------- numbers as text


@pytest.mark.parametrize(("value", "expected"), [
    (None, "–"), (0, "0"), (4814.304, "4814"), (0.5, "0.500"), (12.3456, "12.3"), (9.996, "10.0"), (2.5e-5, "2.50e-5"),
])
def test_num(value, expected):
    assert fmt.num(value) == expected


@pytest.mark.parametrize(("value", "expected"), [(3.6e-7, "3.6e-7"), (0.0117, "1.2e-2"), (0.0029327, "2.9e-3"),
                                                 (0, "0"), (None, "–")])
def test_errors_and_tolerances_have_one_notation(value, expected):
    assert fmt.sci(value) == expected


@pytest.mark.parametrize(("n", "expected"), [(1024, "1K"), (10240, "10K"), (102400, "100K"), (1 << 20, "1M"),
                                             (1 << 28, "256M"), (1000, "1000"), (1536, "1536")])
def test_counts_use_the_binary_prefixes_of_the_chart_axes(n, expected):
    assert fmt.count(n) == expected


def test_first_line_and_case_label_are_one_each():
    assert fmt.first_line("\n  RuntimeError: boom\n  at x\n") == "RuntimeError: boom"
    assert case_label(("matmul", "triton", "fp32", "tf32", (4096, 4096, 4096))) == \
        "matmul triton fp32/tf32 4096×4096×4096"


# --------------------------------------------------------------------------- files


def test_rendering_twice_gives_identical_bytes(tmp_path):
    report = factories.report()
    a = write_documents(report, tmp_path / "a" / "r.json", ["md", "html"])
    b = write_documents(report, tmp_path / "b" / "r.json", ["md", "html"])
    assert len(a) == len(b) > 3
    for x, y in zip(a, b, strict=True):
        assert x.name == y.name and x.read_bytes() == y.read_bytes(), x.name


@pytest.mark.usefixtures("no_charts")
def test_write_documents_layout_and_relative_chart_links(tmp_path):
    written = write_documents(factories.report(), tmp_path / "r.json", ["md", "html"])
    names = {p.relative_to(tmp_path).as_posix() for p in written}
    assert {"r.md", "r.html", "r_charts/vector_add_time.svg", "r_charts/roofline.svg"} <= names
    md = (tmp_path / "r.md").read_text()
    for link in re.findall(r"\]\((r_charts/[^)]+)\)", md):
        assert (tmp_path / link).is_file()


@pytest.mark.usefixtures("no_charts")
def test_a_refusal_writes_nothing_and_force_replaces_the_whole_set(tmp_path):
    report = factories.report()
    (tmp_path / "r.html").write_text("old html")
    (tmp_path / "r_charts").mkdir()
    (tmp_path / "r_charts" / "stale.svg").write_text("old chart")
    with pytest.raises(UsageError, match="already exists"):
        write_documents(report, tmp_path / "r.json", ["md", "html"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r_charts"]  # no r.md written meanwhile
    write_documents(report, tmp_path / "r.json", ["md", "html"], force=True)
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert not (tmp_path / "r_charts" / "stale.svg").exists()  # the folder is the render's, replaced whole
    assert not [p for p in tmp_path.rglob(".*")], "temporary files left behind"


@pytest.mark.usefixtures("no_charts")
def test_force_over_a_dangling_symlink_replaces_the_link(tmp_path):
    (tmp_path / "r.md").symlink_to(tmp_path / "nowhere" / "r.md")
    with pytest.raises(UsageError):
        write_documents(factories.report(), tmp_path / "r.json", ["md"])
    write_documents(factories.report(), tmp_path / "r.json", ["md"], force=True)
    assert not (tmp_path / "r.md").is_symlink() and (tmp_path / "r.md").read_text().startswith("# envcheck")


@pytest.mark.usefixtures("no_charts")
@pytest.mark.parametrize("name", ["r.md", "r.html"])
def test_a_report_is_never_replaced_by_its_own_rendering(tmp_path, name):
    """A report saved as r.md (or r.html) is itself a target of its render: refused even with --force."""
    src = tmp_path / name
    dump(factories.report(), src)
    before = src.read_bytes()
    for force in (False, True):
        with pytest.raises(UsageError, match="replaced by its own rendering"):
            write_documents(factories.report(), src, ["md", "html"], force=force)
    assert src.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert write_documents(factories.report(), src, ["md", "html"], out_dir=tmp_path / "out")


@pytest.mark.usefixtures("no_charts")
def test_language_suffix_and_out_dir(tmp_path):
    written = write_documents(factories.report(), tmp_path / "in" / "r.json", ["html"], lang="zh-CN",
                              out_dir=tmp_path / "out")
    assert [p.relative_to(tmp_path).as_posix() for p in written] == ["out/r.zh-CN.html"]


@pytest.mark.parametrize(("formats", "message"), [(["pdf"], "unknown format"), ([], "no format")])
def test_write_documents_validates_input(tmp_path, formats, message):
    with pytest.raises(UsageError, match=message):
        write_documents(factories.report(), tmp_path / "r.json", formats)
    assert not list(tmp_path.iterdir())


def test_a_language_without_a_catalogue_is_refused():
    from envcheck.render.i18n import UnknownLanguage, language

    with pytest.raises(UnknownLanguage, match="unknown language 'fr'"):
        with language("fr"):
            pass


@pytest.mark.usefixtures("no_charts")
def test_ctrl_c_while_rendering_after_a_run_leaves_nothing_and_the_retry_works(tmp_path, monkeypatch):
    report = factories.report()
    json_path = tmp_path / "r.json"
    dump(report, json_path)
    import envcheck.render.writing as writing

    real = writing.render_html

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(writing, "render_html", interrupted)
    outcome = render_after_run(report, json_path, ["md", "html"])
    assert outcome.interrupted and not outcome.written and outcome.retry == f"envcheck render {json_path}"
    message = outcome_message(outcome, json_path)
    assert message is not None and f"The report JSON is complete and saved in {json_path}" in message
    assert message.endswith(f"write them with: envcheck render {json_path}") and "none of them was written" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    monkeypatch.setattr(writing, "render_html", real)
    assert cli.main(outcome.retry.split()[1:]) == 0
    assert (tmp_path / "r.html").is_file() and (tmp_path / "r.md").is_file()


@pytest.mark.usefixtures("no_charts")
def test_a_disk_error_while_rendering_is_reported_with_what_exists(tmp_path, monkeypatch):
    report = factories.report()
    json_path = tmp_path / "r.json"
    dump(report, json_path)
    import envcheck.files as files

    real = files._write_file
    calls = []

    def full_disk(path, data):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(files, "_write_file", full_disk)
    outcome = render_after_run(report, json_path, ["md", "html"])
    assert not outcome.written and "No space left" in (outcome.error or "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def run_cli(*args, cwd=ROOT):
    """``envcheck ARGS`` in a process of its own (where the process is the point: a fresh hash seed)."""
    return subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


@dataclasses.dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli_main(capsys, *args) -> Ran:
    """``envcheck ARGS`` as the command line runs it (cli.main), in this process: its exit status and what it
    printed (argparse's usage errors exit: their status)."""
    capsys.readouterr()
    try:
        rc = cli.main(list(args))
    except SystemExit as e:
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return Ran(rc, out, err)


@pytest.mark.usefixtures("no_charts")
def test_cli_render_writes_then_refuses_then_forces(tmp_path, capsys):
    json_path = tmp_path / "r.json"
    dump(factories.report(), json_path)
    first = cli_main(capsys, "render", str(json_path))
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [str(tmp_path / "r.md"), str(tmp_path / "r.html"), f"{tmp_path / 'r_charts'}/ (10)"]
    again = cli_main(capsys, "render", str(json_path))
    assert again.returncode == 2 and "already exists" in again.stderr and "--force" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    assert cli_main(capsys, "render", str(json_path), "--force").returncode == 0


@pytest.mark.parametrize(("content", "message"), [("{", "not valid JSON"), ("[]", "not an envcheck report")])
def test_cli_render_rejects_bad_files_with_one_line(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    res = cli_main(capsys, "render", str(bad))
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", [  # each its own xdist group: four renders in processes of their own, ~20 s
    pytest.param(n, marks=pytest.mark.xdist_group(f"twice{i}")) for i, n in enumerate((
        "2026-11-21_2341Z_vm_h200.json.gz", "2026-11-22_0057Z_vm_h100-80gb-hbm3.json.gz",
        "2026-11-22_0104Z_vm_h200.json.gz"))])
def test_every_committed_report_renders_and_renders_the_same_twice(tmp_path, name):
    for lang in LANGS:
        for out in ("a", "b"):
            res = run_cli("render", str(ROOT / "evidence" / name), "--out", str(tmp_path / out), "--lang", lang)
            assert res.returncode == 0, res.stderr
    a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert a == b and len(a) > 10
    for rel in a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    html = (tmp_path / "a" / name.replace(".json.gz", ".html")).read_bytes()
    assert len(html) <= 1_000_000, f"{len(html)} bytes"



@pytest.mark.slow  # ten charts drawn and rasterised (~4 s); the SVG renders stay fast
def test_cli_render_png_writes_each_chart_beside_its_svg_as_one_set(tmp_path, capsys):
    """``--format png``: every chart as a PNG to paste into an issue, in the charts folder with the SVGs the
    Markdown links to (the folder is replaced whole, so a png render after a md one must keep them)."""
    json_path = tmp_path / "r.json"
    dump(factories.report(), json_path)
    assert cli_main(capsys, "render", str(json_path), "--format", "md").returncode == 0
    svgs = sorted(p.name for p in (tmp_path / "r_charts").glob("*.svg"))
    res = cli_main(capsys, "render", str(json_path), "--format", "png", "--force")
    assert res.returncode == 0, res.stderr
    pngs = sorted(p.name for p in (tmp_path / "r_charts").glob("*.png"))
    assert len(pngs) == len(svgs) == 10 and [p[:-4] for p in pngs] == [s[:-4] for s in svgs]
    assert all((tmp_path / "r_charts" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    md = (tmp_path / "r.md").read_text()
    assert all((tmp_path / link).is_file() for link in re.findall(r"\]\((r_charts/[^)]+)\)", md))
    bad = cli_main(capsys, "render", str(json_path), "--format", "gif")
    assert bad.returncode == 2 and "png" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_command_s_language_ends_with_the_command(tmp_path):
    """--lang is chosen once per command: a command in Chinese leaves the next render in the same process English."""
    from envcheck.render.i18n import current

    path = tmp_path / "r.json"
    dump(factories.report(), path)
    assert cli.main(["render", str(path), "--format", "md", "--lang", "zh-CN", "--out", str(tmp_path)]) == 0
    from envcheck.render import documents

    assert (tmp_path / "r.zh-CN.md").is_file() and current() == "en"
    assert "## Health" in documents.render_markdown(factories.report(), analyse(factories.report()))
