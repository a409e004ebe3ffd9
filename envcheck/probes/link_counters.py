"""Link error counters (PCIe replays, NVLink errors, row remapping, Xids) and the ``links`` section the link checks
read, in a child as NVML may crash or hang. NVML counts since the driver loaded: a reading is dated with the uptime
(a rate) and taken around the node tests (a delta)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envcheck.model import Fact, Facts, build, known, missing
from envcheck.model.node import NVLINK_COUNTERS, Counter, CounterSnapshot, XidScan
from envcheck.probes import isolate
from envcheck.probes.gpus import NvmlLike
from envcheck.probes.host import Emit, Host, default_host
from envcheck.probes.nvml import NvmlCallError, field_value
from envcheck.probes.topology import active_links

if TYPE_CHECKING:
    from envcheck.outside_json import Json

# nvmlNvLinkErrorCounter_t, in NVLINK_COUNTERS order
NVLINK_COUNTER_IDS = {name: i for i, name in enumerate(NVLINK_COUNTERS)}
FI_PCIE_REPLAY_ROLLOVER = 95

LINKS_SECTION = "links"


def read_uptime(host: Host) -> tuple[float | None, str | None]:
    """Seconds since boot from /proc/uptime, or the reason it could not be read."""
    try:
        text = host.read_text("/proc/uptime")
    except OSError as e:
        return None, f"cannot read /proc/uptime ({e.strerror or e})"
    try:
        return float(text.split()[0]), None
    except (ValueError, IndexError):
        return None, f"unexpected /proc/uptime: {text[:40]!r}"


def _counter(gpu: int, name: str, read: tuple[Json, str | None], link: int | None = None) -> Counter:
    value, why = read
    return Counter(gpu, name, link=link, reason=why) if why is not None else Counter(gpu, name, int(value), link)


def _gpu_counters(nvml: NvmlLike, index: int) -> list[Counter]:
    handle, why = nvml.query("nvmlDeviceGetHandleByIndex", index)
    if why is not None:
        return [Counter(index, "pcie_replay", reason=why)]
    # nvidia-smi -q: PCI / Replays Since Reset, Replay Number Rollovers
    out = [_counter(index, "pcie_replay", nvml.query("nvmlDeviceGetPcieReplayCounter", handle))]
    value, why = field_value(nvml, handle, FI_PCIE_REPLAY_ROLLOVER)
    out.append(Counter(index, "pcie_replay_rollover", value=int(value)) if isinstance(value, int)
               else Counter(index, "pcie_replay_rollover", reason=why))
    for link in active_links(nvml, handle):
        out.extend(_counter(index, name, nvml.query("nvmlDeviceGetNvLinkErrorCounter", handle, link, cid), link)
                   for name, cid in NVLINK_COUNTER_IDS.items())
    return out


def read_counters(nvml: NvmlLike, indices: tuple[int, ...], host: Host) -> CounterSnapshot:
    """Every error counter of GPUs ``indices``, dated by the uptime. Never raises."""
    uptime, why = read_uptime(host)
    if nvml.init() is not None:
        return CounterSnapshot(uptime, (), why)
    counters: list[Counter] = []
    for i in indices:
        try:
            counters.extend(_gpu_counters(nvml, i))
        except Exception as e:  # noqa: BLE001 - one GPU's surprise must not hide the others
            counters.append(Counter(i, "pcie_replay", reason=f"envcheck could not read this GPU ({e})"))
    return CounterSnapshot(uptime, tuple(counters), why)


def _remapped_rows(nvml: NvmlLike, index: int) -> Fact:
    """nvidia-smi -q: Remapped Rows (Correctable Error, Uncorrectable Error, Pending, Remapping Failure)."""
    try:
        handle = nvml.call("nvmlDeviceGetHandleByIndex", index)
        rows = nvml.call("nvmlDeviceGetRemappedRows", handle)
    except NvmlCallError as e:
        return missing(e.reason)
    if not isinstance(rows, list) or len(rows) != 4:
        return missing(f"unexpected answer {rows!r:.60}")
    return known({"correctable": int(rows[0]), "uncorrectable": int(rows[1]), "pending": bool(rows[2]),
                  "failure": bool(rows[3])})


def links_section(nvml: NvmlLike, host: Host, snapshot: CounterSnapshot, xid: XidScan,
                  indices: tuple[int, ...]) -> Facts:
    """The ``links`` section: per GPU ``gpu<i>.pcie_replay``, ``.nvlink_errors`` (a dict per active link),
    ``.remapped_rows``, ``.pci_bus_id``; ``uptime_s``; ``xid_source`` and ``xid_events``."""
    f: Facts = {}
    f["uptime_s"] = known(snapshot.uptime_s) if snapshot.uptime_s is not None else missing(
        snapshot.uptime_reason or "unknown")
    f["xid_source"] = known(xid.source) if xid.source else missing("; ".join(xid.reasons) or "no source")
    f["xid_events"] = (known([{"xid": e.xid, "pci_bus_id": e.pci_bus_id, "uptime_s": e.uptime_s, "line": e.line}
                              for e in xid.events]) if xid.source else missing("; ".join(xid.reasons) or "no source"))
    for i in indices:
        mine = [c for c in snapshot.counters if c.gpu == i]
        replay = next((c for c in mine if c.name == "pcie_replay"), None)
        f[f"gpu{i}.pcie_replay"] = (known(replay.value) if replay and replay.value is not None
                                    else missing(replay.reason if replay and replay.reason else "not read"))
        by_link: dict[int, dict[str, int | None]] = {}
        for c in mine:
            if c.link is not None:
                by_link.setdefault(c.link, {"link": c.link})[c.name] = c.value
        f[f"gpu{i}.nvlink_errors"] = known([by_link[k] for k in sorted(by_link)])
        f[f"gpu{i}.remapped_rows"] = _remapped_rows(nvml, i)
        try:
            pci = nvml.call("nvmlDeviceGetPciInfo", nvml.call("nvmlDeviceGetHandleByIndex", i))
            f[f"gpu{i}.pci_bus_id"] = known(pci.get("busId")) if isinstance(pci, dict) else missing("no bus id")
        except NvmlCallError as e:
            f[f"gpu{i}.pci_bus_id"] = missing(e.reason)
    return f


def probe_links(nvml: NvmlLike | None = None, host: Host | None = None, timeout: float = 10.0) -> Facts:
    """The ``links`` section for every GPU NVML lists (what ``collect`` adds to the environment). Never raises."""
    from envcheck.probes.xid import scan_xids

    host = host or default_host()
    own = nvml is None
    if nvml is None:
        from envcheck.probes.nvml import Nvml

        nvml = Nvml()
    try:
        xid = scan_xids(host, timeout=timeout)
        if nvml.init() is not None:
            uptime, why = read_uptime(host)
            return links_section(nvml, host, CounterSnapshot(uptime, (), why), xid, ())
        try:
            count = int(nvml.call("nvmlDeviceGetCount"))
        except NvmlCallError:
            count = 0
        indices = tuple(range(count))
        return links_section(nvml, host, read_counters(nvml, indices, host), xid, indices)
    finally:
        if own:
            nvml.shutdown()


def child(args: object, out: Emit) -> None:
    from envcheck.model import to_dict

    out({"facts": to_dict(probe_links())})


def probe_links_isolated(host: Host, timeout: float) -> Facts:
    """The ``links`` section from a child; ``error`` holds what went wrong when it did not report."""
    iso = isolate.run_python(host, "envcheck.probes.link_counters:child", timeout, LINKS_SECTION)
    raw = (iso.data or {}).get("facts")
    if isinstance(raw, dict):
        try:
            return {str(k): build(Fact, v, f"links.{k}") for k, v in raw.items()}
        except ValueError as e:
            return {"error": missing(f"the links probe answered something unreadable: {e}")}
    return {"error": missing(iso.error or "the links probe reported nothing")}
