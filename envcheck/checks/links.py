"""Link and error-counter health from the ``links`` section: PCIe replays, NVLink errors, Xid events, row remapping;
every threshold (DCGM's) is a rate over the uptime, or a delta during envcheck's node tests."""

from __future__ import annotations

import collections
import re
from typing import Any

from envcheck import units
from envcheck.analysis.counters import (
    NVLINK_CRC_PER_S_LIMIT,
    PCIE_REPLAY_PER_MIN_LIMIT,
    RATE_COUNTERS,
    CounterChange,
    counter_deltas,
    counter_over_limit,
)
from envcheck.checks.machine import gpu_label, has_gpu
from envcheck.checks.said import said
from envcheck.model import Check, Environment, Status
from envcheck.model.node import Node

SECTION = "links"

# Xids that need a reset or service, not a restart of the job (docs.nvidia.com/deploy/xid-errors).
SERVICE_XIDS = frozenset({48, 62, 64, 74, 79, 92, 95, 119, 120, 140})


def _get(env: Environment, key: str) -> Any:
    return env.get(SECTION, key)


def _reason(env: Environment, key: str) -> str:
    return env.fact(SECTION, key).reason or "not probed"


def _indices(env: Environment) -> list[int]:
    return sorted({int(m[1]) for key in env.sections.get(SECTION, {}) if (m := re.match(r"gpu(\d+)\.", key))})


def _said(rule: str, env: Environment, i: int, status: Status, key: str, fix: str | None = None, /,
          **params: object) -> Check:
    gpu = next((g for g in env.gpus if g.index == i), None)
    return said(f"links.{rule}.{i}", status, key, fix, gpu=gpu_label(gpu) if gpu else f"GPU {i}", **params)


def _unread(rule: str, env: Environment, i: int, key: str) -> Check:
    return _said(rule, env, i, "skip", "gpu.skip", reason=_reason(env, key))


def check_pcie_replay(env: Environment, i: int) -> Check:
    count, uptime = _get(env, f"gpu{i}.pcie_replay"), _get(env, "uptime_s")
    if not isinstance(count, int):
        return _unread("pcie_replay", env, i, f"gpu{i}.pcie_replay")
    if not isinstance(uptime, (int, float)) or uptime <= 0:
        return _said("pcie_replay", env, i, "skip", "links.replay_no_uptime", count=count,
                     reason=_reason(env, "uptime_s"))
    per_min = count / (uptime / 60)
    limit = f"{PCIE_REPLAY_PER_MIN_LIMIT:g}/min"
    if per_min > PCIE_REPLAY_PER_MIN_LIMIT:
        return _said("pcie_replay", env, i, "fail", "links.replay_high", "links.replay_high.fix", count=count,
                     rate=f"{per_min:.1f}/min", limit=limit, index=i)
    return _said("pcie_replay", env, i, "pass", "links.replay_ok", count=count, rate=f"{per_min:.2g}/min",
                 limit=limit)


def check_nvlink(env: Environment, i: int) -> Check:
    links = _get(env, f"gpu{i}.nvlink_errors")
    uptime = _get(env, "uptime_s")
    if not isinstance(links, list):
        return _unread("nvlink", env, i, f"gpu{i}.nvlink_errors")
    if not links:
        return _said("nvlink", env, i, "skip", "links.no_nvlink")
    totals = {k: sum(int(lk.get(k) or 0) for lk in links) for k in ("crc_flit", "crc_data", "replay", "recovery",
                                                                       "ecc_data")}
    recovering = [lk["link"] for lk in links if (lk.get("recovery") or 0) > 0]
    counts = ", ".join(f"{k} {v}" for k, v in totals.items() if v)  # NVML's counter names: identifiers
    limit = f"{NVLINK_CRC_PER_S_LIMIT:g}/s"
    timed = isinstance(uptime, (int, float)) and uptime > 0
    # The limit is per link and counter: the busiest one is judged, and shown beside the sum over every link.
    busiest = max(((lk["link"], k, lk[k]) for lk in links for k in RATE_COUNTERS if isinstance(lk.get(k), int)),
                  key=lambda b: b[2], default=None)
    if timed and busiest is not None and busiest[2] / uptime > NVLINK_CRC_PER_S_LIMIT:
        return _said("nvlink", env, i, "fail", "links.nvlink_hot", "links.nvlink_hot.fix", link=busiest[0],
                     counter=busiest[1], rate=f"{busiest[2] / uptime:.0f}/s", limit=limit, index=i)
    if recovering:
        return _said("nvlink", env, i, "warn", "links.nvlink_recovery", "links.nvlink_recovery.fix",
                     links=", ".join(map(str, recovering)), index=i)
    n = len(links)
    if not counts:
        return _said("nvlink", env, i, "pass", "links.nvlink_clean", count=n)
    if timed and busiest is not None:
        return _said("nvlink", env, i, "pass", "links.nvlink_counts.busiest", count=n, counts=counts, limit=limit,
                     rate=units.per_unit(sum(totals.values()), uptime), span=units.span(uptime),
                     link=busiest[0], counter=busiest[1], top=units.per_unit(busiest[2], uptime))
    return _said("nvlink", env, i, "pass", "links.nvlink_counts", count=n, counts=counts, limit=limit)


def check_row_remap(env: Environment, i: int) -> Check:
    rows = _get(env, f"gpu{i}.remapped_rows")
    if not isinstance(rows, dict):
        return _unread("row_remap", env, i, f"gpu{i}.remapped_rows")
    if rows.get("failure"):
        return _said("row_remap", env, i, "fail", "links.remap_failed", "links.remap_failed.fix")
    if rows.get("pending"):
        return _said("row_remap", env, i, "warn", "gpu.remap_pending", "links.remap_pending.fix", index=i)
    unc = rows.get("uncorrectable") or 0
    cor = rows.get("correctable") or 0
    if unc:
        return _said("row_remap", env, i, "warn", "links.remap_uncorrectable", "links.remap_uncorrectable.fix",
                     count=unc, correctable=cor, index=i)
    return _said("row_remap", env, i, "pass", "links.remap_ok", count=cor)


def _pci_key(bus: str) -> str:
    """``00000000:00:06.0`` (NVML) and ``0000:00:06`` (the Xid line) -> ``0000:00:06``."""
    parts = bus.lower().split(".", 1)[0].split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:].rjust(4, "0")
    return ":".join(parts)


def _gpu_of_pci(env: Environment, pci: str | None) -> int | None:
    buses = {i: _get(env, f"gpu{i}.pci_bus_id") for i in _indices(env)} if pci else {}
    return next((i for i, bus in buses.items() if isinstance(bus, str) and _pci_key(bus) == _pci_key(pci)), None)


def check_xid(env: Environment) -> Check:
    cid = "links.xid"
    if not _indices(env) and not has_gpu(env):
        return said(cid, "skip", "links.xid_no_gpu")  # no NVIDIA driver: no Xid can be logged, none to pass
    events = _get(env, "xid_events")
    source = _get(env, "xid_source")
    if not isinstance(events, list) or not source:
        return said(cid, "skip", "links.xid_unreadable", "links.xid_unreadable.fix", reason=_reason(env, "xid_source"))
    if not events:
        return said(cid, "pass", "links.xid_none", source=source)
    by_xid = collections.Counter(int(e["xid"]) for e in events)
    serious = sorted(x for x in by_xid if x in SERVICE_XIDS)
    gpus = sorted({g for g in (_gpu_of_pci(env, e.get("pci_bus_id")) for e in events) if g is not None})
    listed = ", ".join(f"Xid {x} x{n}" for x, n in sorted(by_xid.items()))
    last = str(events[-1].get("line", ""))[:120]
    where = {"gpus": ", ".join(map(str, gpus))} if gpus else {}
    shape = ".gpus" if gpus else ""
    if serious:
        return said(cid, "fail", f"links.xid_serious{shape}", "links.xid_serious.fix", last, listed=listed,
                    source=source, serious=", ".join(map(str, serious)), **where)
    return said(cid, "warn", f"links.xid_app{shape}", "links.xid_app.fix", last, listed=listed, source=source, **where)


def checks(env: Environment) -> list[Check]:
    if SECTION not in env.sections:
        return []
    out: list[Check] = [check_xid(env)]
    for i in _indices(env):
        out.extend((check_pcie_replay(env, i), check_nvlink(env, i), check_row_remap(env, i)))
    return out


def _describe(change: CounterChange) -> str:
    """NVML's counter name, its growth and the interval: identifiers and numbers, the same in every language."""
    where = f"NVLink {change.link} " if change.link is not None else ""
    return f"{where}{change.name} +{change.delta} / {units.span(change.interval_s)}"


def delta_checks(node: Node) -> list[Check]:
    """Counters that grew while envcheck's own node tests loaded the links: over minutes, a rate is sharp where a
    since-boot one is diluted by idle weeks."""
    if node.counters_before is None or node.counters_after is None:
        return []
    changes = counter_deltas(node.counters_before, node.counters_after)
    return [_delta(gpu, [c for c in changes if c.gpu == gpu]) for gpu in node.gpus]


def _delta(gpu: int, mine: list[CounterChange]) -> Check:
    cid = f"links.during_tests.{gpu}"
    bad, grew = [c for c in mine if counter_over_limit(c)], [c for c in mine if c.delta > 0]
    if not mine:
        return said(cid, "skip", "links.delta_unread", index=gpu)
    if bad:
        return said(cid, "fail", "links.delta_bad", "links.delta_bad.fix", index=gpu,
                    what="; ".join(_describe(c) for c in bad[:3]))
    if grew:
        return said(cid, "pass", "links.delta_grew", index=gpu, what="; ".join(_describe(c) for c in grew[:3]))
    return said(cid, "pass", "links.delta_none", index=gpu)
