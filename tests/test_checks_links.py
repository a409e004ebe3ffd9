"""Link health checks: rates and deltas at DCGM's limits, Xid events from the kernel log, row remapping.
NVML answers come from the real 2 x H200 capture (a healthy link there shows CRC-data 3, ECC-data 4)."""

from __future__ import annotations

import pytest
from fakes import FakeHost
from node_fakes import capture, fake_nvml

from envcheck.checks import links
from envcheck.model import Environment
from envcheck.model.node import Counter, CounterSnapshot, Node
from envcheck.probes.link_counters import LINKS_SECTION, links_section, read_counters
from envcheck.probes.xid import parse_xids, scan_xids

DAY = 86400.0


def _host(uptime: float = DAY) -> FakeHost:
    return FakeHost(files={"/proc/uptime": f"{uptime:.2f} 1000.00\n"})


def _denied() -> str:
    raise PermissionError(1, "Operation not permitted")


def _env(fake=None, uptime=DAY, kmsg=lambda: "") -> Environment:
    fake = fake or fake_nvml()
    fake.init()
    host = _host(uptime)
    snap = read_counters(fake, (0, 1), host)
    section = links_section(fake, host, snap, scan_xids(host, kmsg), (0, 1))
    return Environment({LINKS_SECTION: section})


def _by_id(env):
    return {c.id: c for c in links.checks(env)}


def test_captured_h200_links_pass_with_their_small_counts_shown():
    gpu0 = capture()["nvml"]["gpus"][0]["nvlinks"]
    crc = sum(lk["error[DL_CRC_DATA]"]["value"] for lk in gpu0)
    ecc = sum(lk["error[DL_ECC_DATA]"]["value"] for lk in gpu0)
    assert (crc, ecc) == (103, 161)  # 3 and 4 on link 0, alike on the others, on a healthy node
    checks = _by_id(_env())
    c = checks["links.nvlink.0"]
    assert c.status == "pass"
    assert "18 active links" in c.finding and f"crc_data {crc}" in c.finding and f"ecc_data {ecc}" in c.finding
    assert checks["links.pcie_replay.0"].status == "pass"
    assert checks["links.row_remap.1"].status == "pass"
    assert checks["links.xid"].status == "pass"


def test_crc_errors_above_100_per_second_fail():
    fake = fake_nvml()
    fake.set(0, "nvmlDeviceGetNvLinkErrorCounter[3,3]", {"value": 200 * 3600})  # crc_data on link 3
    c = _by_id(_env(fake, uptime=3600.0))["links.nvlink.0"]
    assert c.status == "fail" and "link 3 crc_data" in c.finding and "200/s" in c.finding
    assert "nvidia-smi nvlink -e -i 0" in c.fix


def test_same_count_over_a_long_uptime_is_a_normal_rate():
    fake = fake_nvml()
    fake.set(0, "nvmlDeviceGetNvLinkErrorCounter[3,3]", {"value": 200 * 3600})
    assert _by_id(_env(fake, uptime=30 * DAY))["links.nvlink.0"].status == "pass"


def test_a_passing_sum_over_every_link_names_the_busiest_link_the_limit_is_for():
    """The 2 x H100 of 2026-11-26 (tests/test_device_compare.py's node): 376/s summed over 18 links read beside
    "normal below 100/s" as if over it. The limit is per link and counter, so the finding names the busiest."""
    fake = fake_nvml()
    for link in range(18):
        fake.set(0, f"nvmlDeviceGetNvLinkErrorCounter[{link},4]", {"value": 20 * 3600})  # ecc_data, 20/s each
    fake.set(0, "nvmlDeviceGetNvLinkErrorCounter[5,4]", {"value": 60 * 3600})
    c = _by_id(_env(fake, uptime=3600.0))["links.nvlink.0"]
    assert c.status == "pass"
    assert "all links together" in c.finding and "the busiest, link 5 ecc_data, 60/s" in c.finding
    assert c.finding.endswith("normal below 100/s on any one link")


def test_a_recovery_since_boot_warns():
    fake = fake_nvml()
    fake.set(1, "nvmlDeviceGetNvLinkErrorCounter[7,1]", {"value": 1})
    c = _by_id(_env(fake))["links.nvlink.1"]
    assert c.status == "warn" and "link(s) 7" in c.finding


def test_pcie_replays_above_eight_per_minute_fail():
    fake = fake_nvml()
    fake.set(0, "nvmlDeviceGetPcieReplayCounter", {"value": 9 * 60})
    assert _by_id(_env(fake, uptime=3600.0))["links.pcie_replay.0"].status == "fail"
    assert _by_id(_env(fake, uptime=DAY))["links.pcie_replay.0"].status == "pass"


def test_row_remap_failure_fails_and_uncorrectable_remaps_warn():
    fake = fake_nvml()
    fake.set(0, "nvmlDeviceGetRemappedRows", {"value": [2, 1, 0, 0]})
    fake.set(1, "nvmlDeviceGetRemappedRows", {"value": [0, 0, 0, 1]})
    checks = _by_id(_env(fake))
    assert checks["links.row_remap.0"].status == "warn" and "1 row(s)" in checks["links.row_remap.0"].finding
    assert checks["links.row_remap.1"].status == "fail"


# The driver's format (open-gpu-kernel-modules kernel_rc.c): "NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s",
# as /dev/kmsg ("prio,seq,usec,flags;message") and dmesg ("[  sec.usec] message") carry it.
KMSG = ("6,812,5210000123,-;NVRM: Xid (PCI:0000:00:07): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"
        "6,813,5210000200,-;nvidia-modeset: unrelated line\n")
DMESG = "[ 4120.000100] NVRM: Xid (PCI:0000:00:06): 13, pid=99, name=python3, Graphics Exception\n"


def test_xid_lines_parse_from_kmsg_and_dmesg():
    (e,) = parse_xids(KMSG)
    assert (e.xid, e.pci_bus_id, e.uptime_s) == (79, "0000:00:07", pytest.approx(5210.000123))
    (d,) = parse_xids(DMESG)
    assert (d.xid, d.uptime_s) == (13, 4120.0001) and d.line.startswith("NVRM: Xid")


def test_xid_79_fails_on_the_gpu_it_names():
    c = _by_id(_env(kmsg=lambda: KMSG))["links.xid"]
    assert c.status == "fail" and "Xid 79 x1 on GPU 1" in c.finding and "/dev/kmsg" in c.finding


def test_an_application_xid_warns():
    host = FakeHost(files={"/proc/uptime": "100.0 1.0\n"}, commands={"journalctl": (0, DMESG, "")})
    scan = scan_xids(host, _denied)
    assert scan.source == "journalctl -k" and scan.reasons == ("/dev/kmsg: Operation not permitted",)
    fake = fake_nvml()
    fake.init()
    env = Environment({LINKS_SECTION: links_section(fake, host, read_counters(fake, (0, 1), host), scan, (0, 1))})
    c = _by_id(env)["links.xid"]
    assert c.status == "warn" and "Xid 13 x1 on GPU 0" in c.finding


def test_an_unreadable_kernel_log_is_a_skip_with_every_reason():
    host = FakeHost(files={"/proc/uptime": "100.0 1.0\n"},
                    commands={"journalctl": (1, "", "No journal files were opened due to insufficient permissions."),
                              "dmesg": (1, "", "dmesg: read kernel buffer failed: Operation not permitted")})
    scan = scan_xids(host, _denied)
    assert scan.source is None and len(scan.reasons) == 3
    fake = fake_nvml()
    fake.init()
    env = Environment({LINKS_SECTION: links_section(fake, host, read_counters(fake, (0, 1), host), scan, (0, 1))})
    c = _by_id(env)["links.xid"]
    assert c.status == "skip" and "Operation not permitted" in c.finding and "dmesg_restrict" in c.fix


def test_no_links_section_gives_no_verdicts():
    assert links.checks(Environment()) == []


def test_registered_with_the_other_checks():
    from envcheck.checks import evaluate

    ids = {c.id for c in evaluate(_env())}
    assert {"links.xid", "links.nvlink.0", "links.pcie_replay.1"} <= ids


def _snap(uptime, crc):
    return CounterSnapshot(uptime, (Counter(0, "crc_data", crc, link=2), Counter(0, "recovery", 0, link=2),
                                    Counter(0, "pcie_replay", 0)))


def test_counters_that_grow_fast_during_the_node_tests_fail():
    node = Node("vm", (0,), counters_before=_snap(1000.0, 3), counters_after=_snap(1060.0, 3 + 60 * 150))
    (c,) = links.delta_checks(node)
    assert c.status == "fail" and "NVLink 2 crc_data +9000 / 60 s" in c.finding


def test_a_few_errors_during_the_tests_are_within_limits():
    node = Node("vm", (0,), counters_before=_snap(1000.0, 3), counters_after=_snap(1060.0, 5))
    (c,) = links.delta_checks(node)
    assert c.status == "pass" and "+2" in c.finding


def test_counters_read_on_the_capture():
    fake = fake_nvml()
    fake.init()
    snap = read_counters(fake, (0,), _host())
    crc = [c for c in snap.counters if c.name == "crc_data"]
    assert len(crc) == 18 and crc[0].value == 3
    assert next(c for c in snap.counters if c.name == "pcie_replay").value == 0
    assert next(c for c in snap.counters if c.name == "pcie_replay_rollover").value == 0
