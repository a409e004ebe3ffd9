"""Link bandwidth a node's topology allows: how two GPUs reach each other (NVLink, NVSwitch, PCIe), the payload
bandwidth per direction the defining documents give (never NVML's higher signalling rate: docs/node.md), and
copies (host <-> GPU, GPU <-> GPU) against it: the reference for every "% of links".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envcheck.analysis.peaks import A100_DS_80, BLACKWELL_DS, H200_DS, V100_DS, Doc
from envcheck.model.node import Copy, GpuLinks, NvLink, PeerCopies, Topology

PCIE_BASE_SPEC = Doc("PCI-SIG: PCI Express Base Specification (Revisions 3.0 to 6.0)",
                     "https://pcisig.com/specifications")
PCIE6_FAQ = Doc("PCI-SIG: PCIe 6.0 Specification FAQ (FLIT mode)", "https://pcisig.com/faq")


@dataclass(frozen=True)
class NvlinkSpec:
    """One NVLink generation: what one link carries per direction (GB/s), and the document's figure."""

    generation: int
    link_gbps: float
    doc: Doc
    quote: str


@dataclass(frozen=True)
class PcieSpec:
    """One PCIe generation: transfer rate per lane (GT/s) and the share of it that is payload."""

    generation: int
    gtps: float
    encoding: tuple[int, int]  # payload bits (bytes in FLIT mode) out of the line's
    doc: Doc

    @property
    def lane_gbps(self) -> float:
        """GB/s per lane per direction after the line code."""
        return self.gtps * self.encoding[0] / self.encoding[1] / 8


NVLINK = {
    2: NvlinkSpec(2, 25.0, V100_DS, "V100 SXM2: NVLink 300 GB/s over 6 links, both directions"),
    3: NvlinkSpec(3, 25.0, A100_DS_80, "A100 SXM: NVLink 600 GB/s over 12 links, both directions"),
    4: NvlinkSpec(4, 25.0, H200_DS, "H100/H200 SXM: NVLink 900 GB/s over 18 links, both directions"),
    5: NvlinkSpec(5, 50.0, BLACKWELL_DS, "HGX B200: NVLink 1.8 TB/s per GPU over 18 links, both directions"),
}
# nvmlNvlinkVersion_t -> NVLink generation
NVML_NVLINK_VERSION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5}

PCIE = {
    1: PcieSpec(1, 2.5, (8, 10), PCIE_BASE_SPEC),
    2: PcieSpec(2, 5.0, (8, 10), PCIE_BASE_SPEC),
    3: PcieSpec(3, 8.0, (128, 130), PCIE_BASE_SPEC),
    4: PcieSpec(4, 16.0, (128, 130), PCIE_BASE_SPEC),
    5: PcieSpec(5, 32.0, (128, 130), PCIE_BASE_SPEC),
    6: PcieSpec(6, 64.0, (242, 256), PCIE6_FAQ),
}


def pcie_gbps(gen: int, width: int) -> float | None:
    """What a PCIe link carries per direction, GB/s: lanes x GT/s x line code / 8 (None when unknown)."""
    spec = PCIE.get(gen)
    return spec.lane_gbps * width if spec is not None and width > 0 else None


@dataclass(frozen=True)
class PairPath:
    """How two GPUs reach each other (``nvlink``, ``nvswitch``, ``pcie``) and the bandwidth per direction that
    allows (usable links x datasheet rate, or the slower PCIe link); ``reference``: ``datasheet``, or
    ``nvml_signalling`` where NVML names no generation."""

    a: int
    b: int
    via: str
    nvlinks: int
    link_gbps: float | None
    expected_gbps: float | None
    pcie_level: str | None
    source: str
    generation: int | None = None
    reference: str | None = None
    signalling_gbps: float | None = None


def _active(g: GpuLinks) -> list[NvLink]:
    return [lk for lk in g.nvlinks if lk.active]


def _nvlink_rate(links: Sequence[NvLink]) -> tuple[float | None, int | None, str | None, float | None]:
    """(payload GB/s per link per direction, generation, reference, NVML's signalling GB/s) of a bonded set
    of links: the datasheet of its (oldest) generation when NVML names one, else NVML's signalling rate."""
    signalling = _link_speed_gbps(links)
    gens = [NVML_NVLINK_VERSION[v] for lk in links
            if lk.version.ok and isinstance(v := lk.version.value, int) and v in NVML_NVLINK_VERSION]
    spec = NVLINK.get(min(gens)) if gens else None
    if spec is not None:
        return spec.link_gbps, spec.generation, "datasheet", signalling
    if signalling is not None:
        return signalling, None, "nvml_signalling", signalling
    return None, None, None, None


def _link_speed_gbps(links: Iterable[NvLink]) -> float | None:
    speeds = [lk.speed_mbps.value for lk in links if lk.speed_mbps.ok]
    # MB/s -> GB/s; a bonded set runs at its slowest link
    return min(speeds) / 1000 if speeds else None


@dataclass(frozen=True)
class GpuNvlinks:
    """One GPU's NVLinks: ``active`` of ``total``, and the active set's slowest speed per link."""

    gpu: int
    active: int
    total: int
    per_link_gbps: float | None


def gpu_nvlinks(g: GpuLinks) -> GpuNvlinks:
    active = _active(g)
    total = g.nvlink_count.value if g.nvlink_count.ok else len(g.nvlinks)
    return GpuNvlinks(g.index, len(active), total, _link_speed_gbps(active))


def _gpu_pcie_gbps(g: GpuLinks) -> float | None:
    gen = g.pcie_gen_max.value if g.pcie_gen_max.ok else g.pcie_gen.value
    width = g.pcie_width_max.value if g.pcie_width_max.ok else g.pcie_width.value
    if not isinstance(gen, int) or not isinstance(width, int):
        return None
    return pcie_gbps(gen, width)


def pair_path(topology: Topology, a: int, b: int) -> PairPath | None:
    """How GPUs ``a`` and ``b`` connect, from NVML's answers alone (no per-model table)."""
    ga = next((g for g in topology.gpus if g.index == a), None)
    gb = next((g for g in topology.gpus if g.index == b), None)
    if ga is None or gb is None:
        return None
    pair = next((p for p in topology.pairs if {p.a, p.b} == {a, b}), None)
    level = pair.pcie_level.value if pair is not None and pair.pcie_level.ok else None

    def links_to(src: GpuLinks, dst: GpuLinks) -> list[NvLink]:
        bus = str(dst.pci_bus_id.value) if dst.pci_bus_id.ok else None
        return [lk for lk in _active(src) if bus and lk.remote_pci_bus_id.ok
                and _same_bus(str(lk.remote_pci_bus_id.value), bus)]

    # NVML may answer the remote end only from one side (or the binding may lack it on one GPU).
    direct = links_to(ga, gb) or links_to(gb, ga)
    if direct:
        speed, gen, ref, signalling = _nvlink_rate(direct)
        expected = speed * len(direct) if speed is not None else None
        return PairPath(a, b, "nvlink", len(direct), speed, expected, level, "nvlink_links", gen, ref, signalling)
    sw_a = [lk for lk in _active(ga) if lk.remote_type.value == "switch"]
    sw_b = [lk for lk in _active(gb) if lk.remote_type.value == "switch"]
    if sw_a and sw_b:
        n = min(len(sw_a), len(sw_b))
        speed, gen, ref, signalling = _nvlink_rate(sw_a + sw_b)
        return PairPath(a, b, "nvswitch", n, speed, speed * n if speed is not None else None, level,
                        "nvswitch_links", gen, ref, signalling)
    pa, pb = _gpu_pcie_gbps(ga), _gpu_pcie_gbps(gb)
    expected = min(pa, pb) if pa is not None and pb is not None else None
    return PairPath(a, b, "pcie", 0, None, expected, level, "pcie_link")


# Where a pair's expected bandwidth comes from (PairPath.source).
PATH_SOURCES = ("nvlink_links", "nvswitch_links", "pcie_link")
# ``nvidia-smi topo -m``'s names for NVML's PCIe levels (PCIE_LEVELS), so the matrix reads like its output.
SMI_LEVEL_NAMES = {"internal": "X", "single": "PIX", "multiple": "PXB", "hostbridge": "PHB", "node": "NODE",
                   "system": "SYS"}


def topo_label(p: PairPath) -> str:
    """The pair as ``nvidia-smi topo -m`` prints it: ``NV18`` for bonded NVLinks, else ``SYS``, ``PHB``..."""
    return f"NV{p.nvlinks}" if p.nvlinks else SMI_LEVEL_NAMES.get(p.pcie_level or "", "?")


def _same_bus(x: str, y: str) -> bool:
    """Bus ids compare without NVML's 8- vs 4-digit domain prefix (00000000:00:06.0 vs 0000:00:06.0)."""
    def norm(s: str) -> str:
        parts = s.lower().split(":")
        if len(parts) == 3:
            parts[0] = parts[0][-4:].rjust(4, "0")
        return ":".join(parts)
    return norm(x) == norm(y)


def pair_paths(topology: Topology) -> tuple[PairPath, ...]:
    idx = sorted(g.index for g in topology.gpus)
    paths = (pair_path(topology, a, b) for i, a in enumerate(idx) for b in idx[i + 1:])
    return tuple(p for p in paths if p is not None)


def smi_disagreements(topology: Topology) -> tuple[tuple[int, int, str, str], ...]:
    """(a, b, what NVML implies, what ``nvidia-smi topo -m`` printed) where they differ on the NVLink count:
    both read the same driver, so a difference means envcheck misread one of them."""
    out = []
    for cell in topology.smi_cells:
        if cell.a >= cell.b:
            continue
        p = pair_path(topology, cell.a, cell.b)
        if p is None:
            continue
        printed = cell.text.strip().upper()
        if printed.startswith("NV"):
            try:
                n_smi = int(printed[2:])
            except ValueError:
                continue
            if p.nvlinks != n_smi:
                out.append((cell.a, cell.b, f"NV{p.nvlinks}" if p.nvlinks else p.via, cell.text))
        elif p.nvlinks:
            out.append((cell.a, cell.b, f"NV{p.nvlinks}", cell.text))
    return tuple(out)


@dataclass(frozen=True)
class CopyRow:
    """One copy's bandwidth (over the median time) against what the link allows in the same directions."""

    kind: str
    method: str
    src: int | None
    dst: int | None
    directions: int
    gbps: float | None
    expected_gbps: float | None
    pct_expected: float | None
    wrong: int | None
    error: str | None
    via: str | None = None


def copy_row(c: Copy, topology: Topology | None) -> CopyRow:
    directions = 2 if c.bidirectional else 1
    gbps = None
    if c.timing is not None and len(c.timing.samples_us):
        t = c.timing.median_us
        gbps = c.bytes_per_direction * directions / (t * 1e-6) / 1e9 if t > 0 else None
    expected = via = None
    if topology is not None:
        if c.kind == "d2d" and c.src is not None and c.dst is not None:
            p = pair_path(topology, c.src, c.dst)
            if p is not None:
                via = p.via
                expected = p.expected_gbps * directions if p.expected_gbps is not None else None
        else:
            # Host <-> GPU at the link's max generation and width (idle GPUs lower the current ones).
            g = next((x for x in topology.gpus if x.index == (c.dst if c.kind == "h2d" else c.src)), None)
            one = _gpu_pcie_gbps(g) if g is not None else None
            via = "pcie"
            expected = one * directions if one is not None else None
    pct = 100 * gbps / expected if gbps is not None and expected else None
    return CopyRow(c.kind, c.method, c.src, c.dst, directions, gbps, expected, pct, c.wrong, c.error, via)


def copy_rows(peer: PeerCopies, topology: Topology | None) -> tuple[CopyRow, ...]:
    return tuple(copy_row(c, topology) for c in peer.copies)
