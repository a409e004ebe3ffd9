"""envcheck history of node and fleet reports: each machine named (host, GPU model, short UUIDs),
a node and the fleet nodes simulated on it as one machine on one host, node-level series beside
the per-GPU trend, and no one-report "trend" of 1.000x. Built on the committed 2 x H200 runs."""

from __future__ import annotations

import re

import node_compare_fixtures as nf
from in_lang import render_histories
from test_cli_diff import envcheck

from envcheck.analysis import analyse
from envcheck.commands.history import collect
from envcheck.compare.history import histories, on_gpu
from envcheck.render.compare_view import history_title, trend

GIB = 1 << 30
FIRST_PAIR = ("GPU-1d0eb562", "GPU-5ce748fb")  # the GPUs of the 21:47 node run and the 21:49 fleet
SECOND_PAIR = ("GPU-a7829a6c", "GPU-50c2fed3")


def _histories(*paths):
    reports, left_out = collect([str(p) for p in paths])
    return histories(reports, left_out)


def test_a_node_and_its_simulated_fleet_are_one_machine_on_one_host():
    hs = _histories(nf.NODE_BEFORE, nf.FLEET_BEFORE)
    (h,) = hs.machines
    assert [p.info.label.split("_", 2)[-1] for p in h.points] == [
        "vm_2x-h200_node.json.gz", "fleet-2x_vm.json.gz:vm/0", "fleet-2x_vm.json.gz:vm/1"]
    assert {p.info.host for p in h.points} == {"vm"}
    assert h.hosts == () and h.gpus == ()  # today: "different hosts: vm, vm/0, vm/1"


def test_history_heads_name_each_machine():
    hs = _histories(nf.NODE_BEFORE, nf.FLEET_BEFORE, nf.NODE_AFTER, nf.FLEET_AFTER)
    assert len(hs.machines) == 2
    titles = [history_title(h) for h in hs.machines]
    for title, pair in zip(titles, (FIRST_PAIR, SECOND_PAIR), strict=True):
        assert "vm" in title and "2 × NVIDIA H200" in title
        assert all(u in title for u in pair)
    html = render_histories(hs.machines, "html")
    (page_title,) = re.findall(r"<title>([^<]*)</title>", html)[:1]
    assert all(u in page_title for u in (*FIRST_PAIR, *SECOND_PAIR))


def test_node_series_are_the_node_analysis_numbers():
    (h,) = _histories(nf.NODE_BEFORE, nf.FLEET_BEFORE).machines
    node = analyse(nf.load(nf.NODE_BEFORE)).node
    rows = node.sweeps[0].rows
    ar = sorted((r for r in rows if r.op == "all_reduce"), key=lambda r: r.size_bytes)
    p = h.points[0].node
    assert (p.small_bytes, p.small_busbw) == (ar[0].size_bytes, ar[0].busbw_gbps)
    assert (p.large_bytes, p.large_busbw) == (4 * GIB, ar[-1].busbw_gbps)
    one_way = [c.gbps for c in node.copies if c.kind == "d2d" and c.method == "copy_engine" and c.directions == 1]
    assert p.p2p_gbps == min(one_way) and p.p2p_pairs == 2
    assert h.points[1].node is None  # a fleet node of one GPU has no collective within it
    md = render_histories([h], "md")
    assert "Node tests over time" in md and "342 @ 4 GiB" in md


def test_fleet_node_on_gpu1_is_trended_against_gpu1_of_the_node_run():
    (h,) = _histories(nf.NODE_BEFORE, nf.FLEET_BEFORE).machines
    assert [p.gpu_uuid[:12] for p in h.points] == [FIRST_PAIR[0], FIRST_PAIR[0], FIRST_PAIR[1]]
    node = analyse(nf.load(nf.NODE_BEFORE))
    gpu1 = on_gpu(node, h.points[2].gpu_uuid)
    assert gpu1.bench.bench.device.uuid == h.points[2].gpu_uuid and len(gpu1.report.benches) == 1
    assert on_gpu(node, h.points[0].gpu_uuid) is node


def test_one_report_is_no_trend():
    (h,) = _histories(nf.NODE_AFTER).machines
    assert not h.trend
    assert all(c is None for p in h.points for c in trend(h, p))
    md = render_histories([h], "md")
    assert "1.000×" not in md and "no trend yet" in md
    assert "1 report" in history_title(h) and SECOND_PAIR[0] in history_title(h)


def test_cli_history_of_node_and_fleet_reports_in_both_languages():
    for lang, head in (("en", "envcheck history of vm"), ("zh-CN", "的 envcheck history")):
        proc = envcheck("history", str(nf.NODE_BEFORE), str(nf.FLEET_BEFORE), "--format", "md", "--lang", lang)
        assert proc.returncode == 0, proc.stderr
        assert head in proc.stdout and FIRST_PAIR[1] in proc.stdout
        assert "different hosts" not in proc.stdout
