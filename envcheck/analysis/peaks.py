"""Theoretical compute peaks (dense TFLOP/s, fp32 accumulation) for any NVIDIA GPU, each with its source: a
datasheet row (``SPECS``), else derived from the architecture (SMs x clock x per-SM rate, with the GeForce
half-rate rule and the tensor clock of Hopper and Blackwell), else a ``Missing`` with its reason. The rules and
how far each row was checked: docs/measurement.md ("Compute peaks").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from envcheck.ops import PRECISIONS

TENSOR_PRECISIONS = tuple(p for p in PRECISIONS if p != "fp32")


@dataclass(frozen=True)
class Doc:
    """A published document: its title as published and where it is."""

    title: str
    url: str


@dataclass(frozen=True)
class Source:
    """Where a number came from: a kind (a catalogue key's suffix) plus parameters to phrase it."""

    kind: str  # datasheet | datasheet_computed | datasheet_computed_up_to | datasheet_scaled | derived | derived_geforce | derived_tensor_clock
    params: Mapping[str, str | int | float]
    verified: bool = True  # False: a datasheet figure not re-read in its document, or a per-SM rate inferred


@dataclass(frozen=True)
class Peak:
    precision: str  # fp32 | tf32 | fp16 | bf16
    tflops: float  # dense, fp32 accumulation
    source: Source


@dataclass(frozen=True)
class Missing:
    """No peak for ``precision``, and why: a catalogue key plus its parameters."""

    precision: str
    key: str
    params: Mapping[str, str | int | float]


@dataclass(frozen=True)
class Arch:
    """One compute capability: its name and dense FLOP per clock per SM at full rate."""

    name: str  # as nvidia-smi -q prints "Product Architecture"
    per_sm: Mapping[str, int] = field(default_factory=dict)  # empty: name known, rates not
    doc: Doc | None = None
    geforce_halves: bool = False  # GeForce parts run tensor ops with fp32 accumulate at half rate
    tensor_clock_ref: str | None = None  # key of the row whose datasheet fixes tensor clock / boost clock
    verified: bool = True


# Where a row's clock comes from: printed; up_to: the top of a laptop's boost range; nvml: NVML's max SM clock;
# implied: by the fp32 figure; assumed: taken from another part (the row says which).
CLOCK_BASES = ("printed", "up_to", "nvml", "implied", "assumed")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model as NVIDIA documents it (dense TFLOP/s, GB/s)."""

    key: str
    label: str  # product name as NVIDIA prints it
    cc: str
    pattern: str  # regex, full match against the normalised NVML name (``normalise``)
    sm_count: int
    clock_mhz: int  # the clock the fp32 figure is quoted at
    clock_basis: str  # one of CLOCK_BASES
    bandwidth_gbps: float | None
    doc: Doc
    tflops: Mapping[str, float] = field(default_factory=dict)  # printed figures; empty: computed from SMs x clock
    tensor_clock_mhz: int | None = None  # the lower clock the printed tensor figures imply (Hopper, Blackwell)
    half_rate: bool | None = None  # tensor rate class when the name does not tell it (L40, T4); None: the GeForce rule
    capped: bool = False  # tensor rates capped by firmware below SMs x clock x rate (export-control parts)
    verified: bool = True
    evidence: Doc | None = None  # when not verified: the secondary page the figures were checked against

    def matches(self, name: str) -> bool:
        return re.fullmatch(self.pattern, normalise(name)) is not None  # re caches the compiled pattern


def normalise(name: str) -> str:
    """Lower case, ``-``/``_`` as spaces, without the vendor words drivers differ on ("Tesla V100-SXM2-16GB" ->
    "v100 sxm2 16gb")."""
    tokens = re.sub(r"[-_]", " ", name.lower()).split()
    while tokens and tokens[0] in ("nvidia", "tesla"):
        tokens.pop(0)
    return " ".join(tokens)


# --- Documents -------------------------------------------------------------------------------

_NV = "https://www.nvidia.com"
VOLTA_WP = Doc("NVIDIA Tesla V100 GPU Architecture (whitepaper)",
               "https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-whitepaper.pdf")
TURING_WP = Doc("NVIDIA Turing GPU Architecture (whitepaper)",
                "https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/"
                "turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf")
A100_WP = Doc("NVIDIA A100 Tensor Core GPU Architecture (whitepaper)",
              "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf")
GA102_WP = Doc("NVIDIA Ampere GA102 GPU Architecture (whitepaper)",
               f"{_NV}/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf")
ORIN_BRIEF = Doc("NVIDIA Jetson AGX Orin Series Technical Brief",
                 f"{_NV}/content/dam/en-zz/Solutions/gtcf21/jetson-orin/nvidia-jetson-agx-orin-technical-brief.pdf")
ADA_WP = Doc("NVIDIA Ada GPU Architecture (whitepaper)",
             "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf")
H100_WP = Doc("NVIDIA H100 Tensor Core GPU Architecture (whitepaper V1.04)",
              "https://nvdam.widen.net/s/95bdhpsgrs/nvidia_h100_tensor_core_gpu_architecture_whitepaper_v1.03")
BLACKWELL_DS = Doc("NVIDIA Blackwell datasheet (HGX B200)",
                   "https://resources.nvidia.com/en-us-blackwell-architecture/datasheet")
RTX_BLACKWELL_WP = Doc("NVIDIA RTX Blackwell GPU Architecture (whitepaper)",
                       "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/"
                       "nvidia-rtx-blackwell-gpu-architecture.pdf")
V100_DS = Doc("NVIDIA Tesla V100 datasheet",
              "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf")
T4_DS = Doc("NVIDIA T4 Tensor Core GPU datasheet",
            f"{_NV}/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf")
A100_DS_40 = Doc("NVIDIA A100 Tensor Core GPU datasheet (40GB)",
                 f"{_NV}/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
A100_DS_80 = Doc("NVIDIA A100 Tensor Core GPU datasheet (80GB)",
                 f"{_NV}/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-nvidia-us-2188504-web.pdf")
A800_DS = Doc("NVIDIA A800 Tensor Core GPU datasheet (zh-CN)",
              "https://deepbaytech.com/images/nvidia-a800-datasheet-nvidia-a4-2521686-zhCN.pdf")
A10_DS = Doc("NVIDIA A10 Tensor Core GPU datasheet",
             f"{_NV}/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf")
A40_DS = Doc("NVIDIA A40 datasheet", "https://images.nvidia.com/content/Solutions/data-center/a40/nvidia-a40-datasheet.pdf")
L4_PAGE = Doc("NVIDIA L4 Tensor Core GPU (product page)", f"{_NV}/en-us/data-center/l4/")
L40_DS = Doc("NVIDIA L40 GPU datasheet", "https://images.nvidia.com/content/Solutions/data-center/vgpu-L40-datasheet.pdf")
L40S_DS = Doc("NVIDIA L40S datasheet", "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413")
H100_PAGE = Doc("NVIDIA H100 Tensor Core GPU (product page)", f"{_NV}/en-us/data-center/h100/")
H200_DS = Doc("NVIDIA H200 Tensor Core GPU datasheet",
              "https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446")
# NVIDIA publishes no H20 datasheet; a reseller's specification page is the nearest document.
H20_PAGE = Doc("NVIDIA HGX H20 (reseller specification page)", "https://viperatech.com/shop/nvidia-hgx-h20/")
RTX3060_PAGE = Doc("GeForce RTX 3060 Family (product page)",
                   f"{_NV}/en-us/geforce/graphics-cards/30-series/rtx-3060-3060ti/")
RTX30_LAPTOPS = Doc("GeForce RTX 30 Series Laptops (product page)", f"{_NV}/en-us/geforce/laptops/30-series/")
RTX4060_PAGE = Doc("GeForce RTX 4060 Family (product page)",
                   f"{_NV}/en-us/geforce/graphics-cards/40-series/rtx-4060-4060ti/")
RTX4070_PAGE = Doc("GeForce RTX 4070 Family (product page)",
                   f"{_NV}/en-us/geforce/graphics-cards/40-series/rtx-4070-family/")
LAPTOPS_COMPARE = Doc("Compare GeForce Gaming Laptops (product page)", f"{_NV}/de-de/geforce/gaming-laptops/compare/")

# Secondary pages that unverified rows were checked against.
LIGHTNING = Doc("Lightning throughput.py, _CUDA_FLOPS (transcribes NVIDIA datasheets)",
                "https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/fabric/utilities/throughput.py")
HMC_A800 = Doc("hmc-tech: NVIDIA A800 vs NVIDIA T40", "https://hmc-tech.com/gpu/nvidia-a800-vs-nvidia-t40")
FUDZILLA_RTX30 = Doc("Fudzilla: Nvidia RTX 30 series specifications are now official",
                     "https://fudzilla.net/news/graphics/51457-nvidia-rtx-30-series-specifications-are-now-official")
HWDB_3060 = Doc("hardwaredb: NVIDIA GeForce RTX 3060", "https://www.hardwaredb.net/geforce-rtx-3060-benchmark")
HWDB_3060_LAPTOP = Doc("hardwaredb: NVIDIA GeForce RTX 3060 Laptop",
                       "https://www.hardwaredb.net/geforce-rtx-3060-laptop-benchmark")
WCCF_RTX30_MOBILE = Doc("Wccftech: NVIDIA unveils GeForce RTX 30 mobility GPUs",
                        "https://wccftech.com/nvidia-unveils-geforce-rtx-30-mobility-gpus-geforce-rtx-3080-16-gb-"
                        "rtx-3070-8-gb-rtx-3060-6-gb/")
HOLYNERD_4080 = Doc("Nvidia GeForce RTX 4080 Specifications",
                    "https://www.holynerdvana.com/2022/10/nvidia-geforce-rtx-4080-specifications.html")
FPSBENCH_4060 = Doc("fpsbench: NVIDIA GeForce RTX 4060 vs NVIDIA T600",
                    "https://fpsbench.com/compare/gpu/nvidia-geforce-rtx-4060-vs-nvidia-t600")
AIHPC_H200 = Doc("8x H200 GPU: Training & Inference Deep Dive",
                 "https://ai-hpc.github.io/ai-hardware-engineer-roadmap/Phase%205%20-%20Advanced%20Topics%20and%20"
                 "Specialization/1.%20GPU%20Infrastructure/Nvidia%20GPU/HPC%20Setup/8x-H200-Training-Inference")
H20_REPORT = Doc("NVIDIA H20 vs H100 (78 SMs per Geekbench 6; dense rates)",
                 "https://zangshuxian.com/new/674733024499207168")


# --- Architectures: dense FLOP/clock/SM (an FMA counts 2) at the full data-centre rate, tensor cores with fp32
# accumulation; each reproduces its whitepaper's figures in SPECS (tests/test_peaks.py).
_VOLTA = MappingProxyType({"fp32": 128, "fp16": 1024})  # 64 FP32 cores, 8 tensor cores x 64 FMA
_AMPERE_GA10X = MappingProxyType({"fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024})
ARCHS: Mapping[str, Arch] = MappingProxyType({
    "5.0": Arch("Maxwell"), "5.2": Arch("Maxwell"), "5.3": Arch("Maxwell"),
    "6.0": Arch("Pascal"), "6.1": Arch("Pascal"), "6.2": Arch("Pascal"),
    "7.0": Arch("Volta", _VOLTA, VOLTA_WP),
    "7.2": Arch("Volta"),  # Xavier: no datasheet figures here to check a rate against
    # Turing has Volta's per-SM tensor rate; GeForce RTX 20 halves it with fp32 accumulate.
    "7.5": Arch("Turing", _VOLTA, TURING_WP, geforce_halves=True),
    "8.0": Arch("Ampere", {"fp32": 128, "tf32": 1024, "fp16": 2048, "bf16": 2048}, A100_WP),
    "8.6": Arch("Ampere", _AMPERE_GA10X, GA102_WP, geforce_halves=True),
    # Orin: fp32 from 5.3 TFLOP/s = 16 SMs x 1.3 GHz x 256; tensor rates assume A100's INT8:FP16 ratio.
    "8.7": Arch("Ampere", {"fp32": 256, "tf32": 1024, "fp16": 2048, "bf16": 2048}, ORIN_BRIEF, verified=False),
    "8.9": Arch("Ada Lovelace", _AMPERE_GA10X, ADA_WP, geforce_halves=True),
    "9.0": Arch("Hopper", {"fp32": 256, "tf32": 2048, "fp16": 4096, "bf16": 4096}, H100_WP,
                tensor_clock_ref="h100_sxm"),
    # B200's per-SM rates are implied by its datasheet (2.25 PFLOP/s bf16 over 148 SMs at 1.86 GHz).
    "10.0": Arch("Blackwell", {"fp32": 256, "tf32": 4096, "fp16": 8192, "bf16": 8192}, BLACKWELL_DS,
                 tensor_clock_ref="b200", verified=False),
    "10.3": Arch("Blackwell"), "11.0": Arch("Blackwell"), "12.1": Arch("Blackwell"),
    "12.0": Arch("Blackwell", _AMPERE_GA10X, RTX_BLACKWELL_WP, geforce_halves=True),
})
ARCH_NAMES: Mapping[str, str] = MappingProxyType({cc: arch.name for cc, arch in ARCHS.items()})


def arch_name(cc: str | None) -> str | None:
    """The architecture of ``cc``; an unlisted minor gets its major's name when all listed minors share it."""
    if not cc:
        return None
    if cc in ARCH_NAMES:
        return ARCH_NAMES[cc]
    names = {name for known, name in ARCH_NAMES.items() if known.split(".")[0] == cc.split(".")[0]}
    return names.pop() if len(names) == 1 else None


# --- The datasheet table ---------------------------------------------------------------------
# Dense figures: NVIDIA's "with sparsity" figures halved. Tensor figures are fp32-accumulate.

def _dc(fp32: float, tf32: float, half: float) -> dict[str, float]:
    """fp16 and bf16 share one figure on every part here."""
    return {"fp32": fp32, "tf32": tf32, "fp16": half, "bf16": half}


SPECS: tuple[GpuSpec, ...] = (
    # Volta: tensor cores take fp16 only.
    GpuSpec("v100_sxm2", "Tesla V100 SXM2", "7.0", r"v100 sxm2 (16|32)gb", 80, 1530, "printed", 900.0,
            A100_WP, {"fp32": 15.7, "fp16": 125.0}),
    GpuSpec("v100_pcie", "Tesla V100 PCIe", "7.0", r"v100 pcie (16|32)gb", 80, 1380, "printed", 900.0,
            V100_DS, {"fp32": 14.0, "fp16": 112.0}, verified=False, evidence=LIGHTNING),
    GpuSpec("v100s_pcie", "Tesla V100S PCIe", "7.0", r"v100s pcie 32gb", 80, 1601, "printed", 1134.0,
            V100_DS, {"fp32": 16.4, "fp16": 130.0}, verified=False, evidence=LIGHTNING),
    # Turing. The T4 datasheet's "Mixed-Precision (FP16/FP32) 65 TFLOPS" is fp32 accumulate.
    GpuSpec("t4", "T4", "7.5", r"t4", 40, 1590, "printed", 300.0, T4_DS, {"fp32": 8.1, "fp16": 65.0},
            half_rate=False),
    # Ampere GA100. Compute is the same on every A100/A800; memory differs by SKU.
    GpuSpec("a100_sxm4_40gb", "A100 SXM4 40GB", "8.0", r"a100 sxm4 40gb", 108, 1410, "printed", 1555.0,
            A100_DS_40, _dc(19.5, 156.0, 312.0)),
    GpuSpec("a100_sxm4_80gb", "A100 SXM4 80GB", "8.0", r"a100 sxm4 80gb", 108, 1410, "printed", 2039.0,
            A100_DS_80, _dc(19.5, 156.0, 312.0)),
    GpuSpec("a100_pcie_40gb", "A100 PCIe 40GB", "8.0", r"a100 pcie 40gb", 108, 1410, "printed", 1555.0,
            A100_DS_40, _dc(19.5, 156.0, 312.0)),
    GpuSpec("a100_pcie_80gb", "A100 PCIe 80GB", "8.0", r"a100 (80gb pcie|pcie 80gb)", 108, 1410, "printed", 1935.0,
            A100_DS_80, _dc(19.5, 156.0, 312.0)),
    GpuSpec("a800_pcie_80gb", "A800 PCIe 80GB", "8.0", r"a800 (80gb pcie|pcie 80gb)", 108, 1410, "printed", 1935.0,
            A800_DS, _dc(19.5, 156.0, 312.0), verified=False, evidence=HMC_A800),
    GpuSpec("a800_sxm4_80gb", "A800 SXM4 80GB", "8.0", r"a800 sxm4 80gb", 108, 1410, "printed", 2039.0,
            A800_DS, _dc(19.5, 156.0, 312.0), verified=False, evidence=HMC_A800),
    # Ampere GA10x, data centre: full tensor rate.
    GpuSpec("a10", "A10", "8.6", r"a10", 72, 1695, "printed", 600.0, A10_DS, _dc(31.2, 62.5, 125.0),
            verified=False, evidence=LIGHTNING),
    GpuSpec("a40", "A40", "8.6", r"a40", 84, 1740, "printed", 696.0, A40_DS, _dc(37.4, 74.8, 149.7)),
    # Ampere GA10x, GeForce desktop: half tensor rate (GA102 whitepaper, Appendix A).
    # One NVML name covers the 12GB (360 GB/s) and 8GB (240 GB/s) RTX 3060: no bandwidth.
    GpuSpec("rtx_3060", "GeForce RTX 3060", "8.6", r"geforce rtx 3060", 28, 1777, "printed", None,
            RTX3060_PAGE, verified=False, evidence=HWDB_3060),
    GpuSpec("rtx_3070", "GeForce RTX 3070", "8.6", r"geforce rtx 3070", 46, 1725, "printed", 448.0,
            GA102_WP, _dc(20.3, 20.3, 40.6), verified=False, evidence=FUDZILLA_RTX30),
    # One NVML name covers the 10GB (68 SMs, 760 GB/s) and 12GB (70 SMs, 912 GB/s) RTX 3080.
    GpuSpec("rtx_3080", "GeForce RTX 3080", "8.6", r"geforce rtx 3080", 68, 1710, "printed", None,
            GA102_WP, _dc(29.8, 29.8, 59.5), verified=False, evidence=FUDZILLA_RTX30),
    GpuSpec("rtx_3090", "GeForce RTX 3090", "8.6", r"geforce rtx 3090", 82, 1695, "printed", 936.0,
            GA102_WP, _dc(35.6, 35.6, 71.0)),
    # Laptops: memory speed is the maker's choice, so no bandwidth.
    GpuSpec("rtx_3060_laptop", "GeForce RTX 3060 Laptop GPU", "8.6", r"geforce rtx 3060 laptop gpu", 30, 1703,
            "up_to", None, RTX30_LAPTOPS, verified=False, evidence=HWDB_3060_LAPTOP),
    GpuSpec("rtx_3070_laptop", "GeForce RTX 3070 Laptop GPU", "8.6", r"geforce rtx 3070 laptop gpu", 40, 1620,
            "up_to", None, RTX30_LAPTOPS, verified=False, evidence=WCCF_RTX30_MOBILE),
    GpuSpec("rtx_3080_laptop", "GeForce RTX 3080 Laptop GPU", "8.6", r"geforce rtx 3080 laptop gpu", 48, 1710,
            "up_to", None, RTX30_LAPTOPS, verified=False, evidence=WCCF_RTX30_MOBILE),
    # Ada, data centre. L4 and L40S run tensor ops at the full rate; L40 at half, like GeForce.
    GpuSpec("l4", "L4", "8.9", r"l4", 58, 2040, "printed", 300.0, L4_PAGE, _dc(30.3, 60.0, 121.0)),
    GpuSpec("l40", "L40", "8.9", r"l40", 142, 2490, "printed", 864.0, L40_DS, _dc(90.5, 90.5, 181.05),
            half_rate=True),
    GpuSpec("l40s", "L40S", "8.9", r"l40s", 142, 2520, "printed", 864.0, L40S_DS, _dc(91.6, 183.0, 362.05)),
    # Ada, GeForce.
    GpuSpec("rtx_4060", "GeForce RTX 4060", "8.9", r"geforce rtx 4060", 24, 2460, "printed", 272.0,
            RTX4060_PAGE, verified=False, evidence=FPSBENCH_4060),
    # One NVML name covers the GDDR6X (504 GB/s) and later GDDR6 (480 GB/s) RTX 4070: no bandwidth.
    GpuSpec("rtx_4070", "GeForce RTX 4070", "8.9", r"geforce rtx 4070", 46, 2475, "printed", None,
            RTX4070_PAGE, verified=False),
    GpuSpec("rtx_4080", "GeForce RTX 4080", "8.9", r"geforce rtx 4080", 76, 2505, "printed", 716.8,
            ADA_WP, _dc(48.7, 48.7, 97.5), verified=False, evidence=HOLYNERD_4080),
    GpuSpec("rtx_4090", "GeForce RTX 4090", "8.9", r"geforce rtx 4090", 128, 2520, "printed", 1008.0,
            ADA_WP, _dc(82.6, 82.6, 165.2)),
    GpuSpec("rtx_4060_laptop", "GeForce RTX 4060 Laptop GPU", "8.9", r"geforce rtx 4060 laptop gpu", 24, 2370,
            "up_to", None, LAPTOPS_COMPARE),
    GpuSpec("rtx_4070_laptop", "GeForce RTX 4070 Laptop GPU", "8.9", r"geforce rtx 4070 laptop gpu", 36, 2175,
            "up_to", None, LAPTOPS_COMPARE),
    GpuSpec("rtx_4080_laptop", "GeForce RTX 4080 Laptop GPU", "8.9", r"geforce rtx 4080 laptop gpu", 58, 2280,
            "up_to", None, LAPTOPS_COMPARE),
    GpuSpec("rtx_4090_laptop", "GeForce RTX 4090 Laptop GPU", "8.9", r"geforce rtx 4090 laptop gpu", 76, 2040,
            "up_to", None, LAPTOPS_COMPARE),
    # Hopper: no printed clock; 1980/1755 are NVML's max SM clocks, the tensor clocks implied by the figures.
    GpuSpec("h100_sxm", "H100 SXM5", "9.0", r"h100 (80gb hbm3|sxm5 80gb)", 132, 1980, "nvml", 3350.0,
            H100_WP, _dc(66.9, 494.7, 989.4), tensor_clock_mhz=1830),
    GpuSpec("h100_pcie", "H100 PCIe", "9.0", r"h100 pcie", 114, 1755, "nvml", 2000.0,
            H100_WP, _dc(51.2, 378.0, 756.0), tensor_clock_mhz=1620),
    # NVL boards run far below the SXM tensor clock (1545 of 1776 MHz): their own rows, not the ratio.
    GpuSpec("h100_nvl", "H100 NVL", "9.0", r"h100 ?nvl", 132, 1776, "implied", 3900.0,
            H100_PAGE, _dc(60.0, 417.5, 835.5), tensor_clock_mhz=1545),
    GpuSpec("h200", "H200 SXM", "9.0", r"h200", 132, 1980, "nvml", 4800.0,
            H200_DS, _dc(67.0, 494.5, 989.5), tensor_clock_mhz=1830, verified=False, evidence=AIHPC_H200),
    GpuSpec("h200_nvl", "H200 NVL", "9.0", r"h200 ?nvl", 132, 1785, "nvml", 4800.0,
            H200_DS, _dc(60.0, 417.5, 835.5), tensor_clock_mhz=1545, verified=False),
    # H20: tensor rates capped by firmware; its reported fp32 (44) exceeds 78 SMs x 1980 MHz x 256, so fp32 is
    # derived from NVML. The 1980 MHz is assumed from the H100 SXM.
    GpuSpec("h20", "H20", "9.0", r"h20", 78, 1980, "assumed", 4000.0,
            H20_PAGE, {"tf32": 74.0, "fp16": 148.0, "bf16": 148.0}, capped=True, verified=False,
            evidence=H20_REPORT),
    # Blackwell: 148 SMs as CUDA reports a B200; clocks implied by its fp32 and bf16 figures.
    GpuSpec("b200", "B200 (HGX)", "10.0", r"b200", 148, 1979, "implied", 7700.0,
            BLACKWELL_DS, _dc(75.0, 1100.0, 2250.0), tensor_clock_mhz=1856),
    GpuSpec("rtx_5090", "GeForce RTX 5090", "12.0", r"geforce rtx 5090", 170, 2407, "printed", 1792.0,
            RTX_BLACKWELL_WP, _dc(104.8, 104.8, 209.5)),
)
SPEC_BY_KEY: Mapping[str, GpuSpec] = MappingProxyType({spec.key: spec for spec in SPECS})


def spec_for(name: str | None) -> GpuSpec | None:
    """The datasheet row for an NVML (or torch) GPU name, or None when no row describes it."""
    return next((spec for spec in SPECS if spec.matches(name)), None) if name else None


def is_geforce(name: str | None) -> bool:
    """The GeForce rule's test (see the module docstring for why the name's "GeForce" decides)."""
    return bool(name) and "geforce" in normalise(name or "").split()


def _rate(cc: str, precision: str, name: str | None, half_rate: bool | None = None) -> tuple[int, bool] | str:
    """Dense FLOP/clk/SM for ``precision`` and whether the GeForce rule halved it, or the key of why none."""
    arch = ARCHS.get(cc)
    if arch is None or not arch.per_sm:
        return "peak.unknown_arch"
    if precision not in arch.per_sm:
        return "peak.no_tensor_path"
    rate = arch.per_sm[precision]
    if precision == "fp32":
        return rate, False
    if arch.geforce_halves and not name and half_rate is None:
        # The product line sets the rate (and on Turing whether tensor cores exist at all).
        return "peak.no_name"
    # Turing tensor cores exist only on RTX-branded parts (TU10x); the T4 row states its rate class.
    if cc == "7.5" and half_rate is None and "rtx" not in normalise(name or "").split():
        return "peak.no_tensor_cores"
    halved = arch.geforce_halves and (is_geforce(name) if half_rate is None else half_rate)
    return (rate // 2 if halved else rate), halved


def row_rate(spec: GpuSpec, precision: str) -> int | None:
    """The per-SM rate that a row's figures should equal SMs x clock x (None: no tensor path)."""
    rate = _rate(spec.cc, precision, spec.label, spec.half_rate)
    return None if isinstance(rate, str) else rate[0]


def row_clock_mhz(spec: GpuSpec, precision: str) -> int:
    """The clock a row's figure for ``precision`` is quoted at."""
    return spec.tensor_clock_mhz if precision in TENSOR_PRECISIONS and spec.tensor_clock_mhz else spec.clock_mhz


def spec_tflops(spec: GpuSpec) -> Mapping[str, float]:
    """The row's dense TFLOP/s: as printed, or SMs x clock x rate where the document prints none."""
    if spec.tflops:
        return spec.tflops
    out: dict[str, float] = {}
    for precision in PRECISIONS:
        rate = row_rate(spec, precision)
        if rate is not None:
            out[precision] = spec.sm_count * row_clock_mhz(spec, precision) * rate / 1e6
    return out


def tensor_clock_ratio(arch: Arch) -> float:
    """Datasheet tensor clock / fp32 clock of the architecture's reference part (1.0: none needed)."""
    if arch.tensor_clock_ref is None:
        return 1.0
    ref = SPEC_BY_KEY[arch.tensor_clock_ref]
    return (ref.tensor_clock_mhz or ref.clock_mhz) / ref.clock_mhz


def _doc_params(spec: GpuSpec) -> dict[str, str | int | float]:
    return {"gpu": spec.label, "doc": spec.doc.title, "url": spec.doc.url}


def _from_spec(spec: GpuSpec, precision: str, sm_count: int | None) -> Peak | None:
    value = spec_tflops(spec).get(precision)
    if value is None:
        return None
    # A cap is per product, whatever SM count NVML shows.
    if sm_count and sm_count != spec.sm_count and not spec.capped:
        params = _doc_params(spec) | {"spec_sm_count": spec.sm_count, "sm_count": sm_count}
        return Peak(precision, value * sm_count / spec.sm_count, Source("datasheet_scaled", params, spec.verified))
    if spec.tflops:
        return Peak(precision, value, Source("datasheet", _doc_params(spec), spec.verified))
    kind = "datasheet_computed_up_to" if spec.clock_basis == "up_to" else "datasheet_computed"
    params = _doc_params(spec) | {"sm_count": spec.sm_count, "clock_mhz": row_clock_mhz(spec, precision),
                                  "per_sm": row_rate(spec, precision) or 0}
    return Peak(precision, value, Source(kind, params, spec.verified))


def _derive(name: str | None, cc: str | None, sm_count: int | None, clock_mhz: float | None,
            precision: str) -> Peak | Missing:
    if not cc:
        return Missing(precision, "peak.no_cc", {})
    rate = _rate(cc, precision, name)
    if rate == "peak.unknown_arch":
        return Missing(precision, rate, {"cc": cc})
    arch = ARCHS[cc]
    if isinstance(rate, str) or not sm_count or not clock_mhz:
        why = rate if isinstance(rate, str) else "peak.no_sm_count" if not sm_count else "peak.no_clock"
        return Missing(precision, why, {"cc": cc, "arch": arch.name})
    per_sm, halved = rate
    params: dict[str, str | int | float] = {"cc": cc, "arch": arch.name, "sm_count": sm_count,
                                            "clock_mhz": clock_mhz, "per_sm": per_sm}
    ratio = tensor_clock_ratio(arch) if precision in TENSOR_PRECISIONS else 1.0
    kind = "derived_geforce" if halved else "derived"
    if ratio != 1.0:
        kind = "derived_tensor_clock"
        params |= {"clock_mhz": clock_mhz * ratio, "nvml_clock_mhz": clock_mhz, "ratio": ratio,
                   "ref_gpu": SPEC_BY_KEY[arch.tensor_clock_ref or ""].label}
    return Peak(precision, sm_count * clock_mhz * ratio * per_sm / 1e6, Source(kind, params, arch.verified))


def compute_peaks(name: str | None, compute_capability: str | None, sm_count: int | None,
                  sm_clock_max_mhz: float | None) -> tuple[tuple[Peak, ...], tuple[Missing, ...]]:
    """A peak or the reason there is none, for every precision; ``sm_clock_max_mhz``: NVML's max SM clock."""
    spec = spec_for(name)
    cc = compute_capability or (spec.cc if spec else None)
    peaks: list[Peak] = []
    missing: list[Missing] = []
    for precision in PRECISIONS:
        outcome = (_from_spec(spec, precision, sm_count) if spec else None) or _derive(
            name, cc, sm_count, sm_clock_max_mhz, precision)
        if isinstance(outcome, Peak):
            peaks.append(outcome)
        else:
            missing.append(outcome)
    return tuple(peaks), tuple(missing)


def spec_bandwidth(name: str | None) -> tuple[float, Source] | None:
    """The datasheet memory bandwidth (GB/s), for when NVML cannot give clock and bus width (WSL2)."""
    spec = spec_for(name)
    if spec is None or spec.bandwidth_gbps is None:
        return None
    return spec.bandwidth_gbps, Source("datasheet", _doc_params(spec), spec.verified)


def _check_table() -> None:
    # A typo in a key or a cc must fail at import, not as a silent fallback at run time.
    keys = [spec.key for spec in SPECS]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate GpuSpec keys")
    for spec in SPECS:
        if spec.cc not in ARCHS or set(spec.tflops) - set(PRECISIONS) or spec.clock_basis not in CLOCK_BASES:
            raise ValueError(f"bad GpuSpec {spec.key}")
        if spec.half_rate is not None and not ARCHS[spec.cc].geforce_halves:
            raise ValueError(f"{spec.key}: half_rate on an architecture without a half-rate product line")
    for arch in ARCHS.values():
        if arch.tensor_clock_ref is not None and arch.tensor_clock_ref not in SPEC_BY_KEY:
            raise ValueError(f"unknown tensor_clock_ref {arch.tensor_clock_ref}")


_check_table()
