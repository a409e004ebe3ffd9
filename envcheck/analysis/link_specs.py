"""What a link between GPUs (NVLink) or between a GPU and its host (PCIe) carries, per direction,
from the documents that define it: the reference for every "% of links".

**NVLink.** The datasheets quote an NVLink generation's bandwidth as the total over both directions
and all links of a GPU (H100/H200 SXM: "NVLink: 900GB/s" over 18 links). Per link and direction
that is 25 GB/s for NVLink 2, 3 and 4 and 50 GB/s for NVLink 5. NVML reports a higher per-link
*signalling* rate (``nvmlDeviceGetFieldValues(NVML_FI_DEV_NVLINK_SPEED_MBPS_*)``, ``nvidia-smi nvlink
-s``: 26.562 GB/s on an H200, 25.781 on an A100): the line rate before the link's own framing. It is
kept as a fact beside the reference, never used as one (a copy or a collective can never reach it).

NVML names the generation through ``nvmlDeviceGetNvLinkVersion``, whose values are the enum
``nvmlNvlinkVersion_t`` (nvml.h): 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0; an
H200 answers 6 (NVLink 4).

**PCIe.** Per lane: the transfer rate (GT/s) of the generation times its line code, per direction:
8b/10b for Gen 1-2, 128b/130b for Gen 3-5, and for Gen 6 FLIT mode, where 242 of every 256 bytes are
TLP and DLLP payload (the rest FEC and CRC). Gen5 x16: 32 x 16 x 128/130 / 8 = 63.0 GB/s. Packet
headers come on top of the line code, so a copy reaches about 85-90% of it at best.
"""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.analysis.peaks import A100_DS_80, BLACKWELL_DS, H100_PAGE, H200_DS, V100_DS, Doc

PCIE_BASE_SPEC = Doc("PCI-SIG: PCI Express Base Specification (Revisions 3.0 to 6.0)",
                     "https://pcisig.com/specifications")
PCIE6_FAQ = Doc("PCI-SIG: PCIe 6.0 Specification FAQ (FLIT mode)", "https://pcisig.com/faq")


@dataclass(frozen=True)
class NvlinkSpec:
    """One NVLink generation: what one link carries per direction (GB/s), and where that comes from
    (``doc`` and ``quote``: the document's own figure the per-link rate is divided from)."""

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
