"""Link and error-counter health: PCIe replays, NVLink errors, Xid events, row remapping.

Reads the ``links`` section (``envcheck.node.counters.links_section``). NVML's counters run since the
driver loaded, and a handful of NVLink CRC errors on a link that has carried traffic for weeks is
normal, so every threshold is a rate (counts over the uptime) or a delta (growth during envcheck's own
node tests, :func:`delta_checks`), at the limits DCGM uses. A machine whose report has no ``links``
section (probed before these checks existed) gets no verdict here rather than a pass.
"""

from __future__ import annotations

from typing import Any

from envcheck.analysis.node import (
    NVLINK_CRC_PER_S_LIMIT,
    PCIE_REPLAY_PER_MIN_LIMIT,
    CounterChange,
    counter_deltas,
    counter_over_limit,
)
from envcheck.model import Check, Environment
from envcheck.model.node import Node

SECTION = "links"

# From NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors): events that mean the GPU or its
# links need a reset or service, as opposed to an application fault (13, 31, 43 ...) that a restart of
# the job clears. 48 double-bit ECC, 62 internal micro-controller halt, 64 row-remapping failure,
# 74 NVLink error, 79 fallen off the bus, 92 high single-bit ECC rate, 95 uncontained ECC error,
# 119 / 120 GSP timeout / error, 140 unrecovered ECC error.
SERVICE_XIDS = frozenset({48, 62, 64, 74, 79, 92, 95, 119, 120, 140})


def _links(env: Environment) -> dict[str, Any] | None:
    return env.sections.get(SECTION)


def _get(env: Environment, key: str) -> Any:
    return env.get(SECTION, key)


def _reason(env: Environment, key: str) -> str:
    return env.fact(SECTION, key).reason or "not probed"


def _indices(env: Environment) -> list[int]:
    out = set()
    for key in (_links(env) or {}):
        if key.startswith("gpu") and "." in key:
            head = key.split(".", 1)[0][3:]
            if head.isdigit():
                out.add(int(head))
    return sorted(out)


def _label(env: Environment, i: int) -> str:
    gpu = next((g for g in env.gpus if g.index == i), None)
    name = gpu.get("name") if gpu else None
    return f"GPU {i} ({name})" if name else f"GPU {i}"


def _per_hour(count: int, uptime_s: float) -> str:
    return f"{count / (uptime_s / 3600):.3g}/h"


def check_pcie_replay(env: Environment, i: int) -> Check:
    cid, title = f"links.pcie_replay.{i}", "PCIe replays within limits"
    label = _label(env, i)
    count, uptime = _get(env, f"gpu{i}.pcie_replay"), _get(env, "uptime_s")
    if not isinstance(count, int):
        return Check(cid, "skip", title, f"{label}: {_reason(env, f'gpu{i}.pcie_replay')}")
    if not isinstance(uptime, (int, float)) or uptime <= 0:
        return Check(cid, "skip", title, f"{label}: {count} replays, uptime unknown ({_reason(env, 'uptime_s')})")
    per_min = count / (uptime / 60)
    if per_min > PCIE_REPLAY_PER_MIN_LIMIT:
        return Check(cid, "fail", title,
                     f"{label}: {count} PCIe replays since boot, {per_min:.1f}/min (limit "
                     f"{PCIE_REPLAY_PER_MIN_LIMIT:g}/min): the link retransmits, transfers slow down",
                     fix=f"nvidia-smi -q -d PCIE -i {i}; reseat the GPU or its riser, check the slot's link "
                         "training in the BIOS; if replays keep growing, have the board serviced")
    return Check(cid, "pass", title, f"{label}: {count} PCIe replays since boot ({per_min:.2g}/min, limit "
                                     f"{PCIE_REPLAY_PER_MIN_LIMIT:g}/min)")


def check_nvlink(env: Environment, i: int) -> Check:
    cid, title = f"links.nvlink.{i}", "NVLink error rates within limits"
    label = _label(env, i)
    links = _get(env, f"gpu{i}.nvlink_errors")
    uptime = _get(env, "uptime_s")
    if not isinstance(links, list):
        return Check(cid, "skip", title, f"{label}: {_reason(env, f'gpu{i}.nvlink_errors')}")
    if not links:
        return Check(cid, "skip", title, f"{label}: no active NVLink")
    totals = {k: sum(int(lk.get(k) or 0) for lk in links) for k in ("crc_flit", "crc_data", "replay", "recovery",
                                                                       "ecc_data")}
    recovering = [lk["link"] for lk in links if (lk.get("recovery") or 0) > 0]
    counts = ", ".join(f"{k} {v}" for k, v in totals.items() if v)
    if isinstance(uptime, (int, float)) and uptime > 0:
        hot = [(lk["link"], k, lk[k] / uptime) for lk in links for k in ("crc_flit", "crc_data", "replay", "ecc_data")
               if isinstance(lk.get(k), int) and lk[k] / uptime > NVLINK_CRC_PER_S_LIMIT]
        if hot:
            link, k, rate = max(hot, key=lambda h: h[2])
            return Check(cid, "fail", title,
                         f"{label}: link {link} {k} errors at {rate:.0f}/s since boot (limit "
                         f"{NVLINK_CRC_PER_S_LIMIT:g}/s): the link is degrading",
                         fix=f"nvidia-smi nvlink -e -i {i}; drain the node, reset the GPU (sudo nvidia-smi -r -i {i}) "
                             "and watch the counters; if they climb again, have the NVLink / NVSwitch serviced")
    if recovering:
        return Check(cid, "warn", title,
                     f"{label}: NVLink recovery on link(s) {', '.join(map(str, recovering))} since boot: the link "
                     "retrained at least once",
                     fix=f"nvidia-smi nvlink -e -i {i} (watch whether recovery errors grow; envcheck run --gpus all "
                         "counts them during its own tests)")
    n = len(links)
    if not counts:
        return Check(cid, "pass", title, f"{label}: {n} active links, no errors since boot")
    rate = (f" ({_per_hour(sum(totals.values()), uptime)} over {uptime / 3600:.1f} h)"
            if isinstance(uptime, (int, float)) and uptime > 0 else "")
    return Check(cid, "pass", title,
                 f"{label}: {n} active links, {counts} since boot{rate}: normal below "
                 f"{NVLINK_CRC_PER_S_LIMIT:g}/s")


def check_row_remap(env: Environment, i: int) -> Check:
    cid, title = f"links.row_remap.{i}", "Row remapping healthy"
    label = _label(env, i)
    rows = _get(env, f"gpu{i}.remapped_rows")
    if not isinstance(rows, dict):
        return Check(cid, "skip", title, f"{label}: {_reason(env, f'gpu{i}.remapped_rows')}")
    if rows.get("failure"):
        return Check(cid, "fail", title, f"{label}: a row remapping failed: memory errors can no longer be repaired",
                     fix="take the GPU out of service and have it replaced; nvidia-smi -q -d ROW_REMAPPER")
    if rows.get("pending"):
        return Check(cid, "warn", title, f"{label}: a row remap is pending until the GPU is reset",
                     fix=f"sudo nvidia-smi -r -i {i} with no processes on it, or reboot")
    unc = rows.get("uncorrectable") or 0
    cor = rows.get("correctable") or 0
    if unc:
        return Check(cid, "warn", title,
                     f"{label}: {unc} row(s) remapped after uncorrectable errors ({cor} after correctable ones)",
                     fix=f"nvidia-smi -q -d ROW_REMAPPER -i {i}: watch the count and the bank availability histogram")
    return Check(cid, "pass", title, f"{label}: {cor} row(s) remapped after correctable errors, none after "
                                     "uncorrectable ones")


def _pci_key(bus: str) -> str:
    """``00000000:00:06.0`` (NVML) and ``0000:00:06`` (the Xid line) -> ``0000:00:06``."""
    parts = bus.lower().split(".", 1)[0].split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:].rjust(4, "0")
    return ":".join(parts)


def _gpu_of_pci(env: Environment, pci: str | None) -> int | None:
    if not pci:
        return None
    for i in _indices(env):
        bus = _get(env, f"gpu{i}.pci_bus_id")
        if isinstance(bus, str) and _pci_key(bus) == _pci_key(pci):
            return i
    return None


def check_xid(env: Environment) -> Check:
    cid, title = "links.xid", "No Xid errors since boot"
    events = _get(env, "xid_events")
    source = _get(env, "xid_source")
    if not isinstance(events, list) or not source:
        return Check(cid, "skip", title, f"kernel log not readable: {_reason(env, 'xid_source')}",
                     fix="run as a user that may read the kernel log (sudo, or the adm / systemd-journal group), "
                         "or sudo sysctl kernel.dmesg_restrict=0")
    if not events:
        return Check(cid, "pass", title, f"no Xid in the kernel log ({source})")
    by_xid: dict[int, int] = {}
    for e in events:
        by_xid[int(e["xid"])] = by_xid.get(int(e["xid"]), 0) + 1
    serious = sorted(x for x in by_xid if x in SERVICE_XIDS)
    gpus = sorted({g for g in (_gpu_of_pci(env, e.get("pci_bus_id")) for e in events) if g is not None})
    where = f" on GPU {', '.join(map(str, gpus))}" if gpus else ""
    listed = ", ".join(f"Xid {x} x{n}" for x, n in sorted(by_xid.items()))
    last = str(events[-1].get("line", ""))[:120]
    if serious:
        return Check(cid, "fail", title, f"{listed}{where} since boot ({source}): Xid "
                                         f"{', '.join(map(str, serious))} mean(s) the GPU needs a reset or service",
                     fix="look up each Xid at https://docs.nvidia.com/deploy/xid-errors/ ; drain the node, reset the "
                         "GPU or reboot, and replace it if the Xid returns",
                     details=last)
    return Check(cid, "warn", title, f"{listed}{where} since boot ({source}): usually an application fault",
                 fix="look up each Xid at https://docs.nvidia.com/deploy/xid-errors/ ; "
                     "journalctl -k | grep Xid shows when and which process",
                 details=last)


def checks(env: Environment) -> list[Check]:
    if _links(env) is None:
        return []
    out: list[Check] = [check_xid(env)]
    for i in _indices(env):
        out.extend((check_pcie_replay(env, i), check_nvlink(env, i), check_row_remap(env, i)))
    return out


# --------------------------------------------------------------------------- during the node tests


def _describe(change: CounterChange) -> str:
    where = f"link {change.link} " if change.link is not None else ""
    return f"{where}{change.name} +{change.delta} in {change.interval_s:.0f} s"


def delta_checks(node: Node) -> list[Check]:
    """Counters that grew while envcheck's own peer copies and collectives loaded the links.

    Run after the node tests (``envcheck run --gpus``): the interval is minutes, so a rate here is
    sharp where a since-boot rate is diluted by idle weeks.
    """
    if node.counters_before is None or node.counters_after is None:
        return []
    changes = counter_deltas(node.counters_before, node.counters_after)
    out = []
    for gpu in node.gpus:
        mine = [c for c in changes if c.gpu == gpu]
        cid, title = f"links.during_tests.{gpu}", "No link errors during the node tests"
        if not mine:
            out.append(Check(cid, "skip", title, f"GPU {gpu}: counters not read before and after the tests"))
            continue
        bad = [c for c in mine if counter_over_limit(c)]
        grew = [c for c in mine if c.delta > 0]
        if bad:
            out.append(Check(cid, "fail", title, f"GPU {gpu}: {'; '.join(_describe(c) for c in bad[:3])} under load",
                             fix=f"nvidia-smi nvlink -e -i {gpu}; nvidia-smi -q -d PCIE -i {gpu}; drain the node and "
                                 "have the link serviced if a rerun shows the same"))
        elif grew:
            out.append(Check(cid, "pass", title, f"GPU {gpu}: {'; '.join(_describe(c) for c in grew[:3])}: within "
                                                 "limits"))
        else:
            out.append(Check(cid, "pass", title, f"GPU {gpu}: no counter grew during the tests"))
    return out
