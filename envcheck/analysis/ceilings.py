"""The physical limits a device's cases are judged against, each with its source: bandwidth theoretical from
NVML's clock and bus width (else the datasheet) and measured as the best kernel timed far past L2; compute
theoretical from ``peaks`` and measured as the best cuBLAS rate of the precision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from envcheck.analysis.peaks import Source, compute_peaks, spec_bandwidth
from envcheck.model import Bench, CeilingRun, Environment, Gpu
from envcheck.ops import ITEMSIZE, PRECISIONS, spec

BANDWIDTH = "bandwidth"
THEORETICAL = "theoretical"
MEASURED = "measured"
UNITS = {BANDWIDTH: "GB/s"} | dict.fromkeys(PRECISIONS, "TFLOP/s")

# Bytes each bandwidth kernel moves per element: what it reads plus what it writes.
KERNEL_ACCESSES = {"copy": 2, "read": 1, "fill": 1, "triad": 3}


@dataclass(frozen=True)
class Ceiling:
    """A limit: ``name`` is ``bandwidth`` or a precision, ``kind`` ``theoretical`` or ``measured``."""

    name: str
    kind: str
    value: float
    unit: str
    source: Source


@dataclass(frozen=True)
class MissingCeiling:
    """A limit that could not be known, and why (a catalogue key and its parameters)."""

    name: str
    kind: str
    key: str
    params: Mapping[str, str | int | float]


@dataclass(frozen=True)
class Ceilings:
    found: tuple[Ceiling, ...] = ()
    missing: tuple[MissingCeiling, ...] = ()

    def get(self, name: str, kind: str) -> Ceiling | None:
        return next((c for c in self.found if c.name == name and c.kind == kind), None)


def theoretical_bandwidth_gbps(mem_clock_max_mhz: float | None, bus_width_bits: int | None) -> float | None:
    """``2 x clock x bus / 8`` in GB/s: the only copy of this formula."""
    if not mem_clock_max_mhz or not bus_width_bits:
        return None
    return 2 * mem_clock_max_mhz * 1e6 * bus_width_bits / 8 / 1e9


def env_gpu(env: Environment, bench: Bench) -> Gpu | None:
    """The NVML GPU a bench ran on: by UUID (NVML and CUDA number GPUs differently), else by index."""
    dev = bench.device
    if dev.backend != "cuda":
        return None
    want = (dev.uuid if dev.uuid.startswith("GPU-") else f"GPU-{dev.uuid}") if dev.uuid else None
    return (next((g for g in env.gpus if want and g.get("uuid") == want), None)
            or next((g for g in env.gpus if dev.index is not None and g.index == dev.index), None)
            or (env.gpus[0] if len(env.gpus) == 1 else None))


def _theoretical_bandwidth(gpu: Gpu | None, name: str) -> Ceiling | MissingCeiling:
    clock = gpu.get("mem_clock_max_mhz") if gpu else 0
    bus = gpu.get("memory_bus_width_bits") if gpu else 0
    value = theoretical_bandwidth_gbps(clock, bus)
    if value:
        return Ceiling(BANDWIDTH, THEORETICAL, value, UNITS[BANDWIDTH],
                       Source("nvml_bandwidth", {"mem_clock_mhz": clock, "bus_bits": bus}))
    sheet = spec_bandwidth(name)
    if sheet:
        gbps, source = sheet
        return Ceiling(BANDWIDTH, THEORETICAL, gbps, UNITS[BANDWIDTH], source)
    # Say which NVML answer was missing: under WSL2 both usually are (Not Supported).
    facts = gpu.facts if gpu else {}
    why = [key for key in ("mem_clock_max_mhz", "memory_bus_width_bits") if key not in facts or not facts[key].ok]
    reason = (facts[why[0]].reason if why and why[0] in facts else None) or "not probed"
    return MissingCeiling(BANDWIDTH, THEORETICAL, "ceiling.no_bandwidth",
                          {"missing": ", ".join(why) or "unknown", "reason": reason})


def run_bytes(run: CeilingRun) -> int:
    return KERNEL_ACCESSES[run.kernel] * run.shape[0] * ITEMSIZE[run.dtype]


def run_rate(run: CeilingRun) -> float:
    """GB/s of a bandwidth kernel, TFLOP/s of a matmul, at its median time."""
    seconds = run.timing.median_us * 1e-6
    if run.kernel == "matmul":
        return spec("matmul").traffic(run.shape, run.dtype).flops / seconds / 1e12
    return run_bytes(run) / seconds / 1e9


def _measured(bench: Bench) -> list[Ceiling]:
    best: dict[str, tuple[float, CeilingRun]] = {}
    for run in bench.ceiling_runs:
        if run.kernel == "matmul":
            name = run.precision or run.dtype
        elif run.kernel in KERNEL_ACCESSES:
            name = BANDWIDTH
        else:
            continue  # a kernel this version does not know: never guess its traffic
        rate = run_rate(run)
        if name not in best or rate > best[name][0]:
            best[name] = (rate, run)
    out = [Ceiling(name, MEASURED, rate, UNITS[name], Source("measured_" + run.kernel, {
        "size": "x".join(str(d) for d in run.shape), "dtype": run.dtype, "samples": run.timing.n,
        "method": run.timing.method})) for name, (rate, run) in best.items()]
    for rec in bench.recorded_ceilings:
        if rec.name not in best:
            out.append(Ceiling(rec.name, MEASURED, rec.value, rec.unit, Source("recorded", {"text": rec.source})))
    return out


def ceilings(env: Environment, bench: Bench) -> Ceilings:
    """Every limit of ``bench``'s device: theoretical and measured."""
    if bench.device.backend != "cuda":
        return Ceilings()
    gpu = env_gpu(env, bench)
    dev = bench.device
    name = (gpu.get("name") if gpu else None) or dev.name
    found: list[Ceiling] = []
    missing: list[MissingCeiling] = []
    bw = _theoretical_bandwidth(gpu, name)
    (found if isinstance(bw, Ceiling) else missing).append(bw)  # type: ignore[arg-type]
    peaks, absent = compute_peaks(
        name,
        (gpu.get("compute_capability") if gpu else None) or dev.compute_capability,
        (gpu.get("sm_count") if gpu else None) or dev.sm_count,
        gpu.get("sm_clock_max_mhz") if gpu else None,
    )
    found += [Ceiling(p.precision, THEORETICAL, p.tflops, UNITS[p.precision], p.source) for p in peaks]
    missing += [MissingCeiling(m.precision, THEORETICAL, m.key, m.params) for m in absent]
    found += _measured(bench)
    return Ceilings(tuple(found), tuple(missing))
