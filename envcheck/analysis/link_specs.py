"""What a link between GPUs (NVLink) or between a GPU and its host (PCIe) carries, per direction,
from the documents that define it: the reference for every "% of links".

**NVLink.** Datasheets quote the total over both directions and all links (H100 SXM: 900 GB/s over 18 links):
25 GB/s per link and direction for NVLink 2-4, 50 for NVLink 5. NVML's higher *signalling* rate is the line rate
before framing: shown beside the reference, never used as one. NVML's ``nvmlNvlinkVersion_t`` (nvml.h) names the
generation (6 = NVLink 4).

**PCIe.** Per lane and direction: the generation's GT/s times its line code (8b/10b for Gen 1-2, 128b/130b for
Gen 3-5, FLIT 242/256 for Gen 6); Gen5 x16 is 63.0 GB/s. Packet headers come on top: a copy reaches ~85-90%.
"""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.analysis.peaks import A100_DS_80, BLACKWELL_DS, H100_PAGE, H200_DS, V100_DS, Doc

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
# The H100's own page quotes the same 900 GB/s as the H200 datasheet.
NVLINK4_ALSO = H100_PAGE

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


def nvlink_generation(nvml_version: object) -> int | None:
    """The NVLink generation for NVML's version value (None when unknown)."""
    return NVML_NVLINK_VERSION.get(nvml_version) if isinstance(nvml_version, int) else None


def pcie_gbps(gen: int, width: int) -> float | None:
    """What a PCIe link carries per direction, GB/s: lanes x GT/s x line code / 8 (None when unknown)."""
    spec = PCIE.get(gen)
    if spec is None or width <= 0:
        return None
    return spec.lane_gbps * width
