"""The device script's comparison, run on the CPU with the real nccl-tests output of the 2 x H200 node:
busbw computed from samples that match nccl-tests' times agree; 5 % slower ones do not."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from node_fakes import NODE, capture, fake_nvml

from envcheck import model
from envcheck.analysis.collectives import IN_PLACE_OPS, against_nccl_tests
from envcheck.model import Environment, Report, Timing
from envcheck.model.node import CollectiveResult, Collectives, Node, RankTiming
from envcheck.node import nccl_tests
from envcheck.probes.topology import probe_topology

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "evidence" / "compare_node.py"
REPORTS = SCRIPT.parents[2] / "evidence"


def _script():
    spec = importlib.util.spec_from_file_location("compare_node", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _node_doc(tmp_path: Path, slower: float, gpu: bool = False, per_call_floor_us: float = 0.0,
              rows_slower: dict[tuple[str, int], float] | None = None) -> Path:
    """A node report whose times are nccl-tests' times x ``slower`` (x ``rows_slower[(op, size)]`` for the rows
    it names): per call only, or (``gpu``) as GPU times with per-call times no lower than ``per_call_floor_us``
    beside them."""
    rows = nccl_tests.parse((NODE / "nccl_tests_x2.txt").read_text())
    results = []
    for r in rows:
        col = r.in_place if r.op in IN_PLACE_OPS else r.out_of_place
        t = col.time_us * (rows_slower or {}).get((r.op, r.size_bytes), slower)
        call = max(t, per_call_floor_us)
        timings = tuple(RankTiming(k, Timing.from_samples("cuda_events", [call * 0.99, call * 1.01])) for k in (0, 1))
        gpu_t = tuple(RankTiming(k, Timing.from_samples("cuda_graph", [t * 0.99, t * 1.01], 20)) for k in (0, 1))
        results.append(CollectiveResult(r.op, r.size_bytes, r.count, "float32", (0, 1), timings, 0,
                                        gpu_timings=gpu_t if gpu else ()))
    cap = capture()
    topo = probe_topology(fake_nvml(), (0, 1), cap["topo_m"]["stdout"], cap["nvlink_s"]["stdout"])
    node = Node("vm", (0, 1), topo, collectives=(Collectives("node", "nccl", 2, ("vm", "vm"), results=tuple(results)),))
    p = tmp_path / "node.json"
    model.dump(Report("0", "2026-11-22T00:00:00Z", "vm", "run", Environment(), node=node), p)
    return p


def test_matching_times_agree_within_three_percent(tmp_path):
    out = tmp_path / "table.md"
    rc = _script().main(["--node", str(_node_doc(tmp_path, 1.0)), "--nccl-tests", str(NODE / "nccl_tests_x2.txt"),
                         "--out", str(out)])
    text = out.read_text()
    assert "| all_reduce | 4096 MiB | in_place | 342.6 | per_call | 342.6 | eager | 1.000 | 2 % | yes |" in text
    assert "| all_reduce | 1 MiB | in_place |" in text  # every size, not only >= 1 GiB
    assert len([ln for ln in text.splitlines() if ln.startswith("| ") and " MiB | " in ln and "_place" in ln]) == 35
    assert "verdict: PASS: 35 of 35 (op, size, mode) within the bar" in text
    assert "GPU 0 <-> GPU 1: nvswitch, 18 NVLinks" in text
    assert "collectives agree: True" in text
    assert rc == 1  # the copies part has no peer copies in this report, which never counts as agreement


def test_five_percent_slower_does_not_agree(tmp_path):
    out = tmp_path / "table.md"
    _script().main(["--node", str(_node_doc(tmp_path, 1.05)), "--nccl-tests", str(NODE / "nccl_tests_x2.txt"),
                    "--out", str(out)])
    assert "collectives agree: False" in out.read_text() and "| NO |" in out.read_text()


def test_gpu_time_goes_against_nccl_tests_graph_mode_and_the_per_call_floor_is_no_failure(tmp_path):
    """GPU times equal to nccl-tests' pass at every size even with a 45 us per-call floor beside them (the
    floor is the caller's cost, shown, not judged); a nccl-tests -G file makes the graph column the reference."""
    graph = tmp_path / "graph.txt"
    graph.write_text((NODE / "nccl_tests_x2.txt").read_text())  # the same capture stands in for -G here
    out = tmp_path / "table.md"
    _script().main(["--node", str(_node_doc(tmp_path, 1.0, gpu=True, per_call_floor_us=45.0)),
                    "--nccl-tests", str(NODE / "nccl_tests_x2.txt"), "--nccl-tests-graph", str(graph),
                    "--out", str(out)])
    text = out.read_text()
    assert "verdict: PASS: 35 of 35 (op, size, mode) within the bar (5 % at every size, 2 % from 64 MiB; graph_unregistered 35)" \
        in text and "collectives agree: True" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| all_reduce | 1 MiB | in_place |"))
    assert "| gpu | " in row and "| graph_unregistered | " in row and "| yes |" in row


def test_three_percent_off_passes_small_sizes_and_fails_from_64_mib(tmp_path):
    out = tmp_path / "table.md"
    _script().main(["--node", str(_node_doc(tmp_path, 1.03, gpu=True)), "--nccl-tests", str(NODE / "nccl_tests_x2.txt"),
                    "--out", str(out)])
    text = out.read_text()
    assert "verdict: FAIL: 15 of 35" in text  # 1, 4, 16 MiB of five ops within 5 %; 64 MiB and up outside 2 %
    assert "collectives agree: False" in text
    assert "off the bar where" not in text  # one nccl-tests run: nothing to say of its spread


def test_the_verdict_names_the_row_furthest_off_against_its_own_bar(tmp_path):
    """all_to_all 16 MiB 4.6% off is within its 5% bar, all_to_all 64 MiB 2.4% off is not: the verdict names
    the 64 MiB row (as on 2 x H100 at 0945Z, where it named the 16 MiB one)."""
    out = tmp_path / "table.md"
    doc = _node_doc(tmp_path, 1.0, gpu=True, rows_slower={("all_to_all", 16 << 20): 1.046, ("all_to_all", 64 << 20): 1.024})
    _script().main(["--node", str(doc), "--nccl-tests", str(NODE / "nccl_tests_x2.txt"), "--out", str(out)])
    verdict = next(ln for ln in out.read_text().splitlines() if ln.startswith("verdict:"))
    assert verdict.startswith("verdict: FAIL: 34 of 35") and "furthest off its bar all_to_all 64 MiB: 0.977" in verdict


def _against_graph_runs(tmp_path: Path, graph_text: str) -> str:
    """The comparison table of a node report at nccl-tests' own times against ``graph_text`` as its -G runs."""
    graph = tmp_path / "graph.txt"
    graph.write_text(graph_text)
    out = tmp_path / "table.md"
    _script().main(["--node", str(_node_doc(tmp_path, 1.0, gpu=True)), "--nccl-tests", str(NODE / "nccl_tests_x2.txt"),
                    "--nccl-tests-graph", str(graph), "--out", str(out)])
    return out.read_text()


def test_a_graph_file_of_three_runs_is_held_as_their_median_and_says_so(tmp_path):
    text = _against_graph_runs(tmp_path, (NODE / "nccl_tests_x2.txt").read_text() * 3)  # three runs, one log
    assert "verdict: PASS: 35 of 35" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| all_reduce | 1 MiB | in_place |"))
    assert "| graph_unregistered, median of 3 (" in row


def _scaled_runs(text: str, factor: float) -> str:
    """nccl-tests' output with every time x ``factor`` and every bandwidth / ``factor``."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit():
            for i in (5, 9):
                f[i] = f"{float(f[i]) * factor:.2f}"
            for i in (6, 7, 10, 11):
                f[i] = f"{float(f[i]) / factor:.2f}"
            line = "  ".join(f)
        out.append(line)
    return "\n".join(out) + "\n"


def test_a_miss_where_nccl_tests_own_runs_lie_further_apart_than_the_bar_is_named_and_still_fails(tmp_path):
    """Three nccl-tests runs 0 %, 3 % and 6 % slower: their median is 3 % slower than envcheck, which misses
    the 2 % bar from 64 MiB; the verdict fails, and names those misses as ones nccl-tests' own runs miss too."""
    base = (NODE / "nccl_tests_x2.txt").read_text()
    text = _against_graph_runs(tmp_path, base + _scaled_runs(base, 1.03) + _scaled_runs(base, 1.06))
    assert "verdict: FAIL: 15 of 35" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("off the bar where nccl-tests' own runs"))
    assert "(20 of 20)" in line and "all_reduce 4096 MiB (runs 6.0 % apart)" in line


def _against_call(run: str, call: str, tmp_path: Path) -> tuple[int, list[str]]:
    """The script on a committed 2 x H100 node run of 2026-11-26 against the committed nccl-tests of a device call:
    its exit status and the lines it wrote."""
    import tarfile

    nt = tmp_path / call / "nccl_tests"
    if not nt.exists():
        with tarfile.open(REPORTS / "device-logs" / f"2026-11-26_{call}_2x-h100_nccl-tests.tgz") as tar:
            tar.extractall(tmp_path / call, filter="data")
    out = tmp_path / f"{run}.md"
    rc = _script().main(["--node", str(REPORTS / f"2026-11-26_{run}_vm_2x-h100_node.json.gz"),
                         "--nccl-tests", str(nt / "nccl_tests_eager.txt"),
                         "--nccl-tests-graph", str(nt / "nccl_tests_graph.txt"), "--out", str(out)])
    return rc, out.read_text().splitlines()


def test_a_miss_where_envcheck_ran_at_two_paces_is_named_and_still_fails(tmp_path):
    """The committed 2 x H100 run of 2026-11-26 1508Z (all_to_all 64 MiB: 12 of 24 replays at the slow pace, six of
    its twelve captures, so the median of the captures reads 232.7 GB/s busbw, their mean 233.0) against
    nccl-tests' runs of the 1456Z call on the same kind of machine (242.1): the miss is named with envcheck's
    spread, and the verdict still fails. The 1505Z run, at one pace, passes that size."""
    lines = {run: _against_call(run, "1456Z", tmp_path)[1] for run in ("1508Z", "1505Z")}
    row = next(ln for ln in lines["1508Z"] if ln.startswith("| all_to_all | 64 MiB |"))
    assert "| 232.7 | gpu | 242.1 |" in row and "| NO |" in row
    named = [ln for ln in lines["1508Z"] if ln.startswith("off the bar where envcheck's GPU replays ran at two paces")]
    assert named and "all_to_all 64 MiB (mean 4.3 % above the fastest tenth)" in named[0]
    assert any(ln.startswith("verdict: FAIL") for ln in lines["1508Z"])
    steady = next(ln for ln in lines["1505Z"] if ln.startswith("| all_to_all | 64 MiB |"))
    assert "| yes |" in steady
    assert not any("two paces" in ln for ln in lines["1505Z"])


def test_a_few_slow_communicators_leave_the_median_of_the_captures_at_the_pace_of_the_rest(tmp_path):
    """The committed 2 x H100 run of 2026-11-26 1736Z against nccl-tests' runs of the 1722Z call on the same machine
    (all_to_all 64 MiB 242.8 GB/s, the median of nine): three of its twelve captures, each on a communicator of
    its own, ran about 7% slow. The GPU time, the median of the captures, reads 241.4 and the size passes; the
    mean of the replays, what the GPU time was before, reads 237.5 (0.978), off the 2% bar."""
    import statistics

    from envcheck.analysis import collectives

    node_json = REPORTS / "2026-11-26_1736Z_vm_2x-h100_node.json.gz"
    rc, lines = _against_call("1736Z", "1722Z", tmp_path)
    row = next(ln for ln in lines if ln.startswith("| all_to_all | 64 MiB |"))
    assert "| 241.4 | gpu | 242.8 |" in row and "| yes |" in row
    assert rc == 0 and any(ln.startswith("verdict: PASS: 35 of 35") for ln in lines)

    result = next(r for c in model.load(node_json).node.collectives for r in c.results
                  if (r.op, r.size_bytes) == ("all_to_all", 64 << 20))
    captures = collectives.capture_means_us(result)
    fastest = min(captures)
    assert result.captures == result.communicators == 12 and len(captures) == 12
    assert sum(c > 1.05 * fastest for c in captures) == 3
    mean = statistics.fmean(statistics.fmean(t.timing.samples_us) for t in result.gpu_timings)
    assert collectives.gpu_time_us(result) == statistics.median(captures) < 0.99 * mean
    busbw = collectives.bandwidths_gbps("all_to_all", result.size_bytes, 2, mean)[1]
    assert round(busbw, 1) == 237.5 and busbw / 242.8 < 0.98  # the mean's busbw: off the bar


# Every 2 x H100 node run of this version (twelve communicators, the median of the captures of one allocation),
# each against nccl-tests' runs of its own call, or of the call that ran just before it on the machine.
THIS_VERSION_H100 = (("1724Z", "1722Z"), ("1732Z", "1722Z"), ("1733Z", "1722Z"), ("1735Z", "1722Z"),
                     ("1736Z", "1722Z"), ("1937Z", "1935Z"), ("1947Z", "1935Z"), ("1949Z", "1935Z"),
                     ("1951Z", "1949Z"), ("1958Z", "1949Z"), ("2000Z", "1949Z"))


@pytest.mark.parametrize(("run", "call"), THIS_VERSION_H100)
def test_every_node_run_of_this_version_agrees_with_nccl_tests_at_every_size(run, call, tmp_path):
    """The issue's bar on every committed 2 x H100 run of this version: GPU-time busbw within 5% of nccl-tests'
    at every size and within 2% from 64 MiB, all 35 (op, size), and no size at two paces."""
    rc, lines = _against_call(run, call, tmp_path)
    assert rc == 0 and any(ln.startswith("verdict: PASS: 35 of 35") for ln in lines)
    rows = [ln for ln in lines if ln.startswith("| ") and "| gpu |" in ln]
    assert len(rows) == 35 and all("| yes |" in ln for ln in rows)
    assert not any("two paces" in ln for ln in lines)


def test_from_crosscheck_reads_nccl_tests_rows_the_run_recorded_and_holds_every_mode(tmp_path):
    """``--from-crosscheck``: the nccl-tests rows of ``envcheck run --crosscheck`` from the report itself (here the
    2 x H100 19:49Z run with that call's nccl-tests outputs put in its cross-checks), each mode held, the eager loop
    where it is not launch-bound; the same pairs the report's own cross-check table holds."""
    from crosscheck_fakes import h100_1949z_with_its_nccl_tests

    from envcheck.analysis import analyse

    r, with_cc = h100_1949z_with_its_nccl_tests()
    doc = tmp_path / "node.json"
    doc.write_text(model.dumps(with_cc))
    out = tmp_path / "table.md"
    _script().main(["--node", str(doc), "--from-crosscheck", "--out", str(out)])
    verdict = next(ln for ln in out.read_text().splitlines() if ln.startswith("verdict:"))
    assert verdict.startswith("verdict: PASS: 53 of 53 (op, size, mode)") and "graph_unregistered 35, eager 18" in verdict
    held = [x for x in analyse(with_cc).crosscheck.rows if x.quantity == "gpu_busbw_gbps" and x.status != "not_compared"]
    assert len(held) == 53
    plain = tmp_path / "plain.json"
    plain.write_text(model.dumps(r))
    with pytest.raises(SystemExit, match="no nccl-tests runs"):
        _script().main(["--node", str(plain), "--from-crosscheck", "--out", str(out)])


def test_4x_h200_registered_and_plain_gpu_times_agree_with_both_nccl_tests_graph_modes_from_16_mib():
    """4 x H200, envcheck's node run of 20:58Z (stopped after all_to_all 4 MiB by its call's time limit) against
    nccl-tests run at 20:06Z on a machine of the same kind (not the same call): from 16 MiB every measured size is
    within its bar of nccl-tests' graph mode with registration off (plain buffers) and of its default graph mode
    (NCCL-registered buffers): the gap of issue 41 (all_gather 0.74-0.82 of -G) was the registration."""
    from evidence_files import EVIDENCE

    def rows(mode: str) -> tuple[nccl_tests.NcclTestsRow, ...]:
        import gzip

        path = EVIDENCE / "device-logs" / f"2026-11-28_2006Z_4x-h200_nccl-tests_{mode}.txt.gz"
        return nccl_tests.parse(gzip.decompress(path.read_bytes()).decode())

    r = model.load(EVIDENCE / "2026-11-28_2058Z_vm_4x-h200_node_quick.json.gz")
    sweep = next(c for c in r.node.collectives if c.scope == "node")
    got = against_nccl_tests(sweep, rows("eager"), rows("graph_unregistered"), registered_rows=rows("graph"),
                                hold_eager=True)
    big = [a for a in got if a.size_bytes >= 16 << 20 and a.ours_gbps is not None and a.theirs_mode != "eager"]
    assert len(big) == 24 and all(a.within for a in big), [(a.op, a.size_bytes, a.theirs_mode, a.ratio) for a in big
                                                           if not a.within]
    ag = {(a.size_bytes, a.theirs_mode): a for a in got if a.op == "all_gather"}
    assert ag[(256 << 20, "graph")].ratio == pytest.approx(0.997, abs=0.002)  # 331.5 against 332.5 GB/s
    assert ag[(256 << 20, "graph_unregistered")].ours_gbps < 0.93 * ag[(256 << 20, "graph")].ours_gbps
