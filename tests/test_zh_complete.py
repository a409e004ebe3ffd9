"""zh-CN is complete: every committed report, and every snapshot of the corpus checked, renders in
Chinese without English words of ours.

Generic on purpose: it walks whatever reports/ holds (runs, nodes, fleets, check reports, and a
diff and a history of them) and whatever snapshots the corpus holds, so a view another engineer
adds is held to the same rule once its reports are committed. For each one: the Markdown (code
spans left out: they hold commands), the HTML's text (code, scripts, styles and charts left out)
and the terminal view at 100 columns.

What may stay Latin:
- what the machine said: every string of the report's JSON but our own sentences (versions, paths,
  GPU and host names, errors, probe reasons as recorded), and every check's parameters;
- what the Chinese catalogue keeps verbatim: its Latin words (commands, product names, units,
  identifiers: a translator kept them on purpose), once quoted error messages (“...”) are set aside;
  ``test_chinese_messages_are_translated`` keeps that list honest;
- the short ``ALLOWED`` list below, each word with its reason.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from in_lang import (
    print_checks,
    print_diff,
    print_environment,
    print_fleet,
    print_run,
    render_diff,
    render_history,
    render_html,
    render_markdown,
)
from text_cut import without

from envcheck import snapshot
from envcheck.analysis import analyse
from envcheck.checks import evaluate
from envcheck.checks.keyed import keyed
from envcheck.compare.diff import diff
from envcheck.compare.history import history
from envcheck.model import SCHEMA_VERSION, Report, load, to_dict
from envcheck.probes.collect import collect
from envcheck.render.terminal.console import capture

# What is checked is the text around the charts (the SVG is left out of the HTML's and the Markdown's text).
pytestmark = pytest.mark.usefixtures("charts_not_drawn")

ROOT = Path(__file__).resolve().parent.parent
REPORTS = sorted((ROOT / "evidence").glob("*.json.gz"))
SNAPSHOTS = sorted((ROOT / "tests/fixtures/snapshots/corpus").glob("*.json"))

ALLOWED = {
    "envcheck",  # the program's own name, shown as a command and in the footer
    "x",  # the multiplication sign of shapes (4096 x 4096) and of speedups (1.9x)
    "us", "ns", "ms", "min", "h", "d",  # time units beside their numbers
    "iB", "KiB", "MiB", "GiB", "TiB", "GB", "TB", "TFLOP", "GFLOP", "MHz", "W", "C", "bit",  # units
    "IQR", "CV",  # the statistics' names, as Chinese papers write them
    "NVIDIA", "PyTorch", "Triton", "CUDA", "NCCL", "NVLink", "PCIe", "WSL", "GPU", "CPU", "SM", "L2", "HBM",  # products
    "SXM",  # the form factor in product names (H200 SXM), as NVIDIA's Chinese pages write it
    "JSON", "HTML", "Markdown", "SVG",  # file formats
}

WORD = re.compile(r"[A-Za-z][A-Za-z]+")
PLACEHOLDER = re.compile(r"\{[^}]*\}")
# Quoted verbatim: an error message as the program prints it (“...”), a published title (《...》).
QUOTED = re.compile(r"“[^”]*”|《[^》]*》")
CJK = re.compile(r"[\u4e00-\u9fff]")
URL = re.compile(r"https?://[^\s）)，,;；]+")  # a link's address
PATH = re.compile(r"[^\s（(“]*[A-Za-z0-9.~*]/[^\s）)，,;；”]*")  # a file or folder: /usr/lib/wsl/lib, ~/.bashrc, send/receive
ALNUM = re.compile(r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]+")  # a name with digits: H200, cu121, GPU-96f2ad0b
FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")  # a command-line flag: --index-url, -lcuda
# Identifiers: snake_case or dotted names (check ids, metric and rule names, ops, NVML counters,
# torch attributes: gpu.bandwidth_gbps, vector_add, crc_data, tl.dot). Never prose.
IDENTIFIER = re.compile(r"[A-Za-z0-9]*(?:[A-Za-z0-9]_|_[A-Za-z0-9]|[A-Za-z0-9]\.[A-Za-z]|[A-Za-z]\.(?=\s|$))[\w.]*")
# Our own words in a report's JSON: recorded English that the renderers phrase anew (or mark), and
# statuses, which they translate.
OWN_TEXT = {"title", "finding", "fix", "text", "status"}


def _catalog(lang: str) -> dict[str, str]:
    from envcheck.render.i18n import catalog

    return catalog(lang)


@functools.cache
def _kept_by_translator() -> frozenset[str]:
    words: set[str] = set()
    for v in _catalog("zh-CN").values():
        words.update(WORD.findall(_plain(PLACEHOLDER.sub(" ", v))))
    return frozenset(words)


def _plain(text: str) -> str:
    """``text`` without what is never prose: quotations, links, identifiers, paths and command-line flags."""
    for pattern in (QUOTED, URL, PATH, FLAG, IDENTIFIER, ALNUM):
        text = pattern.sub(" ", text)
    return text


def _machine_strings(data: Any, out: set[str], key: str = "") -> set[str]:
    if isinstance(data, str):
        if key not in OWN_TEXT:
            out.add(data)
    elif isinstance(data, dict):
        for k, v in data.items():
            if k == "params" and isinstance(v, dict):  # a check's or a note's parameters: machine text
                out.update(str(x) for x in v.values())
            else:
                _machine_strings(v, out, str(k))
    elif isinstance(data, (list, tuple)):
        for v in data:
            _machine_strings(v, out, key)
    return out


class _Text(HTMLParser):
    """An HTML page's visible text, without code, scripts, styles and charts."""

    SKIP = {"code", "pre", "script", "style", "svg", "title"}

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.depth = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self.SKIP:
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.parts.append(data)


def html_text(page: str) -> str:
    parser = _Text()
    parser.feed(page)
    return " ".join(parser.parts)


def markdown_text(doc: str) -> str:
    doc = re.sub(r"```.*?```", " ", doc, flags=re.DOTALL)
    doc = re.sub(r"<svg\b.*?</svg>", " ", doc, flags=re.DOTALL)
    doc = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", doc)  # a link's target is a path
    return re.sub(r"`[^`]*`", " ", doc)


def _flat(text: str) -> str:
    """One space for any run of whitespace (a terminal wraps long lines), no Markdown escapes."""
    return " ".join(text.replace("\\", "").split())


def _shortened(text: str, strings: list[str]) -> str:
    """Without machine strings that a narrow view cut short with an ellipsis (``/home/u/ve…``)."""
    while (end := text.find("…")) >= 0:
        before = text[:end]
        cut = max((k for s in strings for k in range(min(len(s), end), 5, -1) if before.endswith(s[:k])), default=0)
        text = before[:end - cut] + " " + text[end + 1:]
    return text


def _without_name(text: str, s: str) -> str:
    """The whole name ``s`` cut out of ``text``: a machine's "check" must not eat the middle of "envcheck", nor its
    "torch" the head of the identifier torch.cuda.graphs."""
    return without(text, s, re.compile(rf"(?<![\w.]){re.escape(s)}(?![\w]|\.\w)"))


class English:
    """english_words for one set of machine strings, what depends on the set alone worked out once (the media of
    one report share it)."""

    def __init__(self, machine: set[str]) -> None:
        self.kept = _kept_by_translator() | ALLOWED
        self.joinable = self.kept | machine
        self.strings = sorted({_flat(m) for m in machine}, key=len, reverse=True)
        self.whole = self.kept | {w for m in machine for w in WORD.findall(m)}

    def _rejoined(self, text: str) -> str:
        """A terminal folds a long line of Chinese where it runs out of columns, inside a Latin word too
        ("compi" / "le"): a word cut at a line end is joined again when the two pieces make a word we keep."""
        return re.sub(r"([A-Za-z]+)\n([A-Za-z]+)",
                      lambda m: m.group(1) + m.group(2) if m.group(1) + m.group(2) in self.joinable else m.group(0),
                      text)

    def words(self, text: str) -> list[str]:
        """Latin words in ``text`` that neither the machine said nor the Chinese catalogue keeps."""
        text = _flat(self._rejoined(text))
        for s in self.strings:
            if len(s) > 1 and s in text:
                text = _without_name(text, s)
        # A word of ours that a narrow terminal column cut short ("NVLi…" of NVLink, "bootstra…"): the cell's
        # layout, not English left untranslated (the whole word is judged wherever it is shown whole).
        text = re.sub(r"([A-Za-z]+)…", lambda m: " " if any(k.startswith(m.group(1)) for k in self.whole)
                      else m.group(0), text)
        text = _shortened(text, self.strings)
        text = _plain(text)
        return sorted({w for w in WORD.findall(text) if w not in self.kept})


def english_words(text: str, machine: set[str]) -> list[str]:
    """Latin words in ``text`` that neither the machine said nor the Chinese catalogue keeps."""
    return English(machine).words(text)


def _renders(report: Report) -> dict[str, str]:
    a = analyse(report)
    term = print_fleet if report.fleet is not None else print_run
    return {"md": markdown_text(render_markdown(report, "zh-CN", analysis=a)),
            "html": html_text(render_html(report, "zh-CN", analysis=a)),
            "terminal": capture(lambda c: term(c, report, a, lang="zh-CN"), width=100)}


def _problems(report: Report, renders: dict[str, str], extra: set[str] | None = None) -> dict[str, list[str]]:
    # The parameters of checks an older report recorded as text come from the rules run again on its facts.
    again = keyed(report.checks, report.environment, report.node)
    machine = _machine_strings(to_dict(report), set()) | {v for c in again for v in c.params.values()} | (extra or set())
    english = English(machine)
    found = {medium: english.words(text) for medium, text in renders.items()}
    return {m: w for m, w in found.items() if w}


@functools.cache
def _load(path: Path) -> Report | None:
    """A committed report; None for the JSON of a diff (an output, rendered below from its reports). Read once
    (a report is immutable)."""
    try:
        return load(path)
    except Exception:  # noqa: BLE001 - the diffs' JSON is not a report; test_the_walk counts the rest
        return None


SHORT = re.compile(r"[a-z][a-z0-9_.:-]{0,39}")  # a key, status, kind, op, dtype, phase ... (never prose)


def _what_it_holds(doc: Any, path: str, out: set[str]) -> set[str]:
    """Every field a report's JSON holds (as a path; list items as []) and every short lowercase value and flag
    there (keys, statuses, kinds, ops, phases): what decides which sentences of ours a render says."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(f"{path}.{k}")
            _what_it_holds(v, f"{path}.{k}", out)
    elif isinstance(doc, list):
        if doc and type(doc[0]) in (int, float) and type(doc[-1]) in (int, float):
            return out  # samples, times, counters: numbers hold nothing of the above (most of a report's JSON)
        for v in doc:
            _what_it_holds(v, f"{path}[]", out)
    elif isinstance(doc, bool) or (isinstance(doc, str) and SHORT.fullmatch(doc)) or path == ".schema_version":
        out.add(f"{path}={doc}")
    return out


def _by_content() -> dict[frozenset[str], list[Path]]:
    """The committed reports (the diffs' JSON left out) grouped by what they hold: the reports of one group differ
    only in numbers and machine strings (the same command run again minutes apart: eleven node runs of one
    afternoon), so one of each renders what the group says. Read from the raw JSON at collection."""
    groups: dict[frozenset[str], list[Path]] = {}
    for p in REPORTS:
        doc = json.loads(gzip.decompress(p.read_bytes()))
        if doc.get("format") == "envcheck-report":  # not a diff's JSON, nor the judge fit's
            groups.setdefault(frozenset(_what_it_holds(doc, "", set())), []).append(p)
    return groups


def _cover(groups: dict[frozenset[str], list[Path]]) -> list[frozenset[str]]:
    """Few groups that between them hold every field and value any group holds (greedy set cover: the group with
    the most not yet held, then again): 16 of 76 groups. The fast loop renders these; the slow suite the rest."""
    left, chosen = set().union(*groups), []
    while left:
        best = max(groups, key=lambda k: len(k & left))  # the first of equals: REPORTS is sorted
        chosen.append(best)
        left -= best
    return chosen


GROUPS = _by_content()
COVER = _cover(GROUPS)


def test_the_walk_finds_what_it_must() -> None:
    """Every committed report of the walk loads, and one of each group renders below."""
    reports = [p for group in GROUPS.values() for p in group]
    assert len(reports) >= 10 and len(SNAPSHOTS) >= 15
    too_new = [p.name for p in reports if (r := _load(p)) is None or r.schema_version > SCHEMA_VERSION]
    assert not too_new


@pytest.mark.parametrize("path", [pytest.param(group[0], marks=() if key in COVER else pytest.mark.slow)
                                  for key, group in GROUPS.items()], ids=lambda p: p.stem)
def test_every_committed_report_renders_in_chinese(path: Path) -> None:
    """One report of each group (_by_content): every view, structure, key and status of the committed reports;
    the groups of COVER (every field and value) in the fast loop."""
    report = _load(path)
    assert report is not None and report.schema_version <= SCHEMA_VERSION
    problems = _problems(report, _renders(report))
    assert not problems, problems


@pytest.mark.slow  # every committed run in one history (~5 s); the fast loop has test_terminal's and test_zh_cn_everywhere's
def test_a_diff_and_a_history_of_committed_reports_render_in_chinese() -> None:
    runs = [(p.stem, r) for p in REPORTS if (r := _load(p)) is not None and r.kind == "run" and r.node is None
            and r.fleet is None and r.benches]
    assert len(runs) >= 3
    d = diff(runs[:2])
    h = history(runs)
    machine: set[str] = set()
    for _, r in runs:
        _machine_strings(to_dict(r), machine)
    machine.update(name for name, _ in runs)
    # The names of the run settings a history step lists as changed: the report's own field names.
    machine.update(k for _, r in runs for b in to_dict(r).get("benches", []) for k in b.get("settings", {}))
    renders = {"diff.md": markdown_text(render_diff(d, "md", "zh-CN")),
               "diff.html": html_text(render_diff(d, "html", "zh-CN")),
               "diff.terminal": capture(lambda c: print_diff(c, d, lang="zh-CN"), width=100),
               "history.md": markdown_text(render_history(h, "md", "zh-CN")),
               "history.html": html_text(render_history(h, "html", "zh-CN"))}
    english = English(machine)
    found = {m: english.words(t) for m, t in renders.items()}
    assert not {m: w for m, w in found.items() if w}


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.stem)
def test_every_corpus_snapshot_checks_in_chinese(path: Path) -> None:
    host, nvml = snapshot.replay(snapshot.load(path))
    env = collect(host=host, nvml=nvml, runtime=True, timeout=60)
    checks = evaluate(env)
    report = Report(tool_version="0", created="2026-11-25T00:00:00Z", host="replayed", kind="check",
                    environment=env, checks=checks)
    renders = {"md": markdown_text(render_markdown(report, "zh-CN")),
               "html": html_text(render_html(report, "zh-CN")),
               "terminal": capture(lambda c: (print_environment(c, env, "zh-CN"),
                                              print_checks(c, checks, None, "zh-CN")), width=100)}
    problems = _problems(report, renders)
    assert not problems, problems


def test_english_text_is_found_where_it_is_left() -> None:
    """The detector itself: an English sentence of ours is caught, a machine string is not."""
    assert english_words("驱动 535.1 未加载 because the loader is missing", set()) == \
        ["because", "is", "loader", "missing", "the"]
    assert english_words("错误：CUDA unknown error", {"CUDA unknown error"}) == []
    assert english_words("运行 `because it fails`", set()) != []  # markdown_text drops code spans, not this
    assert english_words(markdown_text("运行 `because it fails`"), set()) == []
    assert english_words("H200 SXM 的 /usr/lib/wsl/lib 与 --index-url、torch.cuda.is_available()", set()) == []


def test_chinese_messages_are_translated() -> None:
    """A Chinese message with English prose in its English original has Chinese in it: the words the
    catalogue keeps verbatim (trusted above) are commands and names (a value of names alone, "CPU", is one), never
    an untranslated sentence."""
    en, zh = _catalog("en"), _catalog("zh-CN")
    prose = {"the", "a", "an", "is", "of", "to", "and", "or", "not", "no", "with", "for", "in", "on", "at", "by",
             "be", "it", "this", "that", "from", "are", "was", "has", "have", "see", "its", "their"}
    untranslated = [k for k, v in zh.items() if not CJK.search(v) and re.search(r"\b[a-z]{2,}\b", PLACEHOLDER.sub(" ", v))
                    and set(re.findall(r"[a-z]+", PLACEHOLDER.sub(" ", en[k]))) & prose]
    assert not untranslated, untranslated[:10]


def test_old_report_checks_are_said_anew_or_marked() -> None:
    """A report written before checks carried keys: its checks are phrased from the rules' keys where the
    rules today agree with the recorded status, and marked as recorded where they do not."""
    from envcheck.checks.keyed import keyed
    from envcheck.model import Check
    from envcheck.render.checktext import localized
    from envcheck.render.i18n import language

    old = next(r for p in REPORTS if (r := _load(p)) is not None and r.checks and not any(c.key for c in r.checks))
    again = keyed(old.checks, old.environment)
    assert [c.status for c in again] == [c.status for c in old.checks]  # the verdicts stay as recorded
    assert sum(c.key is not None for c in again) >= len(again) // 2
    stale = Check("gpu.ecc.0", "fail", "ECC", "GPU 0: 2 uncorrectable ECC errors")
    with language("zh-CN"):
        shown = localized(keyed((stale,), old.environment)[0])
    assert shown.title == "无不可纠正的显存错误" and shown.finding.endswith("（原始英文记录）")


def test_the_words_the_issue_named_are_chinese():
    """The column header "dtype", "bandwidth" in the ceilings table and the datasheet's name (cited as a
    title, 《...》, the way Chinese cites a document in another language)."""
    report = _load(ROOT / "evidence" / "2026-11-22_0104Z_vm_h200.json.gz")
    assert report is not None
    page = html_text(render_html(report, "zh-CN"))
    assert "数据类型" in page and "带宽" in page
    assert re.search(r"《NVIDIA H200[^》]*datasheet》", page)
    md = render_markdown(report, "zh-CN")
    assert "| bandwidth |" not in md and "| dtype |" not in md


def test_every_fact_an_environment_diff_names_has_a_label_in_every_language() -> None:
    """A changed fact is titled from the catalog (``fact.<key>``), else from the English label in
    compare/envdiff.py: "GPU count 2 -> 1" and "GPU 1 present" stood in the Chinese history of
    the committed runs."""
    from envcheck.compare import envdiff
    from envcheck.render.i18n import catalog

    keys = [f"{section}.{key}" for _, section, key, _, _ in envdiff.SECTION_FIELDS]
    keys += [f"gpu.{key}" for _, key, _, _ in envdiff.GPU_FIELDS] + ["gpu.present", "gpu.lost"]
    for lang in ("en", "zh-CN"):
        assert not [k for k in keys if f"fact.{k}" not in catalog(lang)], lang
