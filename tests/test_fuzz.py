"""Hostile strings in every field a report carries from the machine: rendering never crashes, never obeys them.

Host names, environment variable values, GPU names, the labels and parameters of notes, check titles,
findings and fixes, failure details, report file names in a diff: each is drawn from fragments that
mean something somewhere (Markdown, HTML, rich markup, terminal escapes, bidi overrides, TeX) and
the renders must show them as text:

* run, diff and history render to Markdown, HTML and the terminal without an exception, and so do a
  node run's and a fleet's reports (host names, errors, reasons, Xid lines, NCCL's names, baseline);
* the HTML has no element or attribute the templates and the chart writer do not write;
* the Markdown, rendered by a CommonMark parser, has no raw HTML: only the elements Markdown itself
  makes, no event-handler attribute, images only of the report's own charts;
* the terminal output holds no ESC and no bidi control.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import compare_data
import factories
import node_reports
import pytest

pytest.importorskip("hypothesis")  # test extras: every test here needs both
pytest.importorskip("markdown_it")

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from in_lang import print_diff, print_history, print_run, render_diff, render_history, render_html, render_markdown
from markdown_it import MarkdownIt  # noqa: E402

from envcheck.analysis import analyse
from envcheck.model import Case, Check, Failure, Gpu, Note, known, legacy
from envcheck.render import charts
from envcheck.render.terminal.console import capture

ROOT = Path(__file__).resolve().parent.parent
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
FRAGMENTS = ["``", "`", "<img src=x onerror=alert(1)>", "<script>", "</td>", "&lt;", "&amp;", "[/]", "[bold red]",
             "[link=http://x]", "\x1b[2J", "\x1b]0;title\x07", "\x9b", "\r", "\n", "\r\n", "\t", "\x00", "\u202e",
             "\u2066", "\u200b", "|", "||", "\\", "$\\undefinedmacro$", "$$", "# h", "> q", "- l", "1. n", "***",
             "_x_", "]]>", "<!--", "{x}", "{", "%s", "\"'", "java\tscript:", "[a](javascript:alert(1))", "![i](x)",
             "=", ":smile:", "\ud7ff", "中文", " "]
hostile = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), min_size=1, max_size=6).map("".join)
# Every fragment in every field at once: the first example of each test below, so that no fragment is left to the
# draws (which then need fewer examples: each one renders with its charts).
EVERY = "".join(FRAGMENTS)


@functools.cache
def _source_names() -> tuple[set[str], set[tuple[str, str]]]:
    """Elements and attributes the templates write, and those the chart writer writes for a benign run."""
    # The templates, and the two render modules that write HTML of their own (the table of contents,
    # the token boxes of fix commands).
    src = "".join(p.read_text() for p in [*(ROOT / "envcheck" / "templates").glob("*.html.j2"),
                                          ROOT / "envcheck" / "render" / "documents.py",
                                          ROOT / "envcheck" / "render" / "escape.py"])
    tags = {t.lower() for t in re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", src)}
    attrs = {(t, a.lower()) for t in tags for a in re.findall(r'\s([a-zA-Z][a-zA-Z-]*)=["{]', src)}
    svg = collect("".join(d.svg for d in charts.run_charts(analyse(factories.report()).bench, "en")))
    return tags | svg.tags, attrs | svg.attrs


MD_TAGS = {"h1", "h2", "h3", "h4", "p", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "code",
           "strong", "em", "hr", "img", "blockquote", "a", "br"}


class Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attrs: set[tuple[str, str]] = set()
        self.srcs: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for k, v in attrs:
            self.attrs.add((tag, k))
            if k == "src":
                self.srcs.append(v or "")
            if k == "href":
                self.hrefs.append(v or "")

    handle_startendtag = handle_starttag


def collect(html: str) -> Collect:
    c = Collect()
    c.feed(html)
    c.close()
    return c


def check_html(html: str) -> None:
    html = re.sub(r'<svg [^>]*class="undrawn-chart"></svg>', "", html)  # conftest's placeholder (charts_once)
    c = collect(html)
    tags, attrs = _source_names()  # drawn on first use: collection draws no chart
    assert c.tags <= tags, c.tags - tags
    assert c.attrs <= attrs, c.attrs - attrs
    assert all(h.startswith("#") for h in c.hrefs), c.hrefs
    assert not any(ch in html for ch in BIDI)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", html)


def check_markdown(md: str) -> None:
    html = MarkdownIt("commonmark").enable("table").render(md)
    c = collect(html)
    assert c.tags <= MD_TAGS, c.tags - MD_TAGS
    assert not [a for a in c.attrs if a[1].startswith("on") or a[1] in ("style",) and a[0] != "td" and a[0] != "th"]
    assert all(re.fullmatch(r"[\w.-]+_charts/\w+\.svg", s) for s in c.srcs), c.srcs
    assert not [h for h in c.hrefs if not h.startswith("#")], c.hrefs  # a link from machine text
    assert "\r" not in md and not any(ch in md for ch in BIDI)


def check_terminal(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert not any(ch in text for ch in BIDI)


def charts_once(undrawn_charts, lang: str) -> contextlib.AbstractContextManager[None]:
    """The charts drawn in English only: the Chinese charts carry the same machine strings through the same
    chart writer (only envcheck's own labels differ), and drawing them was half of these tests' time. The
    Chinese pages around them are checked all the same (Chinese charts: test_render.py, test_chart_draw.py)."""
    return contextlib.nullcontext() if lang == "en" else undrawn_charts()


@contextlib.contextmanager
def gpu_charts_undrawn() -> Iterator[None]:
    """A node page's GPU charts (``gpu<i>_...``, 22 of its 25) as placeholders: no machine text reaches them (the
    run test above draws them for its every-fragment example); the node's and the world's charts are drawn."""
    from conftest import PLACEHOLDER_SVG

    from envcheck.render import chart_draw

    def one(chart, name="chart"):
        return PLACEHOLDER_SVG if re.match(r"gpu\d+_", name) else real(chart, name)

    real = chart_draw.to_svg
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chart_draw, "to_svg", one)
        mp.setattr(chart_draw, "to_svgs", lambda jobs: [one(c, n) for c, n in jobs])
        yield


def hostile_report(host, gpu, env_value, note_label, title, finding, fix, detail):
    r = factories.report(host=host, gpu_name=gpu)
    sections = dict(r.environment.sections)
    sections["env"] = {"variables": known({"CUDA_LAUNCH_BLOCKING": env_value, note_label[:20] or "X": fix})}
    gpus = tuple(Gpu(g.index, {**g.facts, "name": known(gpu)}) for g in r.environment.gpus)
    env = dataclasses.replace(r.environment, sections=sections, gpus=gpus)
    bench = r.bench
    cases = list(bench.cases)
    cases[0] = dataclasses.replace(cases[0], notes=(Note(f"bench.{note_label}" if note_label else "x",
                                                         {"op": note_label, "detail": detail}),))
    cases[1] = Case(cases[1].op, cases[1].impl, cases[1].dtype, cases[1].precision, cases[1].shape,
                    failure=Failure("compile", detail))
    bench = dataclasses.replace(bench, cases=tuple(cases),
                                notes=(legacy(detail), Note(note_label or "y", {"label": note_label})),
                                skipped=(dataclasses.replace(bench.skipped[0], reason=Note("bench.skip", {"why": detail})),))
    checks = (Check("x", "fail", title, finding, fix=fix), *r.checks)
    return dataclasses.replace(r, environment=env, checks=checks, benches=(bench,))


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(host=hostile, gpu=hostile, env_value=hostile, note_label=hostile, title=hostile, finding=hostile, fix=hostile,
       detail=hostile)
@example(host=EVERY, gpu=EVERY, env_value=EVERY, note_label=EVERY, title=EVERY, finding=EVERY, fix=EVERY, detail=EVERY)
def test_run_renders_never_obey_machine_text(undrawn_charts, host, gpu, env_value, note_label, title, finding, fix,
                                            detail):
    finding = finding.replace("\n", " ")  # a check finding is one line by the model's rule
    r = hostile_report(host, gpu, env_value, note_label, title, finding, fix, detail)
    a = analyse(r)
    for lang in ("en", "zh-CN"):
        # No machine text of a run reaches its charts (the GPU's name and the notes are on the page around them):
        # drawn for the example with every fragment in every field, placeholders for the draws.
        with contextlib.nullcontext() if lang == "en" and host == EVERY else undrawn_charts():
            check_html(render_html(r, lang, analysis=a))
        check_markdown(render_markdown(r, lang, "r_charts", analysis=a))
    check_terminal(capture(lambda c: print_run(c, r, a), width=100))


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(label=hostile, host=hostile, gpu=hostile, value=hostile, title=hostile, fix=hostile, reason=hostile)
@example(label=EVERY, host=EVERY, gpu=EVERY, value=EVERY, title=EVERY, fix=EVERY, reason=EVERY)
def test_diff_and_history_renders_never_obey_machine_text(label, host, gpu, value, title, fix, reason):
    s = compare_data.Strings(base_label=label, other_label=label + "2", host=host, base_gpu=gpu, other_gpu=gpu + "x",
                             env_value=value, check_title=title, check_finding=title.replace("\n", " "), check_fix=fix,
                             reason=reason,
                             mixed_gpus=True)
    d, h = compare_data.diff(s), compare_data.history(s)
    check_html(render_diff(d, "html"))
    check_html(render_history(h, "html"))
    check_markdown(render_diff(d, "md"))
    check_markdown(render_history(h, "md"))
    check_terminal(capture(lambda c: print_diff(c, d), width=100))
    check_terminal(capture(lambda c: print_history(c, h), width=100))


# --------------------------------------------------------------------------- node and fleet reports


def hostile_node(report, host, error, line, name, algo):
    """A node report whose every machine-supplied string is hostile: host, errors and reasons the runner
    stored as text, the kernel's Xid line, NVML's reasons, the GPU's name, NCCL's algorithm names."""
    from envcheck.model.node import AlgoChoice, NodeSkip, XidEvent, XidScan

    r = node_reports.with_hosts(report, host)
    n = r.node
    topo = dataclasses.replace(n.topology, smi_reason=error, gpus=(
        n.topology.gpus[0], dataclasses.replace(n.topology.gpus[1], lost=error)))
    sweep = n.collectives[0]
    results = list(sweep.results)
    results[1] = dataclasses.replace(results[1], error=error)
    results[2] = dataclasses.replace(results[2], skipped=error)
    choices = (*sweep.choices, AlgoChoice(0, "AllReduce", results[3].size_bytes, algo, algo, nranks=2))
    sweep = dataclasses.replace(sweep, results=tuple(results), choices=choices, error=error, nccl_version=algo,
                                ranks=(dataclasses.replace(sweep.ranks[0], status="error", error=error, host=host),
                                       sweep.ranks[1]))
    copies = list(n.peer.copies)
    copies[0] = dataclasses.replace(copies[0], error=error, timing=None)
    peer = dataclasses.replace(n.peer, copies=tuple(copies), error=error)
    node = dataclasses.replace(n, topology=topo, collectives=(sweep,), peer=peer,
                               skipped=(NodeSkip("xid", f"crashed: {error}"), NodeSkip("counters", error)),
                               xid=XidScan(line, (XidEvent(79, line, line, 1.0),)))
    benches = tuple(dataclasses.replace(b, device=dataclasses.replace(b.device, name=name)) for b in r.benches)
    checks = (Check("x", "fail", name, line.replace("\n", " "), fix=error), *r.checks)
    return dataclasses.replace(r, node=node, benches=benches, checks=checks)


def hostile_fleet(host, error, line, name, algo):
    from envcheck.model.fleet import Baseline, Reference, Rule

    r = node_reports.with_hosts(node_reports.fleet_report(), host)
    f = r.fleet
    bad = hostile_node(node_reports.node_report(trouble=True), host + "1", error, line, name, algo)
    nodes = (f.nodes[0], dataclasses.replace(f.nodes[1], node=bad.node, checks=bad.checks, benches=bad.benches[1:]))
    ranks = tuple(dataclasses.replace(x, error=error if x.status == "error" else x.error) for x in f.ranks)
    base = Baseline(line, (*f.baseline.values, Reference(name, 1.0, algo)), host, error)
    world = dataclasses.replace(f.collectives[0], error=error, nccl_version=algo)
    fleet = dataclasses.replace(f, nodes=nodes, ranks=ranks, baseline=base, collectives=(world,), launcher=name,
                                rules=(Rule(name, "higher", 0.1), Rule("gpu.bandwidth_gbps", "higher", 0.05)))
    return dataclasses.replace(r, fleet=fleet)


NODE_FRAGMENTS = ["[/]", "[bold red]", "<script>alert(1)</script>", "`", "``", "\u202e", "\u2066", "\x1b[2J",
                  "\x1b]0;t\x07", "|", "\\", "# h", "\r\n", "中文", "*x*"]
node_hostile = st.lists(st.one_of(st.sampled_from(NODE_FRAGMENTS), st.text(max_size=3)), min_size=1,
                        max_size=5).map("".join)
NODE_EVERY = "".join(NODE_FRAGMENTS)  # as EVERY


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(host=node_hostile, error=node_hostile, line=node_hostile, name=node_hostile, algo=node_hostile)
@example(host=NODE_EVERY, error=NODE_EVERY, line=NODE_EVERY, name=NODE_EVERY, algo=NODE_EVERY)
def test_node_and_fleet_renders_never_obey_machine_text(undrawn_charts, host, error, line, name, algo):
    from in_lang import print_fleet

    node = hostile_node(node_reports.node_report(trouble=True), host, error, line, name, algo)
    fleet = hostile_fleet(host, error, line, name, algo)
    for r, printer in ((node, print_run), (fleet, print_fleet)):
        a = analyse(r)
        for lang in ("en", "zh-CN"):
            with charts_once(undrawn_charts, lang), gpu_charts_undrawn():
                check_html(render_html(r, lang, analysis=a))
            check_markdown(render_markdown(r, lang, "r_charts", analysis=a))
        text = capture(lambda c, r=r, a=a, printer=printer: printer(c, r, a), width=100)
        check_terminal(text)
        if "[/]" in host:
            assert "[/]" in text  # shown, not taken for markup
