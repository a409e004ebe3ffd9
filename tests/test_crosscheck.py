"""``run --crosscheck``'s ratios and bars (envcheck/analysis/crosscheck.py) from recorded numbers: a row within its
bar passes, a row outside it is a named finding that fails the verdict and the exit status, a failing tool is a
finding of its own, and a pair that cannot be held is listed with its reason. Also the report's JSON (raw numbers
kept, read back the same), its views in both languages, and nccl-tests' committed outputs held against the node
report of the same call."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re

import pytest
from crosscheck_fakes import (
    MATMUL,
    MiB,
    all_reduce,
    bench,
    case,
    full_report,
    h100_1949z_with_its_nccl_tests,
    kernel,
    launch,
    loop,
    nccl_captures,
    nccl_row,
    nccl_run,
    node,
    ranks,
    report,
)
from evidence_files import EVIDENCE

from envcheck import model
from envcheck.analysis import analyse
from envcheck.analysis import crosscheck as ax
from envcheck.analysis.verdict import verdict
from envcheck.commands.run import exit_status
from envcheck.errors import EXIT_FAIL, EXIT_OK
from envcheck.model import Note
from envcheck.model.crosscheck import CopyTiming, Crosscheck, KernelTiming, LoopTiming, NcclTestsRun, ToolRun
from envcheck.node import nccl_tests

HEAD = bench(case("matmul", "torch", "fp16", MATMUL, 100.0), case("matmul", "triton", "fp16", MATMUL, 110.0))


def _rows(a, **match):
    return [r for r in a.crosscheck.rows if all(getattr(r, k) == v for k, v in match.items())]


# --------------------------------------------------------------------------- bars, findings, verdict, exit status


def test_one_row_within_and_one_outside_its_bar_fails_the_run_naming_the_row():
    """do_bench_cudagraph read 101 us for torch (100/101 = 0.990, within 3%) and 100 us for Triton (110/100 =
    1.10, outside): the Triton row is the finding, the verdict names it, the exit status is 1."""
    r = report(Crosscheck(kernels=(kernel("torch", 101.0), kernel("triton", 100.0))), (HEAD,))
    a = analyse(model.loads(model.dumps(r)))
    torch_row, triton_row = a.crosscheck.rows
    assert (torch_row.status, round(torch_row.ratio, 3), torch_row.bar) == ("within", 0.99, ax.KERNEL_BAR)
    assert (triton_row.status, round(triton_row.ratio, 2)) == ("outside", 1.1)
    assert [(f.key, f.row.impl) for f in a.crosscheck.findings] == [("outside_bar", "triton")]
    assert triton_row.counterpart.tool == "do_bench_cudagraph"
    assert ("rep_ms", "100") in triton_row.counterpart.settings
    v = verdict(a)
    assert [x.key for x in v.reasons] == ["crosscheck_kernel"]
    assert v.reasons[0].values.items() >= {"impl": "triton", "ratio": "1.100", "bar_pct": "3", "count": 1}.items()
    assert exit_status(a, stopped=False) == EXIT_FAIL


def test_every_row_within_its_bar_passes():
    r = report(Crosscheck(kernels=(kernel("torch", 99.0), kernel("triton", 109.0))), (HEAD,))
    a = analyse(r)
    assert a.crosscheck.ok and a.crosscheck.counts == {"within": 2, "outside": 0, "not_compared": 0}
    assert verdict(a).ok and exit_status(a, stopped=False) == EXIT_OK


def test_bars_are_inclusive_and_symmetric():
    # Ratios a little inside each bar pass, a little outside fail, above and below 1 alike.
    for ours, theirs, status in ((100.0, 97.2, "within"), (100.0, 102.9, "within"), (100.0, 96.9, "outside"),
                                 (100.0, 103.2, "outside")):
        r = report(Crosscheck(kernels=(kernel("torch", theirs),)), (bench(case("matmul", "torch", "fp16", MATMUL,
                                                                                ours)),))
        assert analyse(r).crosscheck.rows[0].status == status, (ours, theirs)


def test_collectives_against_nccl_tests_modes_and_the_plain_loop():
    """At 1 MiB (bar 5%) and 64 MiB (bar 2%): the plain GPU-time busbw against nccl-tests' graph mode with
    registration off and against its eager loop where that loop is not launch-bound (here it is, at both sizes:
    its busbw lies over the bar below its own graph mode's), the registered busbw against its default graph mode,
    time per call against the plain loop (10%). The recorded per call is 71 us against a loop's 29.75 us (issue
    41's 2.4x): outside, named."""
    small, large = all_reduce(MiB, 71.0, 12.0), all_reduce(64 * MiB, 250.0, 244.0)
    small = dataclasses.replace(small, registered_timings=ranks("cuda_graph", 12.2))
    g_small = MiB / (12.0e-6) / 1e9
    g_large = 64 * MiB / (244.0e-6) / 1e9
    cc = Crosscheck(
        loops=(loop(MiB, 29.75), loop(64 * MiB, 245.0)),
        nccl_tests=(nccl_run("graph_unregistered", (nccl_row(MiB, g_small * 1.04), nccl_row(64 * MiB, g_large * 1.03))),
                    nccl_run("eager", (nccl_row(MiB, MiB / 70e-6 / 1e9), nccl_row(64 * MiB, 64 * MiB / 250e-6 / 1e9))),
                    nccl_run("graph", (nccl_row(MiB, g_small), nccl_row(64 * MiB, g_large * 2)))))
    a = analyse(report(cc, n=node(small, large)))
    by = {(r.size_bytes, r.quantity, r.counterpart.mode): r for r in a.crosscheck.rows}
    assert len(by) == 8
    gpu_small, gpu_large = by[(MiB, "gpu_busbw_gbps", "graph_unregistered")], by[(64 * MiB, "gpu_busbw_gbps",
                                                                                    "graph_unregistered")]
    assert (gpu_small.buffers, gpu_small.placement) == ("plain", "in_place")
    assert ("NCCL_GRAPH_REGISTER", "0") in gpu_small.counterpart.settings
    assert (gpu_small.status, gpu_small.bar) == ("within", 0.05)  # 1/1.04 = 0.962: within 5%
    assert (gpu_large.status, gpu_large.bar) == ("outside", 0.02)  # 1/1.03 = 0.971: outside 2%
    eager = by[(MiB, "gpu_busbw_gbps", "eager")]
    assert (eager.status, eager.reason) == ("not_compared", "launch_bound")
    reg_small, reg_large = by[(MiB, "registered_busbw_gbps", "graph")], by[(64 * MiB, "registered_busbw_gbps", "graph")]
    assert (reg_small.buffers, reg_small.status) == ("registered", "within")  # 12.0 / 12.2
    assert (reg_large.status, reg_large.reason) == ("not_compared", "not_measured")  # no registered time at 64 MiB
    loop_small = by[(MiB, "call_time_us", None)]
    assert (loop_small.counterpart.tool, loop_small.status, round(loop_small.ratio, 2)) == (
        "torch_distributed_loop", "outside", 2.39)
    assert by[(64 * MiB, "call_time_us", None)].status == "within"
    outside = [f.row for f in a.crosscheck.findings if f.key == "outside_bar"]
    assert outside[0] is loop_small  # furthest off its bar first
    (reason,) = [x for x in verdict(a).reasons if x.key.startswith("crosscheck")]
    assert reason.key == "crosscheck_collective" and reason.values["count"] == 2
    assert reason.values["tool"] == "torch_distributed_loop"


def test_registered_buffers_are_held_against_nccl_tests_defaults():
    """The GPU time on NCCL-registered buffers names nccl-tests' default graph mode as its counterpart; the
    plain one the mode with registration off, each within its bar of its own counterpart only."""
    res = dataclasses.replace(all_reduce(MiB, 70.0, 12.0), registered_timings=ranks("cuda_graph", 6.0))
    g = MiB / 12.0e-6 / 1e9
    cc = Crosscheck(nccl_tests=(nccl_run("eager", (nccl_row(MiB, g),)), nccl_run("graph", (nccl_row(MiB, 2 * g),)),
                                nccl_run("graph_unregistered", (nccl_row(MiB, g),))))
    a = analyse(report(cc, n=node(res)))
    rows = {(r.buffers, r.counterpart.mode): r.status for r in a.crosscheck.rows if r.kind == "collective"
            and r.quantity != "call_time_us"}
    assert rows == {("registered", "graph"): "within", ("plain", "graph_unregistered"): "within",
                    ("plain", "eager"): "within"}


def test_a_hung_tool_is_a_finding_with_its_redacted_tail_and_missing_numbers_are_listed_not_dropped():
    cc = Crosscheck(
        kernels=(KernelTiming(0, "matmul", "torch", "fp16", "fp16", MATMUL, skipped="not_run"),
                 KernelTiming(0, "relu", "torch", "fp32", "fp32", (1 << 20,), skipped="fits_l2")),
        runs=(ToolRun("do_bench_cudagraph", launch(returncode=None, timed_out=True,
                                                   stderr_tail="compiling\nstill waiting on the GPU"), 0),),
        nccl_tests=(nccl_run("graph", (), returncode=1, stderr_tail="x\n" * 20 + "NCCL WARN Cuda failure"),))
    a = analyse(report(cc, (HEAD,), node(all_reduce(MiB, 70.0, 12.0))))
    failed = [f for f in a.crosscheck.findings if f.key == "tool_failed"]
    assert [(f.tool, f.cause, f.gpu) for f in failed] == [("do_bench_cudagraph", "timed_out", 0),
                                                          ("nccl_tests", "exit_status", None)]
    assert failed[0].detail.endswith("still waiting on the GPU")
    assert len(failed[1].detail.splitlines()) == ax.DETAIL_LINES and failed[1].detail.endswith("Cuda failure")
    reasons = {r.key: r.values for r in verdict(a).reasons}
    assert reasons["crosscheck_failed"]["cause"] == "timed_out" and reasons["crosscheck_failed"]["count"] == 3  # and the matmul row it never reached
    kinds = {(r.op, r.reason) for r in a.crosscheck.rows if r.kind == "kernel"}
    assert kinds == {("matmul", "not_run"), ("relu", "fits_l2")}
    # nccl-tests ran but gave no row: the GPU-time and per-call rows say so; no loop ran: the loop row too.
    assert {r.reason for r in a.crosscheck.rows if r.kind == "collective"} == {"no_counterpart"}


def test_a_row_the_tool_could_not_time_is_a_finding_and_ctrl_c_is_not():
    cc = Crosscheck(kernels=(KernelTiming(0, "matmul", "torch", "fp16", "fp16", MATMUL, error="OutOfMemoryError: x"),),
                    runs=(ToolRun("torch_copy", launch(interrupted=True, returncode=None)),))
    a = analyse(report(cc, (HEAD,)))
    assert [(f.key, f.detail) for f in a.crosscheck.findings] == [("row_failed", "OutOfMemoryError: x")]


def test_copies_against_the_plain_torch_copy():
    us = 256 * MiB / 390e9 * 1e6  # envcheck's copy engine at 390 GB/s
    cc = Crosscheck(copies=(CopyTiming(0, 1, 256 * MiB, 20, [us * 1.02] * 5), CopyTiming(1, 0, 256 * MiB, 20,
                                                                                          error="RuntimeError: peer")))
    a = analyse(report(cc, n=node(copy_us=us)))
    ok, failed = a.crosscheck.rows
    assert (ok.status, round(ok.ratio, 3), ok.bar) == ("within", 1.02, ax.COPY_BAR)
    # GPU 1 -> 0 has no copy of envcheck's in this node and the tool failed on it: listed, a finding.
    assert (failed.status, failed.reason) == ("not_compared", "tool_failed")
    assert [f.key for f in a.crosscheck.findings] == ["row_failed"]


def test_notes_are_not_failures():
    r = report(Crosscheck(notes=(Note("crosscheck.no_cuda"),)), (HEAD,))
    a = analyse(r)
    assert a.crosscheck.ok and not a.crosscheck.rows and verdict(a).ok


# --------------------------------------------------------------------------- the report's JSON


def test_the_raw_numbers_round_trip_and_bad_ones_are_refused():
    cc = Crosscheck(kernels=(kernel("torch", 101.0),), loops=(loop(MiB, 30.0),),
                    nccl_tests=(nccl_run("eager", (nccl_row(MiB, 50.0),)),), notes=(Note("crosscheck.single_gpu"),))
    r = report(cc, (HEAD,))
    text = model.dumps(r)
    assert json.loads(text)["schema_version"] == model.SCHEMA_VERSION == 5
    assert model.loads(text) == r
    data = json.loads(text)
    data["crosscheck"]["kernels"][0]["samples_us"] = [1.0, -2.0]
    with pytest.raises(model.ReportError, match=r"crosscheck\.kernels\[0\].*finite and positive"):
        model.loads(json.dumps(data))
    data["crosscheck"]["kernels"][0] = {**data["crosscheck"]["kernels"][0], "samples_us": None, "skipped": "nope"}
    with pytest.raises(model.ReportError, match="unknown cross-check skip"):
        model.loads(json.dumps(data))
    with pytest.raises(ValueError, match="exactly one"):
        KernelTiming(0, "matmul", "torch", "fp16", "fp16", MATMUL)
    with pytest.raises(ValueError, match="unknown nccl-tests mode"):
        NcclTestsRun("all_reduce", "fast", (), launch())
    with pytest.raises(ValueError, match="unknown collective"):
        LoopTiming("gather", 1, (0,))


def test_a_report_before_crosschecks_reads_without_one():
    path = next(p for p in sorted(EVIDENCE.glob("*_node.json.gz")))
    data = json.loads(gzip.decompress(path.read_bytes()))
    assert data["schema_version"] < 5 and "crosscheck" not in data
    r = model.loads(json.dumps(data))
    assert r.crosscheck is None and analyse(r).crosscheck is None


def test_anonymizing_covers_the_crosscheck_section():
    from envcheck.anonymize import Anonymizer

    cc = Crosscheck(runs=(ToolRun("torch_copy", launch(returncode=1, stderr_tail="error on gpubox-7 in /home/alice")),))
    r = report(dataclasses.replace(cc))
    anon = Anonymizer(b"k" * 32, hosts=("gpubox-7",), users=("alice",)).report(dataclasses.replace(r, host="gpubox-7"))
    tail = anon.crosscheck.runs[0].launch.stderr_tail
    assert "gpubox-7" not in tail and "alice" not in tail


# --------------------------------------------------------------------------- nccl-tests' committed outputs


def test_every_committed_nccl_tests_output_parses():
    """Each capture the device scripts saved (eager, -G, registration on and off, 2 and 4 GPUs): rows for known
    collectives at positive sizes, both placements, and the version line."""
    caps = nccl_captures()
    assert len(caps) >= 20
    for where, text in caps:
        rows = nccl_tests.parse(text)
        if "# Collective test starting" not in text:
            continue
        assert rows, where
        assert {r.op for r in rows} <= set(nccl_tests.BINARIES.values()), where
        assert all(r.size_bytes > 0 and r.out_of_place.busbw_gbps > 0 and r.in_place.time_us > 0 for r in rows), where
        assert nccl_tests.version(text), where


def test_the_same_calls_graph_mode_holds_envcheck_gpu_time_at_every_size():
    """The 2 x H100 node run of 2026-11-26 19:49Z and nccl-tests right after it in the same call
    (tools/evidence/compare_node.py said PASS: 35 of 35 against -G with registration off): as a cross-check, all
    35 GPU-time rows are within their bar against ``graph_unregistered``, and against the eager loop wherever that
    loop is not launch-bound."""
    a = analyse(h100_1949z_with_its_nccl_tests()[1])
    gpu = [x for x in a.crosscheck.rows if x.quantity == "gpu_busbw_gbps" and x.counterpart.mode == "graph_unregistered"]
    assert len(gpu) == 35 and all(x.status == "within" for x in gpu), [
        (x.op, x.size_bytes, x.ratio) for x in gpu if x.status != "within"]
    eager = {(x.op, x.size_bytes): x for x in a.crosscheck.rows if x.counterpart.mode == "eager"}
    assert len(eager) == 35 and eager[("all_reduce", MiB)].reason == "launch_bound"
    # Where nccl-tests' eager loop is not launch-bound (18 of 35 here: 256 MiB and up, and 16-64 MiB of all_reduce,
    # 16 MiB of all_to_all), it agrees too.
    held = [x for x in eager.values() if x.reason != "launch_bound"]
    assert len(held) == 18 and all(x.status == "within" for x in held)
    assert {x.reason for x in a.crosscheck.rows if x.quantity == "call_time_us"} == {"no_counterpart"}  # no loop


# --------------------------------------------------------------------------- the views


@pytest.mark.usefixtures("charts_not_drawn")
def test_the_section_shows_every_row_with_its_counterpart_and_bar_in_both_languages():
    from in_lang import print_crosscheck, render_html, render_markdown

    from envcheck.render.terminal.console import capture

    r = model.loads(model.dumps(full_report()))
    a = analyse(r)
    md = render_markdown(r, "en", analysis=a)
    section = md[md.index("## Cross-checks"):md.index("## Health")]
    assert "### Single GPU: headline cases against do_bench_cudagraph" in section
    assert ("| 0 | matmul | triton | fp16 | 4096×4096×4096 | 110 µs | triton.testing.do_bench_cudagraph | 100 µs | "
            "1.100× | ±3.0% | OUTSIDE |") in section
    assert "not compared: its working set fits L2" in section
    assert "| GPU 0 → GPU 1 | 256 MiB |" in section and "| 1.000× | ±3.0% | within |" in section
    assert "nccl-tests, CUDA-graph mode, registration off" in section and "NCCL\\_GRAPH\\_REGISTER=0" in section
    assert "plain torch.distributed loop | 29.8 µs | 2.387× | ±10% | OUTSIDE |" in section
    assert "nccl-tests failed (it ran past its time limit and was stopped, exit status –): NCCL WARN \\| stuck" in section
    assert "alltoall\\_perf" in section  # the note
    html = render_html(r, "en", analysis=a)
    assert '<section id="crosscheck">' in html and '<span class="badge status-fail">OUTSIDE</span>' in html
    term = capture(lambda c: print_crosscheck(c, a.crosscheck, "en"))
    assert "3 within their bar, 2 outside, 2 not compared; 3 finding(s)." in " ".join(term.split())
    # Chinese: no English word of the section's own messages is left in its view or on the terminal (the words
    # the Chinese catalogue keeps, names and identifiers, aside).
    zh = render_markdown(r, "zh-CN", analysis=a)
    zh_text = "\n".join([zh[zh.index("## 交叉核验"):zh.index("## 健康状况")],
                         capture(lambda c: print_crosscheck(c, a.crosscheck, "zh-CN"), width=100)])
    assert "交叉核验" in zh_text and "超出" in zh_text

    from envcheck.render.i18n import catalog

    def words(lang: str) -> set[str]:
        cat = catalog(lang)
        return {w for k, m in cat.items() if k.startswith("crosscheck.")
                for w in re.findall(r"[A-Za-z]{3,}", re.sub(r"\{[^}]*\}", " ", m))}

    english = words("en") - words("zh-CN")
    assert english >= {"within", "outside", "counterpart", "loop", "failed"}
    assert not english & set(re.findall(r"[A-Za-z]{3,}", zh_text))


@pytest.mark.usefixtures("charts_not_drawn")
def test_render_rebuilds_the_section_from_the_json(tmp_path):
    from envcheck import cli

    path = tmp_path / "r.json"
    model.dump(full_report(), path)
    assert cli.main(["render", str(path), "--format", "md", "--out", str(tmp_path / "out")]) == 0
    (md,) = (tmp_path / "out").glob("*.md")
    assert "## Cross-checks" in md.read_text() and "| ±2.0% |" not in md.read_text()  # 1 MiB: the 5% bar
    assert "| ±5.0% |" in md.read_text()


def test_diff_reads_reports_with_crosschecks_as_their_benches():
    from envcheck.compare.diff import diff

    plain = dataclasses.replace(full_report(), crosscheck=None)
    d = diff([("a", full_report()), ("b", plain)])
    d2 = diff([("a", plain), ("b", plain)])
    assert [c.cases for c in d.comparisons] == [c.cases for c in d2.comparisons] and d.comparisons[0].cases


def test_a_crosscheck_that_did_not_apply_says_so_instead_of_passing():
    from in_lang import print_crosscheck

    from envcheck.render.crosscheck_view import summary
    from envcheck.render.terminal.console import capture

    a = analyse(report(Crosscheck(notes=(Note("crosscheck.no_cuda"),)), (HEAD,)))
    assert (a.crosscheck.status, summary(a.crosscheck)) == ("skip", "")
    text = " ".join(capture(lambda c: print_crosscheck(c, a.crosscheck, "en")).split())
    assert "Nothing was cross-checked here: Cross-checks not available: no CUDA GPU" in text
    assert "held" not in text


def test_a_row_nccl_tests_could_not_time_is_left_out_not_kept_as_nan():
    text = ("# Collective test starting: all_reduce_perf\n"
            "     1048576        262144     float     sum      -1    15.25   68.77   68.77       0    14.60   71.82   71.82       0\n"
            "     4194304       1048576     float     sum      -1     -nan    -nan    -nan       0      inf     inf     inf       0\n"
            "    16777216       4194304     float     sum      -1    74.74  224.49  x.1       0    77.43  216.68  216.68       0\n")
    rows = nccl_tests.parse(text)
    assert [r.size_bytes for r in rows] == [MiB]
    r = report(Crosscheck(nccl_tests=(nccl_run("eager", rows),)))
    assert model.loads(model.dumps(r)) == r


def test_a_cross_check_stopped_before_its_rows_fails_and_never_says_every_number_held():
    """A run stopped by its time limit while do_bench_cudagraph still had rows to time (2 x H200, 20:45Z: all 32
    rows "the tool ended before it") said "Every number held" and passed: now each such row is a finding."""
    cc = Crosscheck(kernels=(KernelTiming(0, "matmul", "torch", "fp16", "fp16", MATMUL, skipped="not_run"),),
                    runs=(ToolRun("do_bench_cudagraph", launch(interrupted=True, returncode=None), 0),))
    a = analyse(report(cc, (HEAD,)))
    assert [f.key for f in a.crosscheck.findings] == ["not_finished"] and not a.crosscheck.ok
    reasons = {x.key: x.values for x in verdict(a).reasons}
    assert reasons["crosscheck_failed"]["cause"] == "not_finished"
    from in_lang import render_markdown

    md = render_markdown(a.report, "en", analysis=a)
    assert "Every number held" not in md and "was stopped before" in md
