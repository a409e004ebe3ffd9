"""Node and fleet results in every presentation: every key the analysis and the node runner can hand over
is phrased in both languages, the terminal fits 100 columns with one line per table row, the documents
say what the analysis found (and the same bytes twice), and ``envcheck render`` takes a fleet report."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import node_reports as nr
import pytest
from in_lang import print_fleet, print_run, render_html, render_markdown, write_documents
from rich.cells import cell_len

from envcheck.analysis import analyse, narrowing
from envcheck.analysis import fleet as af
from envcheck.analysis import node as an
from envcheck.analysis.collectives import NO_GPU_TIME
from envcheck.analysis.counters import COUNTER_ORDER
from envcheck.analysis.links import PATH_SOURCES, GpuNvlinks
from envcheck.model import dump, load
from envcheck.model.fleet import DIRECTIONS, RANK_STATUSES, Fleet
from envcheck.model.node import COPY_KINDS, COPY_METHODS
from envcheck.render.fleet_view import fleet_view
from envcheck.render.i18n import LANGS, catalog, language
from envcheck.render.node_view import node_section
from envcheck.render.terminal.console import capture

# One pytest-xdist worker runs this module: the node's and the fleet's pages (a module fixture, charts drawn) are made once.
pytestmark = pytest.mark.xdist_group("node_view")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def node_trouble():
    return nr.node_report(trouble=True)


@pytest.fixture(scope="module")
def fleet_report():
    return nr.fleet_report()


@pytest.fixture(scope="module")
def html_of(node_trouble, fleet_report) -> dict[str, str]:
    """The English page of each, charts drawn, rendered once for the tests that read it."""
    return {"node": render_html(node_trouble), "fleet": render_html(fleet_report)}


# --------------------------------------------------------------------------- every key phrased


def _keys() -> set[str]:
    """Every catalogue key a node or fleet key can become, from the registries the analysis keeps."""
    words = {
        "node.problem.": an.PROBLEM_KEYS, "node.test.": an.NODE_TESTS,
        "node.reason.": (*an.SKIP_REASONS, *an.SIZE_SKIPS, *an.ALGO_REASONS, *an.RUN_ERRORS),
        "node.coll.status.": an.COLLECTIVE_STATUSES, "node.size_skip.": an.SIZE_SKIPS,
        "node.source.": PATH_SOURCES, "node.via.": ("nvlink", "nvswitch", "pcie"),
        "node.copy.kind.": COPY_KINDS, "node.copy.name.": COPY_KINDS, "node.method.": COPY_METHODS,
        "node.copy.cell.": (*an.RUN_ERRORS, "failed"), "node.counter.": COUNTER_ORDER,
        "node.metric.": an.OUTLIER_METRICS, "node.outlier.": an.OUTLIER_METRICS,
        "node.outlier.short.": an.OUTLIER_METRICS, "node.status.": af.VERDICT_STATUSES,
        "fleet.finding.": af.FINDING_KINDS, "fleet.narrowing.": narrowing.CONCLUSION_KINDS,
        "fleet.verdict.": af.VERDICT_STATUSES, "fleet.source.": af.SOURCES, "fleet.missing.": af.MISSING_REASONS,
        "fleet.metric.": af.METRIC_KEYS, "fleet.rank.": RANK_STATUSES, "fleet.direction.": DIRECTIONS,
        "fleet.judged.": af.SOURCES, "fleet.references.": af.SOURCES, "fleet.col.reference.": af.SOURCES,
        "node.coll.title.": ("node", "world"), "node.coll.rank.": ("error", "missing"),
        "node.coll.note.": ("error", "unverified"), "node.copies.d2d.": ("1", "2"),
    }
    return {prefix + k for prefix, keys in words.items() for k in keys}


@pytest.mark.parametrize("lang", LANGS)
def test_every_key_the_node_and_fleet_analysis_can_produce_is_phrased(lang):
    missing = sorted(k for k in _keys() if k not in catalog(lang))
    assert not missing


def _literals(pattern: str, *paths: str) -> set[str]:
    text = "".join((ROOT / p).read_text(encoding="utf-8") for p in paths)
    return set(re.findall(pattern, text))


NODE_RUNNER = [f"envcheck/node/{p.name}" for p in (ROOT / "envcheck" / "node").glob("*.py")]


def test_the_registries_hold_every_key_the_code_writes():
    """The keys are string literals where they are written; a new one must join its registry (and so be
    phrased), or this fails."""
    assert _literals(r'NodeProblem\("(\w+)"', "envcheck/analysis/node.py") == set(an.PROBLEM_KEYS)
    assert _literals(r'Finding\("(\w+)"', "envcheck/analysis/fleet.py") <= set(af.FINDING_KINDS)
    assert _literals(r'Conclusion\("(\w+)"', "envcheck/analysis/narrowing.py") == set(narrowing.CONCLUSION_KINDS)
    assert _literals(r'"(\w+_links?)"(?:\)|, gen)', "envcheck/analysis/links.py") == set(PATH_SOURCES)
    assert _literals(r'status = "(\w+)"', "envcheck/analysis/collectives.py") <= set(an.COLLECTIVE_STATUSES)
    assert _literals(r'status = "(\w+)"', "envcheck/analysis/fleet.py") <= set(af.VERDICT_STATUSES)
    assert _literals(r'(?:return \(\), |or )"(\w+)"', "envcheck/analysis/collectives.py") | {"not_in_nccl_log"} == set(an.ALGO_REASONS)
    reasons = _literals(r'Metric\([^()]*?, None, "(\w+)"\)', "envcheck/analysis/fleet.py") | _literals(
        r'reason="(\w+)"', "envcheck/analysis/fleet.py")
    assert reasons <= set(af.MISSING_REASONS), reasons - set(af.MISSING_REASONS)
    written = set()
    for pattern in (r'error = "(\w+)"', r'"error": "(\w+)"', r'err = "(\w+)"', r'skipped="(\w+)"', r'reason = "(\w+)"',
                    r'NodeSkip\("\w+", "(\w+)"\)', r'error = "(\w+)" if'):
        written |= _literals(pattern, *NODE_RUNNER)
    written |= set(re.findall(r'"(\w+)" if launch\.\w+', "".join((ROOT / p).read_text() for p in NODE_RUNNER)))
    vocabulary = set(an.RUN_ERRORS) | set(an.SIZE_SKIPS) | set(an.SKIP_REASONS) | set(an.ALGO_REASONS)
    assert written and written <= vocabulary, written - vocabulary
    tests = _literals(r'NodeSkip\("(\w+)"', *NODE_RUNNER) | _literals(r'_guard\("(\w+)"', *NODE_RUNNER)
    assert tests == set(an.NODE_TESTS)


def test_a_crashed_step_is_phrased_with_its_detail_and_an_unknown_reason_shown_as_it_is():
    from envcheck.render.node_view import cause

    assert cause(f"{an.CRASHED}: OSError: x") == "it crashed: OSError: x"
    assert cause("timed_out") == "it ran past its time limit and was stopped"
    assert cause("RuntimeError: NCCL error") == "RuntimeError: NCCL error"
    assert an.skip_reason("crashed") == ("crashed", None)


# --------------------------------------------------------------------------- the terminal


def assert_fits(text: str, width: int = 100) -> None:
    wide = [ln for ln in text.splitlines() if cell_len(ln) > width]
    assert not wide, wide[:3]
    assert all(ln == ln.rstrip() for ln in text.splitlines())


RULE = re.compile(r"^-{8,}$")
BULLET = re.compile(r"^ [-✗!✓] ")


def row_counts(text: str) -> list[int]:
    """Lines under each table's header rule, up to a blank line or a bullet: a wrapped cell adds lines.
    A table too wide for the console is printed in parts that repeat the row names
    (``console.print_fitted``): consecutive tables whose rows start alike count as one."""
    lines = text.splitlines()
    out: list[int] = []
    last: list[str] | None = None
    end = -1  # the line after the previous table's last row
    for i, line in enumerate(lines):
        if RULE.match(line):
            rows = []
            for row in lines[i + 1:]:
                if not row.strip() or BULLET.match(row):
                    break
                rows.append(row)
            names = [row.split()[0] for row in rows]
            # The next part of the same table: one blank line, its header, its rule, the same row names.
            if not (names and names == last and end == i - 2 and not lines[end].strip()):
                out.append(len(rows))
            last, end = names, i + 1 + len(rows)
    return out


def _expected_rows(sections) -> list[int]:
    return [len(t.rows) for s in sections for p in s.parts for t in p.tables if t.layout != "facts"]


@pytest.mark.parametrize("lang", LANGS)
def test_a_two_gpu_node_report_fits_100_columns_one_line_per_row(node_trouble, lang):
    a = analyse(node_trouble)
    text = capture(lambda c: print_run(c, node_trouble, a, lang=lang), width=100)
    assert_fits(text)
    with language(lang):
        expected = _expected_rows([node_section(a.node)])
    assert row_counts(text)[:len(expected)] == expected
    if lang == "en":
        assert "GPU1             3856             653   24/24       0       0  GB/s −14%, TFLOP/s −7.1%" in text
        assert "  4 GiB         –         –           –           –           –  –                    –" in text
        assert "  1 MiB   14.6 µs   45.0 µs        71.8        71.8         16%  RING/LL              0" in text
        assert "  4 GiB  out of memory" in text and "…" not in text  # the status in a part of its own, whole
        assert "✗ GPU 1 NVLink 3: NVLink CRC (data) grew by 51234 during the tests (712 per s), past its limit." in text
        # Each GPU's bench under its own heading, both complete.
        assert text.count("vector_add  GPU time per call") == 2


@pytest.mark.parametrize("lang", LANGS)
def test_a_two_node_fleet_report_fits_100_columns_one_line_per_row(fleet_report, lang):
    a = analyse(fleet_report)
    text = capture(lambda c: print_fleet(c, fleet_report, a, lang=lang), width=100)
    assert_fits(text)
    with language(lang):
        v = fleet_view(fleet_report, a)
    shown = [s if not s.id.startswith("node-") else dataclasses.replace(
        s, parts=tuple(p for p in s.parts if p.id.endswith("gpus"))) for s in v.sections]
    assert row_counts(text) == _expected_rows(shown)
    full = capture(lambda c: print_fleet(c, fleet_report, a, lang=lang, full=True), width=100)
    assert_fits(full)
    assert row_counts(full) == _expected_rows(v.sections)


def test_the_fleet_summary_names_the_slow_rank_the_failures_and_each_reason(fleet_report):
    text = capture(lambda c: print_fleet(c, fleet_report, analyse(fleet_report)), width=100)
    assert "The all_reduce slowness follows rank 3 on host n1: its GPU or its own links." in text
    assert "Rank 2 on n1 failed in its own suite: RuntimeError: CUDA error: uncorrectable ECC" in text
    assert "Rank 3 on n1 reported in time but took 132 s, against a median of 61.0 s for the others." in text
    assert ("GPU bandwidth (slowest GPU): 3856 GB/s against 4474 GB/s (baseline), 14% worse; 5.0% allowed."
            in text)
    assert "all_reduce busbw at 4 GiB: not measured (this node has no such value; baseline 343 GB/s)" in text
    assert "n1    2, 3   take out of service" in text
    assert "Baseline: reports/2026-11-21_0900Z_fleet-2x_n0.json (host n0" in text


def test_a_fleet_against_its_median_says_so():
    r = nr.fleet_report(baseline=False)
    text = capture(lambda c: print_fleet(c, r, analyse(r)), width=100)
    assert "No baseline given: each node is compared with the fleet's median." in text
    assert "The fleet's medians" in text


def test_a_timed_out_rank_says_how_long_it_was_given(fleet_report):
    f = fleet_report.fleet
    ranks = (*f.ranks[:3], dataclasses.replace(f.ranks[3], status="timeout", given_s=900.0, elapsed_s=None))
    r = dataclasses.replace(fleet_report, fleet=dataclasses.replace(f, ranks=ranks))
    text = capture(lambda c: print_fleet(c, r, analyse(r), lang="en"), width=100)
    assert "Rank 3 on n1 sent nothing from its own suite in the 900 s it was given." in text
    assert re.search(r"3  n1    GPU1  hung\s+–\s+900 s", text)


# --------------------------------------------------------------------------- the documents


def test_node_documents_show_every_part(node_trouble, html_of):
    md = render_markdown(node_trouble, "en", "x_charts")
    for text in ("## Node tests (fail)", "### GPUs", "### Topology", "### Peer copies", "### Error counters",
                 "| GPU0 | X | NV18 (450 GB/s) | Gen5 x16 | – | 18/18 (26.6 GB/s each, NVML signalling) |",
                 "| GPU1 | no peer access | X |", "**GPU 1 as probed**", "| PCIe link | Gen5 x8 (max Gen5 x16) |",
                 "| 4 GiB | – | – | – | – | – | – | – | out of memory |",
                 "| 1 MiB | 14.6 µs | 45.0 µs (launch-bound) | 71.8 | 71.8 | 16% | RING/LL | 0 | ok |",
                 "NCCL switched from RING/LL to RING/SIMPLE at 64 MiB",
                 "1 size ran at more than one pace: the mean of its GPU replays lies over 3.0% above their fastest tenth "
                 "(all\\_to\\_all 64 MiB: +3.7%).", "| 64 MiB | 144 µs (two paces) | 138 µs | 468 | 234 |",
                 "![all\\_reduce: bus bandwidth by message size](x_charts/node0_all_reduce_busbw.svg)",
                 "## Benchmark on GPU 0: NVIDIA H200", "## Benchmark on GPU 1: NVIDIA H200",
                 "![vector\\_add: time per call](x_charts/gpu1_vector_add_time.svg)"):
        assert text in md, text
    html = html_of["node"]
    ids = re.findall(r'id="([^"]+)"', html)
    assert len(ids) == len(set(ids)), "an HTML id repeats"
    assert 'id="gpu0_case-vector_add-torch-fp32-fp32-1048576"' in html
    assert set(re.findall(r'href="#([^"]+)"', html)) <= set(ids), "a link to nowhere"


def test_fleet_documents_show_verdicts_ranks_world_nodes_and_rules(fleet_report):
    md = render_markdown(fleet_report, "en", "f_charts")
    for text in ("## Verdicts", "### n1: take out of service", "## Ranks", "## Collectives across nodes",
                 "## Node n0 (pass)", "## Node n1 (fail)", "## Rules and baseline", "**Rules**",
                 "| peer. | every metric starting peer. | higher | 10% |",
                 "The all\\_reduce slowness follows rank 3 on host n1",
                 "![all\\_reduce: bus bandwidth by message size](f_charts/world0_all_reduce_busbw.svg)",
                 "(f_charts/n1_0_all_reduce_busbw.svg)"):
        assert text in md, text


@pytest.mark.slow  # a second render of every node page (~4 s); test_golden holds the bytes of node_x2 fast
def test_documents_are_the_same_bytes_twice(node_trouble, fleet_report, html_of):
    for name, r in (("node", node_trouble), ("fleet", fleet_report)):
        assert render_markdown(r, "zh-CN") == render_markdown(r, "zh-CN")
        assert render_html(r) == html_of[name]


@pytest.mark.slow  # both pages drawn again in Chinese (~4 s); test_zh_cn_everywhere[node] and [fleet] stay fast
def test_a_chinese_node_and_fleet_render_has_no_english_catalogue_sentence(node_trouble, fleet_report):
    from test_render import _english_fragments

    machine = " ".join(c.finding + " " + c.title + " " + (c.fix or "") for n in fleet_report.fleet.nodes
                       for c in n.checks)
    fragments = [f for f in _english_fragments() if f not in machine]
    for r in (node_trouble, fleet_report):
        a = analyse(r)
        texts = [render_markdown(r, "zh-CN", analysis=a), render_html(r, "zh-CN", analysis=a)]
        texts.append(capture(lambda c, r=r, a=a: (print_fleet if r.fleet else print_run)(c, r, a, lang="zh-CN"),
                             width=100))
        for text in texts:
            found = [f for f in fragments if f in text]
            assert not found, found[:5]


def test_envcheck_render_takes_a_fleet_report_and_a_node_report(tmp_path, fleet_report, node_trouble, undrawn_charts):
    """The files and links of a render (a placeholder SVG where each chart goes: their drawing is tested above)."""
    with undrawn_charts():
        _render_both(tmp_path, fleet_report, node_trouble)


def _render_both(tmp_path, fleet_report, node_trouble):
    for name, r in (("fleet.json", fleet_report), ("node.json", node_trouble)):
        path = tmp_path / name
        dump(r, path)
        again = load(path)
        assert again == r
        written = write_documents(again, path, ["md", "html"], "en")
        names = {p.name for p in written}
        assert {f"{path.stem}.md", f"{path.stem}.html"} <= names
        charts = [p for p in written if p.suffix == ".svg"]
        assert charts and all(p.parent.name == f"{path.stem}_charts" for p in charts)
        md = (tmp_path / f"{path.stem}.md").read_text()
        assert all(f"{path.stem}_charts/{p.name}" in md for p in charts)


def test_cli_render_of_a_fleet_report(tmp_path, fleet_report, undrawn_charts, capsys):
    from envcheck import cli

    path = tmp_path / "f.json"
    dump(fleet_report, path)
    with undrawn_charts():
        assert cli.main(["render", str(path)]) == 0
    assert (tmp_path / "f.html").exists() and "f.md" in capsys.readouterr().out


# --------------------------------------------------------------------------- the analysis behind them


def test_the_analysis_is_computed_once_and_carried(node_trouble, fleet_report):
    a = analyse(node_trouble)
    assert a.node is not None and a.fleet is None and a.node.status == "fail"
    assert [g.index for g in a.node.gpus if g.outliers] == [1] and a.node.gpus[1].condition.temperature_c == 87
    f = analyse(fleet_report).fleet
    assert [v.status for v in f.verdicts] == ["pass", "fail"] and [v.host for v in f.drain] == ["n1"]
    assert (f.sweeps[0].conclusion.kind, f.sweeps[0].conclusion.ranks) == ("rank", (3,))
    assert [s.rank for s in f.slow] == [3] and [r.rank for r in f.failed_ranks] == [2]


def test_a_reference_the_node_lacks_is_not_measured_never_a_pass(fleet_report):
    f = analyse(fleet_report).fleet
    n1 = next(v for v in f.verdicts if v.host == "n1")
    missing = {x.metric: x.reason for x in n1.findings if x.kind == "missing"}
    assert missing == {"node.all_reduce.busbw_gbps@4294967296": "not_measured",
                       "node.broadcast.busbw_gbps@4294967296": "not_measured"}
    worse = next(x for x in n1.findings if x.metric == "gpu.bandwidth_gbps")
    assert (worse.margin, worse.direction, worse.source) == (0.05, "higher", "baseline")


def test_metric_names_are_described_by_the_module_that_builds_them():
    assert af.describe_metric("node.all_reduce.busbw_gbps@4294967296") == af.MetricName(
        "busbw", (("op", "all_reduce"), ("size_bytes", 4 << 30)), "GB/s")
    assert af.describe_metric("peer.h2d_gbps").params == (("kind", "h2d"),)
    assert af.describe_metric("gpu.matmul_tflops").unit == "TFLOP/s"
    assert af.describe_metric("future.metric") == af.MetricName("other", (("name", "future.metric"),))
    names = {m.name for n in analyse(nr.fleet_report()).fleet.nodes for m in n.metrics}
    assert all(af.describe_metric(x).key != "other" for x in names)


def test_counter_rows_sum_links_and_flag_what_grew_past_its_limit(node_trouble):
    n = analyse(node_trouble).node
    crc = next(r for r in n.counters if (r.gpu, r.name) == (1, "crc_data"))
    assert (crc.links, crc.delta, crc.over_limit) == (18, 51234, True)
    assert crc.per_s == pytest.approx(51234 / 72)
    assert {(c.gpu, c.name, c.link) for c in n.counters_over_limit} == {(1, "crc_data", 3), (1, "recovery", 3)}


def test_a_reboot_between_the_counter_readings_leaves_the_interval_unknown_not_negative(node_trouble):
    # The uptime restarts at a reboot: the readings' difference is no interval, and no growth is derived.
    node = node_trouble.node
    rebooted = dataclasses.replace(node.counters_after, uptime_s=60.0)
    report = dataclasses.replace(node_trouble, node=dataclasses.replace(node, counters_after=rebooted))
    n = analyse(report).node
    assert analyse(node_trouble).node.counters_interval_s == pytest.approx(72.0)
    assert n.counters_interval_s is None and not n.counters_over_limit
    assert all(r.delta is None and r.per_s is None for r in n.counters)
    md = render_markdown(report)
    counters = md.split("### Error counters", 1)[1].split("\n### ", 1)[0]
    assert "The uptime did not grow between the readings" in counters and "apart" not in counters
    zh = capture(lambda c: print_run(c, report, analyse(report), lang="zh-CN"), width=100)
    assert "开机时长没有增加" in zh


def test_the_topology_shows_each_gpus_nvlinks_as_the_analysis_counted_them(node_trouble):
    # H200 x2: 18 NVLinks per GPU, all active, 26.562 GB/s each (NVML's speed in MB/s).
    n = analyse(node_trouble).node
    assert n.nvlinks == (GpuNvlinks(0, 18, 18, 26.562), GpuNvlinks(1, 18, 18, 26.562))
    assert "| 18/18 (26.6 GB/s each, NVML signalling) |" in render_markdown(node_trouble)


def test_an_unverified_narrowing_run_is_marked_as_in_the_sweep_table(fleet_report):
    from envcheck.render.node_view import narrowing

    sa = analyse(fleet_report).fleet.sweeps[0]
    rows = (dataclasses.replace(sa.narrowing[0], status="unverified"), *sa.narrowing[1:])
    _, table = narrowing(dataclasses.replace(sa, narrowing=rows))
    status = table.rows[0][-1]
    assert (status.text, status.status) == ("unverified", "warn")


def test_a_fleet_report_round_trips_and_its_hosts_can_be_anything(fleet_report):
    odd = nr.with_hosts(fleet_report, "[n/]")
    assert {n.host for n in odd.fleet.nodes} == {"[n/]0", "[n/]1"}
    assert isinstance(odd.fleet, Fleet) and analyse(odd).fleet.drain[0].host == "[n/]1"


def test_every_reason_for_no_gpu_time_is_phrased_in_both_languages():
    from envcheck.model.node import GPU_TIME_REASONS
    from envcheck.render.i18n import catalog

    assert set(GPU_TIME_REASONS) | {"not_recorded"} == set(NO_GPU_TIME)
    for lang in ("en", "zh-CN"):
        for why in NO_GPU_TIME:
            assert f"node.gpu_time.{why}" in catalog(lang)
