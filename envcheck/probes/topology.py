"""How a node's GPUs connect, through the NVML seam: each GPU's PCIe link and NVLinks, each pair's common ancestor and
peer-to-peer status; ``nvidia-smi topo -m`` and ``nvlink -s`` are kept as a cross-check and fill per-link speeds
the binding cannot read (nvidia-smi prints tab-separated columns, the header underlined with ANSI escapes even into
a pipe). A GPU that cannot be queried keeps its entry with ``lost`` set."""

from __future__ import annotations

import re
from dataclasses import dataclass

from envcheck.model.facts import Fact, known, missing
from envcheck.model.node import GpuLinks, GpuPair, NvLink, TopoCell, Topology
from envcheck.probes.gpus import NvmlLike, nvml_fact
from envcheck.probes.nvml import NvmlCallError, field_value

# nvmlGpuTopologyLevel_t -> the model's names (nvidia-smi topo -m: X, PIX, PXB, PHB, NODE, SYS)
TOPOLOGY_LEVELS = {0: "internal", 10: "single", 20: "multiple", 30: "hostbridge", 40: "node", 50: "system"}
# nvmlIntNvLinkDeviceType_t
REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch", 0xFF: "unknown"}
# nvmlGpuP2PCapsIndex_t (the model's names) and nvmlGpuP2PStatus_t (nvidia-smi topo -p2p: OK, CNS, GNS, TNS, NS, U)
P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3}
P2P_STATUS = {0: "ok", 1: "chipset_not_supported", 2: "gpu_not_supported", 3: "topology_not_supported",
              4: "disabled_by_regkey", 5: "not_supported", 6: "unknown"}

# NVML field ids (nvml.h) read through nvmlDeviceGetFieldValues
FI_NVLINK_SPEED_MBPS_COMMON = 90
FI_NVLINK_LINK_COUNT = 91
FI_NVLINK_GET_SPEED = 164  # scope: the link; MB/s per direction
# Links probed when NVML cannot say how many a GPU has (NVML_NVLINK_MAX_LINKS up to Hopper)
DEFAULT_MAX_LINKS = 18
# nvidia-smi text: colour escapes, and a GPU column or row header
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"^GPU(\d+)$")


def parse_topo_matrix(text: str) -> tuple[TopoCell, ...]:
    """The GPU-to-GPU cells of ``nvidia-smi topo -m`` (``NV18``, ``SYS``...), without self cells, NICs, affinity
    and legend. ValueError when the text has no GPU matrix (nvidia-smi printed an error instead)."""
    header: list[str] | None = None
    cells: list[TopoCell] = []
    for ln in (_ANSI.sub("", ln) for ln in text.splitlines()):
        parts = [p.strip() for p in ln.split("\t")]
        if header is None:
            names = [p for p in parts if p]
            if names and _GPU.match(names[0]):
                header = parts[1:] if parts and not parts[0] else parts
            continue
        if not _GPU.match(parts[0]):
            if ln.lstrip().startswith(("Legend", "NIC Legend")):
                break
            continue
        row = int(_GPU.match(parts[0]).group(1))  # type: ignore[union-attr]
        for name, value in zip(header, parts[1:], strict=False):  # a row may lack trailing columns
            m = _GPU.match(name)
            if m is None:
                continue
            col = int(m.group(1))
            if col != row and value and value != "X":
                cells.append(TopoCell(row, col, value))
    if header is None:
        raise ValueError("no GPU matrix in nvidia-smi topo -m output")
    return tuple(cells)


@dataclass(frozen=True)
class LinkSpeed:
    """One line of ``nvidia-smi nvlink -s``: ``Link 3: 26.562 GB/s`` or ``Link 3: <inactive>``."""

    gpu: int
    link: int
    gbps: float | None  # per direction; None when inactive


_GPU_LINE = re.compile(r"^GPU (\d+):")
_LINK_LINE = re.compile(r"^\s*Link (\d+):(.*)$")
_SPEED = re.compile(r"^([0-9.]+)\s*GB/s$")


def parse_nvlink_speeds(text: str) -> tuple[LinkSpeed, ...]:
    """Every link line of ``nvidia-smi nvlink -s`` (same text as ``nvlink --status`` on recent drivers)."""
    out: list[LinkSpeed] = []
    gpu: int | None = None
    for ln in text.splitlines():
        m = _GPU_LINE.match(ln)
        if m:
            gpu = int(m.group(1))
            continue
        m = _LINK_LINE.match(ln)
        if m and gpu is not None:
            s = _SPEED.match(m.group(2).strip())
            out.append(LinkSpeed(gpu, int(m.group(1)), float(s.group(1)) if s else None))
    return tuple(out)


def _remote_pci(nvml: NvmlLike, handle: object, link: int) -> Fact:
    """The far end's PCI bus id; some nvidia-ml-py releases lack the _v2 call, so the first version is tried next."""
    reasons = []
    for name in ("nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"):
        info, why = nvml.query(name, handle, link)
        bus = info.get("busId") if isinstance(info, dict) else None
        if bus:
            return known(str(bus))
        reasons.append(f"{name}: {why or f'no bus id in {info!r:.60}'}")
    return missing("; ".join(reasons))


def _link_count(nvml: NvmlLike, handle: object) -> Fact:
    value, why = field_value(nvml, handle, FI_NVLINK_LINK_COUNT)
    return known(int(value)) if isinstance(value, int) else missing(why or "no value")


def _speed(nvml: NvmlLike, handle: object, link: int, smi: dict[int, float | None]) -> tuple[Fact, str | None]:
    value, why = field_value(nvml, handle, FI_NVLINK_GET_SPEED, link)
    if isinstance(value, int) and value > 0:
        return known(value), "nvml"
    common, why2 = field_value(nvml, handle, FI_NVLINK_SPEED_MBPS_COMMON)
    if isinstance(common, int) and common > 0:
        return known(common), "nvml"
    gbps = smi.get(link)
    if gbps is not None:
        return known(round(gbps * 1000)), "nvidia-smi"
    return missing(f"NVLINK_GET_SPEED: {why}; NVLINK_SPEED_MBPS_COMMON: {why2}"), None


def link_states(nvml: NvmlLike, handle: object, count: Fact) -> list[tuple[int, bool | NvmlCallError]]:
    """Each NVLink of a GPU with its state (``nvmlDeviceGetNvLinkState``; nvidia-smi nvlink -s): True active, False
    inactive, or the error reading it. Without a link ``count``, links up to ``DEFAULT_MAX_LINKS`` are tried and
    the first Not Supported or Invalid Argument ends the list."""
    limit = count.value if count.ok else DEFAULT_MAX_LINKS
    states: list[tuple[int, bool | NvmlCallError]] = []
    for link in range(limit):
        try:
            states.append((link, bool(nvml.call("nvmlDeviceGetNvLinkState", handle, link))))
        except NvmlCallError as e:
            if e.error_name in ("NVMLError_NotSupported", "NVMLError_InvalidArgument") and not count.ok:
                break  # no NVLink on this GPU, or past its last link
            states.append((link, e))
    return states


def active_links(nvml: NvmlLike, handle: object) -> tuple[int, ...]:
    """The GPU's active NVLinks (none on a GPU without NVLink, or whose link states cannot be read)."""
    return tuple(link for link, state in link_states(nvml, handle, _link_count(nvml, handle)) if state is True)


def _nvlinks(nvml: NvmlLike, handle: object, count: Fact, smi: dict[int, float | None]) -> tuple[NvLink, ...]:
    links: list[NvLink] = []
    for link, state in link_states(nvml, handle, count):
        if state is not True:
            why = missing(state.reason if isinstance(state, NvmlCallError) else "link inactive")
            links.append(NvLink(link, False, version=why, speed_mbps=why, remote_type=why, remote_pci_bus_id=why))
            continue
        speed, source = _speed(nvml, handle, link, smi)
        links.append(NvLink(
            link, True,
            version=nvml_fact(nvml, "nvmlDeviceGetNvLinkVersion", handle, link),
            speed_mbps=speed, speed_source=source,
            remote_type=nvml_fact(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link,
                              convert=lambda v: REMOTE_TYPES.get(v, "unknown")),
            remote_pci_bus_id=_remote_pci(nvml, handle, link),
        ))
    return tuple(links)


def probe_gpu_links(nvml: NvmlLike, index: int, speeds: tuple[LinkSpeed, ...] = ()) -> tuple[GpuLinks, object]:
    """One GPU's links, and its NVML handle (None when the GPU is lost). Never raises."""
    try:
        handle = nvml.call("nvmlDeviceGetHandleByIndex", index)
    except NvmlCallError as e:
        return GpuLinks(index, lost=e.reason), None
    try:
        pci = nvml_fact(nvml, "nvmlDeviceGetPciInfo", handle)
        count = _link_count(nvml, handle)
        smi = {s.link: s.gbps for s in speeds if s.gpu == index}
        return GpuLinks(
            index,
            uuid=nvml_fact(nvml, "nvmlDeviceGetUUID", handle),
            pci_bus_id=known(pci.value["busId"]) if pci.ok and isinstance(pci.value, dict) and pci.value.get("busId")
            else missing(pci.reason or "no bus id"),
            pcie_gen=nvml_fact(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
            pcie_gen_max=nvml_fact(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle),
            pcie_width=nvml_fact(nvml, "nvmlDeviceGetCurrPcieLinkWidth", handle),
            pcie_width_max=nvml_fact(nvml, "nvmlDeviceGetMaxPcieLinkWidth", handle),
            numa_node=nvml_fact(nvml, "nvmlDeviceGetNumaNodeId", handle),
            nvlink_count=count,
            nvlinks=_nvlinks(nvml, handle, count, smi),
        ), handle
    except Exception as e:  # noqa: BLE001 - an unexpected answer is confined to its GPU
        return GpuLinks(index, lost=f"envcheck could not read this GPU ({type(e).__name__}: {e})"), None


def probe_pair(nvml: NvmlLike, a: int, b: int, ha: object, hb: object) -> GpuPair:
    if ha is None or hb is None:
        why = f"GPU {a if ha is None else b} could not be queried"
        return GpuPair(a, b, missing(why), {k: missing(why) for k in P2P_CAPS})
    level = nvml_fact(nvml, "nvmlDeviceGetTopologyCommonAncestor", ha, hb,
                  convert=lambda v: TOPOLOGY_LEVELS.get(v, f"level_{v}"))
    p2p = {name: nvml_fact(nvml, "nvmlDeviceGetP2PStatus", ha, hb, idx, convert=lambda v: P2P_STATUS.get(v, "unknown"))
           for name, idx in P2P_CAPS.items()}
    return GpuPair(a, b, level, p2p)


def probe_topology(nvml: NvmlLike, indices: tuple[int, ...] | None = None, topo_text: str | None = None,
                   nvlink_text: str | None = None, smi_reason: str | None = None) -> Topology:
    """The node's topology for GPUs ``indices`` (all NVML lists when None). Never raises. ``topo_text`` /
    ``nvlink_text``: what ``nvidia-smi topo -m`` / ``nvlink -s`` printed (None, with ``smi_reason``, if not run)."""
    cells: tuple = ()
    reason = smi_reason
    if topo_text is not None:
        try:
            cells = parse_topo_matrix(topo_text)
            reason = None
        except ValueError as e:
            reason = str(e)
    speeds = parse_nvlink_speeds(nvlink_text) if nvlink_text else ()
    init_error = nvml.init()
    if init_error is not None:
        return Topology(smi_cells=cells, smi_reason=reason, reason=f"NVML unavailable: {init_error}")
    if indices is None:
        try:
            count = nvml.call("nvmlDeviceGetCount")
        except NvmlCallError as e:
            return Topology(smi_cells=cells, smi_reason=reason, reason=e.reason)
        indices = tuple(range(int(count)))
    probed = [probe_gpu_links(nvml, i, speeds) for i in indices]
    handles = {i: h for i, (_, h) in zip(indices, probed, strict=True)}
    pairs = []
    for n, a in enumerate(indices):
        for b in indices[n + 1:]:
            try:
                pairs.append(probe_pair(nvml, a, b, handles[a], handles[b]))
            except Exception as e:  # noqa: BLE001 - one odd pair must not hide the others
                why = f"envcheck could not read this pair ({type(e).__name__}: {e})"
                pairs.append(GpuPair(a, b, missing(why), {k: missing(why) for k in P2P_CAPS}))
    keep = set(indices)
    cells = tuple(c for c in cells if c.a in keep and c.b in keep)
    return Topology(tuple(g for g, _ in probed), tuple(pairs), cells, reason)
