"""Topology through the NVML seam and nvidia-smi's texts, fed with the real 2 x H200 capture."""

from __future__ import annotations

import pytest
from node_fakes import capture, fake_nvml

from envcheck.analysis.collectives import ring_expectation
from envcheck.analysis.links import NVLINK, PCIE, pair_path, pcie_gbps, smi_disagreements, topo_label
from envcheck.model import build, to_dict
from envcheck.model.facts import known
from envcheck.model.node import GpuLinks, NvLink, Topology
from envcheck.probes.topology import parse_nvlink_speeds, parse_topo_matrix, probe_topology


def _h200_topology(**kw):
    cap = capture()
    return probe_topology(fake_nvml(), (0, 1), cap["topo_m"]["stdout"], cap["nvlink_s"]["stdout"], **kw)


def test_h200_pair_reaches_over_18_nvswitch_links_at_26_562_mbps():
    topo = _h200_topology()
    g0 = topo.gpus[0]
    assert g0.pci_bus_id.value == "00000000:00:06.0"
    assert g0.nvlink_count.value == 18
    assert len([lk for lk in g0.nvlinks if lk.active]) == 18
    assert {lk.remote_type.value for lk in g0.nvlinks} == {"switch"}
    assert g0.nvlinks[0].speed_mbps.value == 26562 and g0.nvlinks[0].speed_source == "nvml"
    path = pair_path(topo, 0, 1)
    assert path.via == "nvswitch" and path.nvlinks == 18
    # NVML names NVLink 4 (version 6): 18 links x 25 GB/s per direction from the datasheet (900 GB/s
    # bidirectional), not NVML's 18 x 26.562 = 478 GB/s signalling rate, which stays beside it as a fact.
    assert path.generation == 4 and path.reference == "datasheet"
    assert path.link_gbps == 25.0 and path.expected_gbps == pytest.approx(450.0)
    assert path.signalling_gbps == pytest.approx(26.562)
    assert path.pcie_level == "hostbridge"  # the VM's GPUs meet at a PCIe host bridge (topo: PHB under NV18)


def test_links_nvml_cannot_time_get_their_speed_from_nvidia_smi():
    # The capture read NVLINK_GET_SPEED for link 0 only; nvidia-smi nvlink -s lists all 18.
    g0 = _h200_topology().gpus[0]
    assert g0.nvlinks[5].speed_mbps.value == 26562
    assert g0.nvlinks[5].speed_source == "nvidia-smi"


def test_missing_v2_binding_and_unsupported_numa_are_reasons_not_crashes():
    g0 = _h200_topology().gpus[0]
    why = g0.nvlinks[0].remote_pci_bus_id.reason
    assert "nvmlDeviceGetNvLinkRemotePciInfo_v2" in why and "pip install -U nvidia-ml-py" in why
    assert "nvmlDeviceGetNvLinkRemotePciInfo:" in why  # the first version was tried next
    assert g0.numa_node.reason.startswith("not supported on this GPU")


def test_pair_p2p_status_and_smi_agree():
    topo = _h200_topology()
    assert {k: f.value for k, f in topo.pairs[0].p2p.items()} == {"read": "ok", "write": "ok", "nvlink": "ok",
                                                                  "atomics": "ok"}
    assert [(c.a, c.b, c.text) for c in topo.smi_cells] == [(0, 1, "NV18"), (1, 0, "NV18")]
    assert smi_disagreements(topo) == ()


def test_smi_disagreement_is_reported():
    topo = _h200_topology()
    from dataclasses import replace

    from envcheck.model.node import TopoCell

    wrong = replace(topo, smi_cells=(TopoCell(0, 1, "NV12"),))
    assert smi_disagreements(wrong) == ((0, 1, "NV18", "NV12"),)


def test_a_lost_gpu_keeps_its_entry_and_hides_nothing_else():
    fake = fake_nvml()
    fake.lose_gpu(1, at_handle=True)
    topo = probe_topology(fake, (0, 1))
    assert topo.gpus[1].lost and "GPU is lost" in topo.gpus[1].lost
    assert len(topo.gpus[0].nvlinks) == 18
    assert topo.pairs[0].pcie_level.reason == "GPU 1 could not be queried"


def test_nvml_that_does_not_load_is_a_reason():
    from fake_nvml import FakeNvml

    topo = probe_topology(FakeNvml({"count": 0, "gpus": []}, init_error="NVMLError_DriverNotLoaded"))
    assert topo.reason == "NVML unavailable: Driver Not Loaded" and topo.gpus == ()


def test_topology_round_trips_through_json():
    topo = _h200_topology()
    assert build(Topology, to_dict(topo)) == topo


def test_parse_topo_matrix_rejects_an_error_text():
    with pytest.raises(ValueError):
        parse_topo_matrix("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


def test_nvlink_speeds_parse_every_line():
    speeds = parse_nvlink_speeds(capture()["nvlink_s"]["stdout"])
    assert len(speeds) == 36 and {s.gbps for s in speeds} == {26.562}


@pytest.mark.parametrize(("gen", "width", "gbps"), [(5, 16, 63.015), (4, 16, 31.508), (3, 16, 15.754),
                                                    (2, 8, 4.0), (1, 1, 0.25), (6, 16, 121.0)])
def test_pcie_bandwidth_per_direction(gen, width, gbps):
    assert pcie_gbps(gen, width) == pytest.approx(gbps, abs=1e-3)


def test_pcie_pair_expects_the_slower_link():
    a = GpuLinks(0, pcie_gen_max=known(5), pcie_width_max=known(16))
    b = GpuLinks(1, pcie_gen_max=known(4), pcie_width_max=known(16))
    p = pair_path(Topology((a, b)), 0, 1)
    assert p.via == "pcie" and p.expected_gbps == pytest.approx(31.508, abs=1e-3)


def test_direct_nvlinks_count_only_links_to_the_peer():
    def links(peer_bus):
        return tuple(NvLink(i, True, speed_mbps=known(25000), remote_type=known("gpu"),
                            remote_pci_bus_id=known(peer_bus if i < 4 else "0000:99:00.0")) for i in range(6))

    a = GpuLinks(0, pci_bus_id=known("00000000:07:00.0"), nvlinks=links("0000:0B:00.0"))
    b = GpuLinks(1, pci_bus_id=known("00000000:0B:00.0"), nvlinks=links("0000:07:00.0"))
    p = pair_path(Topology((a, b)), 0, 1)
    # No generation from NVML: the signalling rate is the only reference, and says so.
    assert p.via == "nvlink" and p.nvlinks == 4 and p.expected_gbps == pytest.approx(100.0)
    assert p.reference == "nvml_signalling" and p.generation is None


@pytest.mark.parametrize(("nvml_version", "gen", "per_link"), [(2, 2, 25.0), (3, 2, 25.0), (4, 3, 25.0), (5, 3, 25.0),
                                                             (6, 4, 25.0), (7, 5, 50.0)])
def test_nvlink_reference_is_the_datasheet_payload_of_the_generation_nvml_names(nvml_version, gen, per_link):
    def links(peer_bus):
        return tuple(NvLink(i, True, version=known(nvml_version), speed_mbps=known(26562), remote_type=known("gpu"),
                            remote_pci_bus_id=known(peer_bus)) for i in range(18))

    a = GpuLinks(0, pci_bus_id=known("00000000:07:00.0"), nvlinks=links("0000:0B:00.0"))
    b = GpuLinks(1, pci_bus_id=known("00000000:0B:00.0"), nvlinks=links("0000:07:00.0"))
    p = pair_path(Topology((a, b)), 0, 1)
    assert (p.generation, p.link_gbps, p.reference) == (gen, per_link, "datasheet")
    assert p.expected_gbps == pytest.approx(18 * per_link) and p.signalling_gbps == pytest.approx(26.562)


def test_link_table_matches_the_datasheets_bidirectional_totals():
    # H100/H200 SXM: 900 GB/s over 18 links; A100: 600 over 12; V100: 300 over 6; B200: 1800 over 18.
    assert 2 * 18 * NVLINK[4].link_gbps == 900
    assert 2 * 12 * NVLINK[3].link_gbps == 600
    assert 2 * 6 * NVLINK[2].link_gbps == 300
    assert 2 * 18 * NVLINK[5].link_gbps == 1800
    assert all(s.doc.url.startswith("https://") for s in (*NVLINK.values(), *PCIE.values()))


def test_committed_2x_h200_topology_gives_450_gbps_per_direction():
    from envcheck.model import load

    node = load("evidence/2026-11-22_2326Z_vm_2x-h200_node.json.gz").node
    assert topo_label(pair_path(node.topology, 0, 1)) == "NV18"
    assert ring_expectation(node.topology, node.gpus) == pytest.approx(450.0)
