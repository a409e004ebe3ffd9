"""Node and fleet reports for the node-comparison tests: the committed 2 x H200 runs, and copies
changed in one known way (a collective or a copy slower, an NVLink down, another NCCL)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import compare_fixtures as fx

from envcheck.model import Report, Timing, known
from envcheck.model.node import Collectives, Node

REPORTS = fx.REPORTS
NODE_BEFORE = REPORTS / "2026-11-22_2147Z_vm_2x-h200_node.json.gz"
NODE_AFTER = REPORTS / "2026-11-22_2326Z_vm_2x-h200_node.json.gz"
FLEET_BEFORE = REPORTS / "2026-11-22_2149Z_fleet-2x_vm.json.gz"
FLEET_AFTER = REPORTS / "2026-11-22_2330Z_fleet-2x_vm-0.json.gz"

# Back-to-back node runs on one machine, nothing changed (baseline first): the shipped node floors were
# learned from them (tests/test_diff_noise.py checks the data file is what the script makes of them). The
# 2 x H100 pairs spread their large collectives over fresh allocations (collective_bench.ALLOCATIONS); the
# 2 x H200 pairs came before; the last eight (2 x H100) also pool every size's graphs over communicators
# (collective_bench.COMMUNICATORS), and the last three warm each graph up before timing it
# (collective_bench.GRAPH_WARM_US).
NODE_CONTROLS = (("2026-11-26_0935Z_vm_2x-h100_node.json.gz", "2026-11-26_0941Z_vm_2x-h100_node.json.gz"),
                 ("2026-11-26_0953Z_vm_2x-h100_node.json.gz", "2026-11-26_0954Z_vm_2x-h100_node.json.gz"),
                 ("2026-11-26_0957Z_vm_2x-h100_node.json.gz", "2026-11-26_0958Z_vm_2x-h100_node.json.gz"),
                 ("2026-11-26_0019Z_vm_2x-h200_node.json.gz", "2026-11-26_0023Z_vm_2x-h200_node.json.gz"),
                 ("2026-11-26_0213Z_vm_2x-h200_node.json.gz", "2026-11-26_0217Z_vm_2x-h200_node.json.gz"),
                 ("2026-11-26_0748Z_vm_2x-h200_node.json.gz", "2026-11-26_0754Z_vm_2x-h200_node.json.gz"),
                 ("2026-11-26_1134Z_vm_2x-h100_node.json.gz", "2026-11-26_1141Z_vm_2x-h100_node.json.gz"),
                 ("2026-11-26_1309Z_vm_2x-h100_node.json.gz", "2026-11-26_1316Z_vm_2x-h100_node.json.gz"),
                 ("2026-11-26_1319Z_vm_2x-h100_node.json.gz", "2026-11-26_1320Z_vm_2x-h100_node.json.gz"),
                 ("2026-11-26_1321Z_vm_2x-h100_node.json.gz", "2026-11-26_1322Z_vm_2x-h100_node.json.gz"),
                 ("2026-11-26_1325Z_vm_2x-h100_node.json.gz", "2026-11-26_1326Z_vm_2x-h100_node.json.gz"),
                 ("2026-11-26_1458Z_vm_2x-h100_node.json.gz", "2026-11-26_1505Z_vm_2x-h100_node.json.gz"),
                 ("2026-11-26_1506Z_vm_2x-h100_node.json.gz", "2026-11-26_1508Z_vm_2x-h100_node.json.gz"),
                 ("2026-11-26_1509Z_vm_2x-h100_node.json.gz", "2026-11-26_1511Z_vm_2x-h100_node.json.gz"))
H100_CONTROLS = tuple(i for i, (a, _) in enumerate(NODE_CONTROLS) if "_2x-h100_" in a)  # the 2 x H100 pairs


def load(path: Path) -> Report:
    return fx.load(path)


def _scaled(t: Timing, factor: float) -> Timing:
    return Timing(t.method, [x * factor for x in t.samples_us], t.calls_per_sample)


def with_node(r: Report, **changes: object) -> Report:
    assert r.node is not None
    return dataclasses.replace(r, node=dataclasses.replace(r.node, **changes))


def _sweep(node: Node) -> Collectives:
    return node.collectives[0]


def collective_slowed(r: Report, op: str, size_bytes: int, factor: float) -> Report:
    """Every rank's samples of ``op`` at ``size_bytes`` (per call and GPU time) multiplied by ``factor``
    (busbw / factor)."""
    assert r.node is not None
    sweep = _sweep(r.node)

    def scaled(ts: tuple) -> tuple:
        return tuple(dataclasses.replace(t, timing=_scaled(t.timing, factor)) for t in ts)

    results = tuple(dataclasses.replace(x, timings=scaled(x.timings), gpu_timings=scaled(x.gpu_timings))
                    if (x.op, x.size_bytes) == (op, size_bytes) else x for x in sweep.results)
    return with_node(r, collectives=(dataclasses.replace(sweep, results=results), *r.node.collectives[1:]))


def copy_slowed(r: Report, kind: str, factor: float) -> Report:
    """Every copy of ``kind`` (d2d, h2d, d2h) ``factor`` times slower."""
    assert r.node is not None and r.node.peer is not None
    copies = tuple(dataclasses.replace(c, timing=_scaled(c.timing, factor)) if c.kind == kind and c.timing else c
                   for c in r.node.peer.copies)
    return with_node(r, peer=dataclasses.replace(r.node.peer, copies=copies))


def nvlinks_down(r: Report, gpu: int, down: int) -> Report:
    """``down`` of GPU ``gpu``'s NVLinks inactive, as NVML would report a dead cable or tray slot."""
    assert r.node is not None and r.node.topology is not None
    topo = r.node.topology
    gpus = []
    for g in topo.gpus:
        if g.index == gpu:
            links = tuple(dataclasses.replace(lk, active=False) if i < down else lk for i, lk in enumerate(g.nvlinks))
            g = dataclasses.replace(g, nvlinks=links)
        gpus.append(g)
    return with_node(r, topology=dataclasses.replace(topo, gpus=tuple(gpus)))


def nccl_changed(r: Report, version: str, algo: str) -> Report:
    """Another NCCL version that picked ``algo`` wherever the original logged RING."""
    assert r.node is not None
    sweep = _sweep(r.node)
    choices = tuple(dataclasses.replace(c, algo=algo) if c.algo == "RING" else c for c in sweep.choices)
    return with_node(r, collectives=(dataclasses.replace(sweep, nccl_version=version, choices=choices),
                                     *r.node.collectives[1:]))


def fleet_reordered(r: Report) -> Report:
    """The same fleet with its nodes listed in the other order (ranks renumbered by a launcher)."""
    assert r.fleet is not None
    return dataclasses.replace(r, fleet=dataclasses.replace(r.fleet, nodes=tuple(reversed(r.fleet.nodes))))


def fleet_with_stranger(r: Report, host: str = "rack7-node3") -> Report:
    """The fleet with its last node replaced by a node of another host (``host``) with other GPUs."""
    assert r.fleet is not None
    last = r.fleet.nodes[-1]
    env = last.environment
    assert env is not None
    gpus = tuple(dataclasses.replace(g, facts={**g.facts, "uuid": known(f"GPU-0000000{i}-0000-0000-0000-000000000000")})
                 for i, g in enumerate(env.gpus))
    stranger = dataclasses.replace(last, host=host, environment=dataclasses.replace(env, gpus=gpus),
                                   node=dataclasses.replace(last.node, host=host) if last.node else None)
    return dataclasses.replace(r, fleet=dataclasses.replace(r.fleet, nodes=(*r.fleet.nodes[:-1], stranger)))
