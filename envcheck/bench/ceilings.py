"""Physical limits a case is judged against, each with where its number came from.

Bandwidth (GB/s, 1e9 bytes/s):
* theoretical: NVML's max memory clock x bus width: ``2 x clock_MHz x 1e6 x bus_bits / 8``
  (the 2 is the double data rate NVML's memory clock does not include). H200: 2 x 3201 x
  6016 / 8 = 4814.3 GB/s; H100 SXM: 2 x 2619 x 5120 / 8 = 3352.3 GB/s. The parent's NVML
  probe computes it; the spec table below stands in when NVML could not.
* measured: a device-to-device copy in the same run (bytes read + written per copy).

Compute (TFLOP/s, dense, fp32 accumulation as PyTorch uses):
* theoretical from the architecture: SMs x max SM clock x FLOP per clock per SM, the last
  from ``PER_SM_FLOP_PER_CLOCK`` (tensor-core rates for tf32/fp16/bf16, CUDA-core FMA rate
  for fp32). NVIDIA's datasheets quote tensor rates at a lower clock than NVML's max (H100
  SXM: 1830 MHz for tensor ops, 1980 MHz max), and GeForce parts run fp16/bf16 with fp32
  accumulation at half the rate of their data-centre siblings, so for known GPUs the
  datasheet value wins and the source names both numbers.
* measured: torch.matmul (cuBLAS) at ONE square size, the largest of 8192, 4096, 2048 that
  fits in free memory, timed once at the start of the run (before any case, on a GPU not yet
  warmed by the cases): the median of its samples, not a best rate over sizes or over the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envcheck.bench.protocol import PRECISIONS
from envcheck.model import Ceiling

# The NVML probe computes the theoretical bandwidth; this name is the same formula, not a second copy.
from envcheck.probes.gpus import theoretical_bandwidth_gbps as bandwidth_from_clock  # noqa: F401

# Dense FLOP per clock per SM (an FMA counts 2). Sources: NVIDIA architecture whitepapers
# (Volta, Turing, Ampere GA100 and GA102, Ada, Hopper), cross-checked against the datasheet
# TFLOP/s at the boost clock: A100 312 TFLOP/s bf16 = 108 SMs x 1410 MHz x 2048; H100 SXM
# 989.4 = 132 x 1830 x 4096, fp32 66.9 = 132 x 1980 x 256; L40S fp32 91.6 = 142 x 2520 x 256.
# The 8.6 and 8.9 rows are the data-centre rates (A10/A40, L4/L40S); GeForce cards of those
# generations have half the fp16/bf16/tf32 tensor rate with fp32 accumulation (spec table).
PER_SM_FLOP_PER_CLOCK: dict[str, dict[str, int]] = {
    "7.0": {"fp32": 128, "fp16": 1024},  # Volta V100: no tf32 or bf16 tensor cores
    "7.5": {"fp32": 128, "fp16": 1024},  # Turing T4
    "8.0": {"fp32": 128, "tf32": 1024, "fp16": 2048, "bf16": 2048},  # Ampere A100
    "8.6": {"fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024},  # Ampere GA10x (A10, A40)
    "8.9": {"fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024},  # Ada (L4, L40S)
    "9.0": {"fp32": 256, "tf32": 2048, "fp16": 4096, "bf16": 4096},  # Hopper H100/H200
}
ARCH_NAMES = {"7.0": "Volta", "7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere", "8.9": "Ada", "9.0": "Hopper"}


@dataclass(frozen=True)
class Spec:
    """Datasheet numbers of one GPU model (dense TFLOP/s, no sparsity; GB/s)."""

    label: str
    match: tuple[str, ...]  # all must appear in the NVML name (case-insensitive)
    exclude: tuple[str, ...]  # none may appear
    tflops: dict[str, float]
    bandwidth_gbps: float | None
    source: str

    def matches(self, name: str) -> bool:
        n = name.lower()
        return all(m.lower() in n for m in self.match) and not any(x.lower() in n for x in self.exclude)


SPECS: tuple[Spec, ...] = (
    Spec("H200", ("H200",), ("NVL",), {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4}, 4800.0,
         "NVIDIA H200 SXM datasheet (dense: half the sparsity figures)"),
    Spec("H100 PCIe", ("H100", "PCIe"), (), {"fp32": 51.2, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0}, 2000.0,
         "NVIDIA H100 PCIe datasheet (dense: half the sparsity figures)"),
    Spec("H100 SXM", ("H100",), ("PCIe", "NVL"), {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4},
         3350.0, "NVIDIA H100 SXM datasheet (dense: half the sparsity figures)"),
    Spec("A100", ("A100",), (), {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}, None,
         "NVIDIA A100 datasheet (dense)"),
    Spec("L40S", ("L40S",), (), {"fp32": 91.6, "tf32": 183.0, "fp16": 362.05, "bf16": 362.05}, 864.0,
         "NVIDIA L40S datasheet (dense: half the sparsity figures)"),
    Spec("RTX 4090", ("4090",), ("Laptop", "Mobile"), {"fp32": 82.6, "tf32": 82.6, "fp16": 165.2, "bf16": 165.2},
         1008.0, "NVIDIA Ada whitepaper, GeForce RTX 4090 (dense, fp32 accumulate)"),
)


def spec_for(name: str | None) -> Spec | None:
    """The datasheet entry for an NVML/torch GPU name, or None when it is not in the table."""
    if not name:
        return None
    for spec in SPECS:
        if spec.matches(name):
            return spec
    return None


def arch_tflops(compute_capability: str | None, sm_count: int | None, sm_clock_max_mhz: float | None,
                precision: str) -> float | None:
    """SMs x max clock x per-SM rate, in TFLOP/s; None when any part is unknown."""
    rates = PER_SM_FLOP_PER_CLOCK.get(compute_capability or "")
    if not rates or precision not in rates or not sm_count or not sm_clock_max_mhz:
        return None
    return sm_count * sm_clock_max_mhz * 1e6 * rates[precision] / 1e12


def theoretical_bandwidth(gpu: dict[str, Any]) -> Ceiling | None:
    """From the plan's NVML facts, else the spec table; None when neither knows."""
    value = gpu.get("theoretical_bandwidth_gbps")
    if isinstance(value, (int, float)) and value > 0:
        source = gpu.get("bandwidth_source") or "NVML: 2 x max memory clock x bus width / 8"
        return Ceiling("bandwidth", "theoretical", float(value), "GB/s", str(source))
    spec = spec_for(gpu.get("name"))
    if spec and spec.bandwidth_gbps:
        return Ceiling("bandwidth", "theoretical", spec.bandwidth_gbps, "GB/s",
                       f"{spec.source} (NVML memory clock or bus width unavailable)")
    return None


def measured_bandwidth(bytes_per_copy: int, median_us: float, samples: int) -> Ceiling:
    """The device-to-device copy ceiling: bytes read + written per copy over its median time."""
    gib = bytes_per_copy / 2 / (1 << 30)
    return Ceiling("bandwidth", "measured", bytes_per_copy / (median_us * 1e-6) / 1e9, "GB/s",
                   f"device-to-device copy of {gib:.2f} GiB in this run (read + write counted), "
                   f"median of {samples}")


def compute_ceilings(name: str | None, compute_capability: str | None, sm_count: int | None,
                     sm_clock_max_mhz: float | None) -> list[Ceiling]:
    """One theoretical TFLOP/s ceiling per precision this GPU has (datasheet when known, else derived)."""
    spec = spec_for(name)
    arch = ARCH_NAMES.get(compute_capability or "", f"compute capability {compute_capability}")
    out: list[Ceiling] = []
    for precision in PRECISIONS:
        derived = arch_tflops(compute_capability, sm_count, sm_clock_max_mhz, precision)
        derived_text = None
        if derived is not None:
            rate = PER_SM_FLOP_PER_CLOCK[compute_capability or ""][precision]
            derived_text = (f"{sm_count} SMs x {sm_clock_max_mhz:g} MHz (NVML max SM clock) x {rate} "
                            f"FLOP/clk/SM ({arch} dense {precision}) = {derived:.1f}")
        sheet = spec.tflops.get(precision) if spec else None
        if sheet is not None and spec is not None:
            source = f"{spec.source}: {sheet:g} dense {precision}"
            if derived_text and abs(derived - sheet) / sheet > 0.005:  # type: ignore[operator]
                source += f"; from the architecture: {derived_text}"
            out.append(Ceiling(precision, "theoretical", sheet, "TFLOP/s", source))
        elif derived is not None and derived_text:
            out.append(Ceiling(precision, "theoretical", derived, "TFLOP/s", derived_text))
    return out


def measured_matmul(precision: str, size: int, tflops: float, samples: int) -> Ceiling:
    """torch.matmul (cuBLAS) at one ``size``^3 for ``precision``, timed at the start of the run.

    One size (the largest that fits), measured once before any case: the median rate of that
    measurement, not the best over sizes or over the run; the source says so.
    """
    return Ceiling(precision, "measured", tflops, "TFLOP/s",
                   f"torch.matmul (cuBLAS) {size}^3 {precision} at the start of this run, median of {samples}")


def percent(value: float | None, ceiling: Ceiling | None) -> float | None:
    """``value`` as a percentage of ``ceiling`` (None when either is missing)."""
    if value is None or ceiling is None or ceiling.value <= 0:
        return None
    return 100.0 * value / ceiling.value
