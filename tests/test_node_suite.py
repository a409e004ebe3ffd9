"""``envcheck run --gpus``'s part: every GPU's suite at once, outliers against their siblings (shown with
their conditions), then the node tests; and the per-GPU rates the outliers come from."""

from __future__ import annotations

import json
from dataclasses import replace

import factories
import pytest
from fake_worker import command
from fakes import FakeHost
from node_fakes import ScriptedLauncher, capture, fake_nvml

from envcheck.analysis import node as an
from envcheck.analysis.ceilings import ceilings
from envcheck.bench import suite
from envcheck.commands.options import RunOptions
from envcheck.model import Environment, Gpu, known
from envcheck.node.steps import NodeDeps, run_node_suite
from envcheck.probes.link_counters import LINKS_SECTION


def test_rates_are_the_analysis_measured_ceiling_and_best_torch_matmul():
    bench = factories.bench()
    r = an.gpu_rates(bench)
    # One place derives the measured ceiling: the best of the bandwidth kernels (here the read-only one).
    assert r.bandwidth_gbps == ceilings(Environment(), bench).get("bandwidth", "measured").value
    assert r.bandwidth_gbps == pytest.approx(4814.4 * 0.93, rel=0.01)
    assert r.matmul_key.startswith(("bf16", "fp16")) and r.matmul_tflops > 100


def test_a_gpu_slower_than_its_siblings_is_an_outlier():
    benches = [replace(factories.bench(seed=i), device=replace(factories.bench().device, index=i)) for i in range(4)]
    slow = replace(factories.bench(scale=1.08, seed=9, bandwidth_gbps=4814.4 * 0.93),
                   device=replace(factories.bench().device, index=4))
    found = an.outliers([*benches, slow], 0.05)
    assert {(o.gpu, o.metric) for o in found} == {(4, "bandwidth_gbps"), (4, "matmul_tflops")}
    o = next(o for o in found if o.metric == "bandwidth_gbps")
    assert o.shortfall == pytest.approx(1 - 0.93 / 1.08, rel=0.01)  # 7% less bandwidth and 8% slower kernels
    assert an.outliers([*benches, slow], 0.15) == ()


def test_outlier_conditions_read_the_environment():
    env = factories.environment()
    env = Environment({**env.sections, LINKS_SECTION: {"gpu0.pcie_replay": known(2), "gpu0.nvlink_errors": known(
        [{"link": 0, "crc_data": 3, "ecc_data": 4}, {"link": 1, "crc_data": 1, "ecc_data": 0}])}}, env.gpus)
    c = an.gpu_condition(env, 0)
    assert (c.power_limit_w, c.pcie_replay, c.nvlink_errors) == (700.0, 2, {"crc_data": 4, "ecc_data": 4})


def _two_gpu_env() -> Environment:
    env = factories.environment()
    g0 = env.gpus[0]
    torch_rt = {**env.sections["torch_runtime"], "device_count": known(2)}
    return Environment({**env.sections, "torch_runtime": torch_rt}, (g0, Gpu(1, dict(g0.facts))))


def _plans() -> tuple[suite.Plan, ...]:
    options = RunOptions(quick=True, ops=("vector_add",), sizes=("1024",), no_compile=True)
    return tuple(suite.plan(options, _two_gpu_env(), gpu=g) for g in (0, 1))


def test_run_gpus_all_measures_each_gpu_then_the_node(tmp_path):
    script = tmp_path / "worker.json"
    script.write_text(json.dumps([{"play_plan": True}, {"done": {}}]))
    cap = capture()
    host = FakeHost(files={"/proc/uptime": "100.0 1.0\n"},
                    commands={("nvidia-smi", "topo", "-m"): (0, cap["topo_m"]["stdout"], "")})
    deps = NodeDeps(fake_nvml, host, ScriptedLauncher(lambda argv, env: 0), kmsg=lambda: "")
    seen = []
    result = run_node_suite((0, 1), _plans(), str(tmp_path / "work"), 60.0, on_event=lambda g, ev: seen.append(g),
                            deps=deps, worker_command=command(script))
    assert result.gpus == (0, 1) and not result.interrupted
    assert [b.device.index for b in result.benches] == [0, 1]
    assert {0, 1} <= set(seen)
    assert result.node.gpus == (0, 1) and result.node.topology.smi_cells
    # The scripted launcher ran nothing: the copies and the sweep say so instead of passing.
    assert result.node.peer.error == "no_done_event"
    sweep = result.node.collectives[0]
    assert sweep.error == "ranks_failed" and {r.skipped for r in sweep.results} == {"not_run"}
    assert [c.id for c in result.checks] == ["links.during_tests.0", "links.during_tests.1"]


def test_link_checks_that_cannot_run_fail_the_node_run(tmp_path, monkeypatch):
    """A rule that cannot run is a failure of its own, here as in ``check`` (issue 36, item 1)."""
    from envcheck.checks import links

    def broken(node):
        raise ValueError("a finding is one line")

    monkeypatch.setattr(links, "delta_checks", broken)
    script = tmp_path / "worker.json"
    script.write_text(json.dumps([{"play_plan": True}, {"done": {}}]))
    host = FakeHost(files={"/proc/uptime": "100.0 1.0\n"},
                    commands={("nvidia-smi", "topo", "-m"): (0, capture()["topo_m"]["stdout"], "")})
    deps = NodeDeps(fake_nvml, host, ScriptedLauncher(lambda argv, env: 0), kmsg=lambda: "")
    result = run_node_suite((0, 1), _plans(), str(tmp_path / "work"), 60.0, deps=deps,
                            worker_command=command(script))
    assert [(c.id, c.status) for c in result.checks] == [("links.internal", "fail")]
    assert "ValueError: a finding is one line" in result.checks[0].finding
