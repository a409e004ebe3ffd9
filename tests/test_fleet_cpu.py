"""A fleet whose suites ran on the CPU (``fleet --cpu``): it shows what the CPU measured in a CPU's units,
lists the rules it was not held to with the reason, and counts only the rules it applied."""

from __future__ import annotations

import factories_cpu
import pytest
from in_lang import print_fleet, render_html, render_markdown

from envcheck.analysis import analyse
from envcheck.analysis.fleet import DEFAULT_RULES
from envcheck.model import Report
from envcheck.model.fleet import Fleet, FleetNode, RankStatus
from envcheck.model.node import Node, NodeSkip
from envcheck.render.terminal.console import capture


def _cpu_fleet() -> Report:
    env = factories_cpu.environment()
    checks = factories_cpu.report().checks
    nodes = tuple(FleetNode(h, (i,), env, checks, (factories_cpu.bench(seed=i),),
                            Node(h, (0,), skipped=(NodeSkip("peer_copies", "no_cuda"),
                                                   NodeSkip("collectives", "single_gpu"))))
                  for i, h in enumerate(("c0", "c1")))
    ranks = tuple(RankStatus(i, "ok", h, 0, 0, elapsed_s=30.0) for i, h in enumerate(("c0", "c1")))
    fleet = Fleet(2, 2, "torchrun", nodes, ranks, settings={"quick": True}, started="2026-11-22T09:00:00Z",
                  duration_s=40.0)
    return Report("0.1.0", "2026-11-22T09:01:00Z", "c0", "fleet", env, fleet=fleet)


@pytest.fixture(scope="module")
def cpu_fleet():
    r = _cpu_fleet()
    return r, analyse(r)


def test_a_cpu_fleet_lists_the_rules_it_did_not_apply_with_the_reason(cpu_fleet):
    _, a = cpu_fleet
    fa = a.fleet
    assert {v.status for v in fa.verdicts} == {"pass"}
    skipped = {x.rule.metric: x.reason for x in fa.not_applied}
    assert skipped == {"gpu.bandwidth_gbps": "cpu_speed", "gpu.matmul_tflops": "cpu_speed",
                       "peer.": "no_gpu_pairs", "node.": "not_run", "wrong.": "not_run"}
    assert [r.metric for r in fa.applied] == ["checks.failed"]


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_cpu_fleet_never_shows_a_rule_as_applied_that_was_not(cpu_fleet, lang):
    r, a = cpu_fleet
    md = render_markdown(r, lang, "charts")
    n = len(DEFAULT_RULES)
    if lang == "en":
        assert f"under {n} rules" not in md and "median under 1 rule;" in md
        assert "Not applied on a CPU: GPU bandwidth (slowest GPU) (a CPU's speed" in md
        assert "not measured on a CPU" in md  # its bandwidth: a CPU suite measures no ceiling
        assert "GFLOP/s" in md and "TFLOP/s" not in md
    else:
        assert f"按 {n} 条规则" not in md
        assert "在 CPU 上未应用：" in md and "只显示不判定" in md and "在 CPU 上未测量" in md
    # The rules table lists only the rule applied.
    table = md[md.rindex("## "):]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "%" in line]
    assert [row.split(" | ")[0] for row in rows] == ["| checks.failed"]


def test_a_cpu_fleet_reads_the_same_in_every_medium(cpu_fleet):
    r, a = cpu_fleet
    html = render_html(r, "en")
    text = capture(lambda c: print_fleet(c, r, a, lang="en"), width=100)
    for out in (html, text):
        assert "Not applied on a CPU" in out and "not measured on a CPU" in out and "GFLOP/s" in out


def test_the_cpu_matmul_rate_is_the_host_clock_rate_of_its_largest_torch_matmul(cpu_fleet):
    _, a = cpu_fleet
    (g,) = a.fleet.nodes[0].analysis.gpus
    assert g.rates.bandwidth_gbps is None
    assert g.rates.matmul_tflops is not None and 1.0 < g.rates.matmul_tflops < 2.0  # ~1500 GFLOP/s fp32


def test_a_node_whose_own_tests_found_a_problem_has_one_verdict_said_once():
    """Issue 49, item 3: `fleet --cpu` printed PASS for a node and then "1 problem keeps this node from
    passing": the fleet's verdict and the node tests' problems were derived apart."""
    import dataclasses

    r = _cpu_fleet()
    sick = dataclasses.replace(r.fleet.nodes[1].node, skipped=(*r.fleet.nodes[1].node.skipped,
                                                               NodeSkip("xid", "crashed: OSError: kmsg")))
    nodes = (r.fleet.nodes[0], dataclasses.replace(r.fleet.nodes[1], node=sick))
    r = dataclasses.replace(r, fleet=dataclasses.replace(r.fleet, nodes=nodes))
    a = analyse(r)
    fa = a.fleet
    assert [v.status for v in fa.verdicts] == ["pass", "fail"] and not fa.passed
    assert fa.nodes[1].analysis.problems and fa.verdicts[1].findings[0].kind == "node_problem"
    text = capture(lambda c: print_fleet(c, r, a, lang="en"), width=120)
    c1 = text[text.index("Node c1"):]
    assert c1.startswith("Node c1 FAIL") and "1 problem keeps this node from passing" in c1
    assert "Node c0 PASS" in text and "Nothing keeps this node from passing" in text[:text.index("Node c1")]
