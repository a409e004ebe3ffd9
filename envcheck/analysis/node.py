"""Derived numbers of one node: link bandwidths expected from the topology, copy and collective
bandwidths from their samples, NCCL's algorithm per size, GPUs that fall behind their siblings,
error-counter rates and deltas.

Pure functions of the raw results in ``envcheck.model`` (and of nccl-tests' definitions, which
they follow to the letter so the numbers compare with nccl-tests' own): nothing here probes,
measures or renders, and nothing else computes these numbers.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.analysis.narrowing import (
    DEFAULT_NARROW_MARGIN,
    Conclusion,
    NarrowStep,
    lost_conclusion,
    narrowing_conclusion,
)
from envcheck.model.node import (
    CollectiveResult,
    Collectives,
    Copy,
    Counter,
    CounterSnapshot,
    GpuLinks,
    PeerCopies,
    Topology,
)

# --------------------------------------------------------------------------- nccl-tests' definitions

ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int8": 1}

# NCCL's names for the collectives, as its debug lines print them.
NCCL_NAMES = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
              "all_to_all": "AlltoAll", "broadcast": "Broadcast"}


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' correction from algbw to busbw (doc/PERFORMANCE.md, "Summary")."""
    if n < 1:
        raise ValueError("a group has at least one rank")
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


@dataclass(frozen=True)
class Layout:
    """The buffers of one collective at nccl-tests' size S on ``n`` ranks, in elements.

    ``count``: nccl-tests' "count" column; ``send`` / ``recv``: each rank's input and output;
    ``size_bytes``: S after nccl-tests' rounding (per-rank chunks aligned to 16 bytes);
    ``nccl_bytes``: the size NCCL's tuning line prints for the call (count x element size, per
    rank for AllGather / ReduceScatter), None for all_to_all (NCCL runs it as send/recv and
    prints no algorithm).
    """

    count: int
    send: int
    recv: int
    size_bytes: int
    nccl_bytes: int | None


def layout(op: str, size_bytes: int, n: int, element_bytes: int = 4) -> Layout:
    """Buffers as nccl-tests' ``*GetCollByteCount`` sizes them for ``-b``/``-e`` size S (src/*.cu)."""
    elems = size_bytes // element_bytes
    if op in ("all_reduce", "broadcast"):
        return Layout(elems, elems, elems, elems * element_bytes, elems * element_bytes)
    # (count/nranks) & ~(16/eltSize - 1): per-rank chunks stay 16-byte aligned.
    per = (elems // n) & ~(max(16 // element_bytes, 1) - 1)
    total = per * n * element_bytes
    if op == "all_gather":
        return Layout(per, per, per * n, total, per * element_bytes)
    if op == "reduce_scatter":
        return Layout(per, per * n, per, total, per * element_bytes)
    if op == "all_to_all":
        return Layout(per, per * n, per * n, total, None)
    raise ValueError(f"unknown collective {op!r}")


def mean_time_us(result: CollectiveResult) -> float | None:
    """Time of one call as nccl-tests reports it by default (``-a 1``): each rank's mean iteration
    time, averaged over the ranks. None without samples."""
    per_rank = [statistics.fmean(t.timing.samples_us) for t in result.timings if len(t.timing.samples_us)]
    return statistics.fmean(per_rank) if per_rank else None


def _cv(result: CollectiveResult) -> float | None:
    xs = [x for t in result.timings for x in t.timing.samples_us]
    if len(xs) < 2:
        return None
    mean = statistics.fmean(xs)
    return statistics.pstdev(xs) / mean if mean > 0 else None


@dataclass(frozen=True)
class CollectiveRow:
    """One collective at one size, with nccl-tests' numbers and the algorithm NCCL chose.

    ``algos``: the distinct (algorithm, protocol) pairs NCCL's rank 0 logged for this call, e.g.
    ``(("RING", "SIMPLE"),)``; empty when unknown (``algo_reason``). ``status``: ``ok``, ``wrong``
    (elements differed), ``error``, ``skipped`` or ``unverified`` (measured, not checked).
    """

    op: str
    size_bytes: int
    ranks: tuple[int, ...]
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    cv: float | None
    wrong: int | None
    status: str
    algos: tuple[tuple[str, str], ...] = ()
    algo_reason: str | None = None

    @property
    def n(self) -> int:
        return len(self.ranks)

    @property
    def algo_label(self) -> str | None:
        return "+".join(f"{a}/{p}" for a, p in self.algos) or None


def algos_for(result: CollectiveResult, collectives: Collectives) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """The (algorithm, protocol) pairs NCCL logged for ``result``'s calls, and why none when empty."""
    if collectives.backend != "nccl":
        return (), "backend_not_nccl"
    if not collectives.choices:
        return (), collectives.choices_reason or "no_nccl_log"
    if result.op == "all_to_all":
        return (), "nccl_p2p"  # NCCL runs all-to-all as grouped send/recv: no collective algorithm
    n = len(result.ranks)
    lay = layout(result.op, result.size_bytes, n, ELEMENT_BYTES.get(result.dtype, 4))
    name = NCCL_NAMES[result.op]
    found: list[tuple[str, str]] = []
    for c in collectives.choices:
        if c.nccl_op != name or c.nccl_bytes != lay.nccl_bytes:
            continue
        if c.nranks is not None and c.nranks != n:
            continue
        pair = (c.algo, c.proto)
        if pair not in found:
            found.append(pair)
    return tuple(found), (None if found else "not_in_nccl_log")


def bandwidths_gbps(op: str, size_bytes: int, n: int, time_us: float | None) -> tuple[float | None, float | None]:
    """nccl-tests' (algbw, busbw) in GB/s of one call of ``time_us``: algbw = S / t, busbw = algbw x
    factor(op, n). The one place they are computed (the worker's narrowing reads it too)."""
    if not time_us:
        return None, None
    algbw = size_bytes / (time_us * 1e-6) / 1e9
    return algbw, algbw * busbw_factor(op, n)


def collective_row(result: CollectiveResult, collectives: Collectives) -> CollectiveRow:
    """nccl-tests' algbw = S / t and busbw = algbw x factor(op, n), with t from :func:`mean_time_us`."""
    n = len(result.ranks)
    algos, why = algos_for(result, collectives)
    if result.skipped:
        return CollectiveRow(result.op, result.size_bytes, result.ranks, None, None, None, None, None, "skipped",
                             algos, why)
    t = mean_time_us(result)
    algbw, busbw = bandwidths_gbps(result.op, result.size_bytes, n, t)
    if result.error:
        status = "error"
    elif result.wrong is None:
        status = "unverified"
    elif result.wrong:
        status = "wrong"
    else:
        status = "ok"
    return CollectiveRow(result.op, result.size_bytes, result.ranks, t, algbw, busbw, _cv(result), result.wrong,
                         status, algos, why)


def collective_rows(collectives: Collectives, narrowing: bool = False) -> tuple[CollectiveRow, ...]:
    """Every sweep result (or, with ``narrowing``, every sub-group run) of one sweep, in run order."""
    source = collectives.narrowing if narrowing else collectives.results
    return tuple(collective_row(r, collectives) for r in source)


def algorithm_changes(rows: Sequence[CollectiveRow]) -> tuple[tuple[str, int, str | None, str | None], ...]:
    """(op, size, before, after) wherever NCCL switched algorithm between two consecutive sizes of
    one op: the places where a busbw curve may step for a reason that is not the hardware."""
    out = []
    last: dict[str, str | None] = {}
    for r in sorted(rows, key=lambda r: (r.op, r.size_bytes)):
        label = r.algo_label
        if r.op in last and label is not None and last[r.op] is not None and label != last[r.op]:
            out.append((r.op, r.size_bytes, last[r.op], label))
        if label is not None:
            last[r.op] = label
    return tuple(out)


# --------------------------------------------------------------------------- link bandwidth from the topology

# PCIe transfer rate per lane (GT/s) and line-code efficiency by generation: 8b/10b for Gen1-2,
# 128b/130b for Gen3-5, FLIT mode for Gen6 (242 payload bytes per 256-byte flit).
PCIE_GTPS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_ENCODING = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


def pcie_gbps(gen: int, width: int) -> float | None:
    """Theoretical PCIe bandwidth per direction, GB/s: GT/s per lane x lanes x encoding / 8.
    Gen5 x16: 32 x 16 x 128/130 / 8 = 63.0 GB/s."""
    if gen not in PCIE_GTPS or width <= 0:
        return None
    return PCIE_GTPS[gen] * width * PCIE_ENCODING[gen] / 8


@dataclass(frozen=True)
class PairPath:
    """How two GPUs reach each other, and the bandwidth per direction that allows.

    ``via``: ``nvlink`` (direct links), ``nvswitch`` (both GPUs' links end on NVSwitches: the pair
    gets the smaller of the two GPUs' link sets), or ``pcie``. ``nvlinks``: active links the pair
    can use. ``expected_gbps``: per direction (active links x per-link speed, or the slower PCIe
    link's generation x width with its encoding). ``source``: a key (``PATH_SOURCES``) naming the
    facts it came from, phrased by the presentation.
    """

    a: int
    b: int
    via: str
    nvlinks: int
    link_gbps: float | None
    expected_gbps: float | None
    pcie_level: str | None
    source: str


def _active(g: GpuLinks) -> list[Any]:
    return [lk for lk in g.nvlinks if lk.active]


def _link_speed_gbps(links: Iterable[Any]) -> float | None:
    speeds = [lk.speed_mbps.value for lk in links if lk.speed_mbps.ok]
    # MB/s -> GB/s; a bonded set runs at its slowest link
    return min(speeds) / 1000 if speeds else None


@dataclass(frozen=True)
class GpuNvlinks:
    """One GPU's NVLinks as the topology table shows them: ``active`` of ``total`` links, and the speed
    per link of the active set (its slowest; None when NVML gave no speed)."""

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


def host_link_gbps(topology: Topology, gpu: int) -> float | None:
    """Expected host <-> GPU bandwidth per direction: the GPU's PCIe link at its maximum generation
    and width (an idle GPU lowers the current ones to save power)."""
    g = next((x for x in topology.gpus if x.index == gpu), None)
    return _gpu_pcie_gbps(g) if g is not None else None


def pair_path(topology: Topology, a: int, b: int) -> PairPath | None:
    """How GPUs ``a`` and ``b`` connect, from NVML's answers alone (no per-model table)."""
    ga = next((g for g in topology.gpus if g.index == a), None)
    gb = next((g for g in topology.gpus if g.index == b), None)
    if ga is None or gb is None:
        return None
    pair = next((p for p in topology.pairs if {p.a, p.b} == {a, b}), None)
    level = pair.pcie_level.value if pair is not None and pair.pcie_level.ok else None
    bus_b = str(gb.pci_bus_id.value).lower() if gb.pci_bus_id.ok else None
    bus_a = str(ga.pci_bus_id.value).lower() if ga.pci_bus_id.ok else None
    direct = [lk for lk in _active(ga) if lk.remote_pci_bus_id.ok and bus_b
              and _same_bus(str(lk.remote_pci_bus_id.value), bus_b)]
    if not direct and bus_a:
        # NVML may answer the remote end only from one side (or the binding may lack it on one GPU).
        direct = [lk for lk in _active(gb) if lk.remote_pci_bus_id.ok
                  and _same_bus(str(lk.remote_pci_bus_id.value), bus_a)]
    if direct:
        speed = _link_speed_gbps(direct)
        expected = speed * len(direct) if speed is not None else None
        return PairPath(a, b, "nvlink", len(direct), speed, expected, level, "nvlink_links")
    sw_a = [lk for lk in _active(ga) if lk.remote_type.value == "switch"]
    sw_b = [lk for lk in _active(gb) if lk.remote_type.value == "switch"]
    if sw_a and sw_b:
        n = min(len(sw_a), len(sw_b))
        speeds = [s for s in (_link_speed_gbps(sw_a), _link_speed_gbps(sw_b)) if s is not None]
        speed = min(speeds) if speeds else None
        return PairPath(a, b, "nvswitch", n, speed, speed * n if speed is not None else None, level,
                        "nvswitch_links")
    pa, pb = _gpu_pcie_gbps(ga), _gpu_pcie_gbps(gb)
    expected = min(pa, pb) if pa is not None and pb is not None else None
    return PairPath(a, b, "pcie", 0, None, expected, level, "pcie_link")


# Where a pair's expected bandwidth comes from: active NVLinks x per-link speed; for NVSwitch the
# smaller GPU's active NVLinks x per-link speed; the slower GPU's PCIe generation x width (all NVML).
PATH_SOURCES = ("nvlink_links", "nvswitch_links", "pcie_link")
# ``nvidia-smi topo -m``'s names for NVML's PCIe levels (PCIE_LEVELS), so the matrix reads like its output.
SMI_LEVEL_NAMES = {"internal": "X", "single": "PIX", "multiple": "PXB", "hostbridge": "PHB", "node": "NODE",
                   "system": "SYS"}


def topo_label(p: PairPath) -> str:
    """The pair as ``nvidia-smi topo -m`` would print it: ``NV18`` for a bonded set of NVLinks
    (direct or through NVSwitches), else the PCIe level's name (``SYS``, ``NODE``, ``PHB``...)."""
    if p.nvlinks:
        return f"NV{p.nvlinks}"
    return SMI_LEVEL_NAMES.get(p.pcie_level or "", "?")


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
    out = []
    for i, a in enumerate(idx):
        for b in idx[i + 1:]:
            p = pair_path(topology, a, b)
            if p is not None:
                out.append(p)
    return tuple(out)


def smi_disagreements(topology: Topology) -> tuple[tuple[int, int, str, str], ...]:
    """(a, b, what NVML implies, what ``nvidia-smi topo -m`` printed) where they differ on the NVLink count.

    NVML and nvidia-smi read the same driver, so a difference means envcheck misread one of them.
    """
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


# --------------------------------------------------------------------------- copies


@dataclass(frozen=True)
class CopyRow:
    """One copy measurement's bandwidth against what the link allows.

    ``gbps``: bytes over the median time, counting what crossed the link: one direction, or both
    for a bidirectional copy (``directions`` 2). ``expected_gbps`` counts the same directions.
    """

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
            gpu = c.dst if c.kind == "h2d" else c.src
            one = host_link_gbps(topology, gpu) if gpu is not None else None
            via = "pcie"
            expected = one * directions if one is not None else None
    pct = 100 * gbps / expected if gbps is not None and expected else None
    return CopyRow(c.kind, c.method, c.src, c.dst, directions, gbps, expected, pct, c.wrong, c.error, via)


def copy_rows(peer: PeerCopies, topology: Topology | None) -> tuple[CopyRow, ...]:
    return tuple(copy_row(c, topology) for c in peer.copies)


# --------------------------------------------------------------------------- GPUs against their siblings

DEFAULT_OUTLIER_MARGIN = 0.05


@dataclass(frozen=True)
class GpuRates:
    """What one GPU's suite says of its speed: its measured bandwidth ceiling (the best of the
    copy, read, fill and triad kernels) and its best torch matmul rate, both as the analysis
    derives them (``analysis/ceilings.py``, ``analysis/results.py``)."""

    index: int | None
    bandwidth_gbps: float | None
    matmul_tflops: float | None
    matmul_key: str | None  # which case the rate comes from, e.g. "bf16 4096x4096x4096"


def gpu_rates(bench: Any) -> GpuRates:
    """The rates of one bench: the largest torch matmul with a GPU time, and the measured bandwidth."""
    from envcheck.analysis.ceilings import ceilings
    from envcheck.analysis.results import case_results
    from envcheck.model import Environment

    ceils = ceilings(Environment(), bench)  # measured limits need nothing from the environment
    return rates_from(bench, ceils, case_results(bench, ceils))


def rates_from(bench: Any, ceils: Any, results: Sequence[Any]) -> GpuRates:
    """:func:`gpu_rates` from a bench's ceilings and case results already derived (``BenchAnalysis``)."""
    from envcheck.analysis.ceilings import BANDWIDTH, MEASURED

    best: tuple[int, float, str] | None = None
    for r in results:
        c = r.case
        if c.op != "matmul" or c.impl != "torch" or c.gpu is None or r.status == "error" or r.tflops is None:
            continue
        m, n, k = c.shape
        label = f"{c.dtype} {m}x{n}x{k}" + ("" if c.precision == c.dtype else f" {c.precision}")
        # The largest problem is the one closest to the GPU's peak; among equals, the fastest precision.
        cand = (r.traffic.flops, r.tflops, label)
        if best is None or (cand[0], cand[1]) > (best[0], best[1]):
            best = cand
    bw = ceils.get(BANDWIDTH, MEASURED)
    return GpuRates(getattr(bench.device, "index", None), bw.value if bw else None,
                    best[1] if best else None, best[2] if best else None)


@dataclass(frozen=True)
class Outlier:
    """A GPU more than ``margin`` below the median of its siblings on one metric."""

    gpu: int | None
    metric: str  # bandwidth_gbps | matmul_tflops
    value: float
    siblings_median: float
    shortfall: float  # fraction below the median


def outliers(benches: Sequence[Any], margin: float = DEFAULT_OUTLIER_MARGIN) -> tuple[Outlier, ...]:
    """GPUs whose copy bandwidth or matmul rate falls more than ``margin`` below their siblings' median.

    Matmul rates are compared only between GPUs whose best case is the same problem, so a GPU that
    skipped a size for memory is not called slow for it.
    """
    return outliers_from_rates([gpu_rates(b) for b in benches], margin)


def outliers_from_rates(rates: Sequence[GpuRates], margin: float = DEFAULT_OUTLIER_MARGIN) -> tuple[Outlier, ...]:
    """:func:`outliers` from rates already derived."""
    out: list[Outlier] = []
    for metric in ("bandwidth_gbps", "matmul_tflops"):
        for i, r in enumerate(rates):
            value = getattr(r, metric)
            if value is None:
                continue
            sib = [getattr(s, metric) for j, s in enumerate(rates) if j != i and getattr(s, metric) is not None
                   and (metric != "matmul_tflops" or s.matmul_key == r.matmul_key)]
            if not sib:
                continue
            med = statistics.median(sib)
            if med > 0 and value < med * (1 - margin):
                out.append(Outlier(r.index, metric, value, med, 1 - value / med))
    return tuple(out)


# --------------------------------------------------------------------------- error counters

# DCGM's hardware limits (dcgm_gpu_hardware_limits.h): "8 replays per minute is the maximum
# recommended by RM"; "RM has informed us that CRC errors only matter at rates of 100+ per second".
PCIE_REPLAY_PER_MIN_LIMIT = 8.0
NVLINK_CRC_PER_S_LIMIT = 100.0
# Counters judged as CRC-like rates: a replay resends a flit whose CRC failed, and link ECC corrects
# what CRC would have flagged, so both follow the CRC rate on a link that is otherwise healthy.
RATE_COUNTERS = ("crc_flit", "crc_data", "replay", "ecc_data")


@dataclass(frozen=True)
class CounterChange:
    """One counter over an interval: how much it grew and how fast."""

    gpu: int
    name: str
    link: int | None
    delta: int
    interval_s: float
    per_s: float


def counter_interval_s(before: CounterSnapshot | None, after: CounterSnapshot | None) -> float | None:
    """Seconds between two readings, from their uptimes; None when either is missing or the uptime did
    not grow (a reboot between the readings restarted it: no interval is known)."""
    if before is None or after is None or before.uptime_s is None or after.uptime_s is None:
        return None
    return after.uptime_s - before.uptime_s if after.uptime_s > before.uptime_s else None


def counter_deltas(before: CounterSnapshot, after: CounterSnapshot) -> tuple[CounterChange, ...]:
    """Growth of each counter read in both snapshots (a counter that went down was reset: skipped)."""
    interval = counter_interval_s(before, after)
    if interval is None:
        return ()
    old = {(c.gpu, c.name, c.link): c.value for c in before.counters if c.value is not None}
    out = []
    for c in after.counters:
        prev = old.get((c.gpu, c.name, c.link))
        if c.value is None or prev is None or c.value < prev:
            continue
        d = c.value - prev
        out.append(CounterChange(c.gpu, c.name, c.link, d, interval, d / interval))
    return tuple(out)


def counter_rates(snapshot: CounterSnapshot) -> tuple[CounterChange, ...]:
    """Each counter as a rate since boot: NVML's counters start at zero when the driver loads, which
    on a server (persistence mode, driver loaded at boot) is boot. A rate over a long uptime is an
    average: the delta over the node tests (:func:`counter_deltas`) is the sharper signal."""
    if snapshot.uptime_s is None or snapshot.uptime_s <= 0:
        return ()
    return tuple(CounterChange(c.gpu, c.name, c.link, c.value, snapshot.uptime_s, c.value / snapshot.uptime_s)
                 for c in snapshot.counters if c.value is not None)


def counter_over_limit(change: CounterChange) -> bool:
    """Whether a counter's rate is past the limit DCGM uses for it (recovery: any at all)."""
    if change.name in ("pcie_replay", "pcie_replay_rollover"):
        return change.per_s * 60 > PCIE_REPLAY_PER_MIN_LIMIT
    if change.name == "recovery":
        return change.delta > 0
    if change.name in RATE_COUNTERS:
        return change.per_s > NVLINK_CRC_PER_S_LIMIT
    return False


def counters_of(snapshot: CounterSnapshot, gpu: int) -> tuple[Counter, ...]:
    return tuple(c for c in snapshot.counters if c.gpu == gpu)


@dataclass(frozen=True)
class GpuCondition:
    """What an outlier GPU looked like when probed: clocks, heat, power limit, PCIe link, error counters."""

    index: int
    sm_clock_mhz: Any = None
    sm_clock_max_mhz: Any = None
    temperature_c: Any = None
    power_limit_w: Any = None
    pcie_gen: Any = None
    pcie_gen_max: Any = None
    pcie_width: Any = None
    pcie_width_max: Any = None
    throttle_reasons: Any = None
    pcie_replay: Any = None
    nvlink_errors: Any = None  # totals per counter over the GPU's links


def gpu_condition(env: Any, index: int) -> GpuCondition:
    """The facts shown beside an outlier, read from the environment (``gpus`` and the ``links`` section)."""
    gpu = next((g for g in env.gpus if g.index == index), None)

    def g(key: str) -> Any:
        return gpu.get(key) if gpu is not None else None

    links = env.get("links", f"gpu{index}.nvlink_errors")
    totals = None
    if isinstance(links, list):
        totals = {}
        for lk in links:
            for k, v in lk.items():
                if k != "link" and isinstance(v, int):
                    totals[k] = totals.get(k, 0) + v
    return GpuCondition(index, g("sm_clock_mhz"), g("sm_clock_max_mhz"), g("temperature_c"), g("power_limit_w"),
                        g("pcie_gen"), g("pcie_gen_max"), g("pcie_width"), g("pcie_width_max"), g("throttle_reasons"),
                        env.get("links", f"gpu{index}.pcie_replay"), totals)


# --------------------------------------------------------------------------- against nccl-tests

# torch.distributed's all_reduce and broadcast work in place; its all_gather, reduce_scatter and
# all_to_all write a separate output: each is compared with nccl-tests' column of the same placement.
IN_PLACE_OPS = ("all_reduce", "broadcast")
NCCL_TESTS_MIN_BYTES = 1 << 30
NCCL_TESTS_TOLERANCE = 0.03


@dataclass(frozen=True)
class Agreement:
    """envcheck's busbw for one op and size against nccl-tests' (``ratio`` = envcheck / nccl-tests)."""

    op: str
    size_bytes: int
    placement: str  # in_place | out_of_place
    ours_gbps: float | None
    theirs_gbps: float
    ratio: float | None
    within: bool
    ours_algo: str | None = None


def against_nccl_tests(collectives: Collectives, rows: Sequence[Any], min_bytes: int = NCCL_TESTS_MIN_BYTES,
                       tolerance: float = NCCL_TESTS_TOLERANCE) -> tuple[Agreement, ...]:
    """Every size at or above ``min_bytes`` present in both, with whether they agree within ``tolerance``.

    ``rows``: ``envcheck.node.nccl_tests.NcclTestsRow`` of a run on the same GPUs. nccl-tests' S and
    envcheck's ``size_bytes`` are the same quantity, so rows match on (op, size).
    """
    ours = {(r.op, r.size_bytes): r for r in collective_rows(collectives)}
    out = []
    for t in rows:
        if t.size_bytes < min_bytes:
            continue
        placement = "in_place" if t.op in IN_PLACE_OPS else "out_of_place"
        theirs = (t.in_place if placement == "in_place" else t.out_of_place).busbw_gbps
        mine = ours.get((t.op, t.size_bytes))
        value = mine.busbw_gbps if mine is not None else None
        ratio = value / theirs if value is not None and theirs > 0 else None
        within = ratio is not None and abs(ratio - 1) <= tolerance
        out.append(Agreement(t.op, t.size_bytes, placement, value, theirs, ratio, within,
                             mine.algo_label if mine is not None else None))
    return tuple(out)


# --------------------------------------------------------------------------- what went wrong on a node

# Node tests that were skipped because they do not apply here, not because something failed.
NOT_APPLICABLE = ("no_cuda", "not_requested", "single_gpu")
# A node test that raised: ``envcheck.node.run`` records ``f"{CRASHED}: {exception}"`` as its reason.
CRASHED = "crashed"

# Every key the node runner and this module hand to the presentation, each phrased in the catalogues
# (tests/test_node_view.py holds them against the string literals of the modules that write them).
PROBLEM_KEYS = ("step_failed", "peer_failed", "copy_failed", "copy_wrong", "sweep_failed", "collective_wrong",
                "collective_failed", "collective_not_run", "outlier")
NODE_TESTS = ("topology", "counters", "peer_copies", "collectives", "xid")
SKIP_REASONS = (*NOT_APPLICABLE, CRASHED)
# A size not run (CollectiveResult.skipped) and why no algorithm is known for a row (CollectiveRow.algo_reason).
SIZE_SKIPS = ("out_of_memory", "not_run")
ALGO_REASONS = ("backend_not_nccl", "no_nccl_log", "nccl_p2p", "not_in_nccl_log")
# Errors recorded as keys by the copy worker's and the sweep's runners; any other error is an exception's last line.
RUN_ERRORS = ("interrupted", "timed_out", "launch_failed", "exit_status", "ranks_failed", "no_done_event",
              "no_peer_access")
COLLECTIVE_STATUSES = ("ok", "wrong", "error", "skipped", "unverified")
OUTLIER_METRICS = ("bandwidth_gbps", "matmul_tflops")


def skip_reason(reason: str) -> tuple[str, str | None]:
    """A ``NodeSkip`` reason as (key, detail): ``crashed: OSError: x`` is (``crashed``, ``OSError: x``)."""
    head, sep, detail = reason.partition(": ")
    if head == CRASHED and sep:
        return CRASHED, detail
    return reason, None


@dataclass(frozen=True)
class NodeProblem:
    """Something about a node run a user must hear about: a key and its parameters (rendered later).

    Keys (``PROBLEM_KEYS``): ``collective_wrong`` (op, size_bytes, wrong), ``collective_failed`` (op,
    size_bytes, status), ``collective_not_run`` (op, size_bytes), ``sweep_failed`` (scope, error),
    ``copy_wrong`` (kind, method, src, dst, wrong), ``copy_failed`` (kind, method, src, dst, error),
    ``peer_failed`` (error), ``step_failed`` (test, reason, detail), ``outlier`` (gpu, metric, shortfall).
    """

    key: str
    params: tuple[tuple[str, Any], ...] = ()


def node_problems(node: Any, benches: Sequence[Any] = (), margin: float | None = None,
                  found: Sequence[Outlier] | None = None) -> tuple[NodeProblem, ...]:
    """Everything that keeps a node run from passing; empty when all its tests ran clean. A size
    skipped for memory is no problem (the sweep stops where memory does); one never reached is.
    ``found``: the outliers already derived from ``benches`` (then they are not derived again)."""
    out: list[NodeProblem] = []
    for s in node.skipped:
        if s.reason not in NOT_APPLICABLE:
            key, detail = skip_reason(s.reason)
            out.append(NodeProblem("step_failed", (("test", s.test), ("reason", key), ("detail", detail))))
    if node.peer is not None:
        if node.peer.error:
            out.append(NodeProblem("peer_failed", (("error", node.peer.error),)))
        for c in node.peer.copies:
            where = (("kind", c.kind), ("method", c.method), ("src", c.src), ("dst", c.dst))
            if c.error and c.error != "no_peer_access":
                out.append(NodeProblem("copy_failed", (*where, ("error", c.error))))
            elif c.wrong:
                out.append(NodeProblem("copy_wrong", (*where, ("wrong", c.wrong))))
    for sweep in node.collectives:
        if sweep.error:
            out.append(NodeProblem("sweep_failed", (("scope", sweep.scope), ("error", sweep.error))))
        for r in collective_rows(sweep):
            at = (("op", r.op), ("size_bytes", r.size_bytes))
            if r.status == "wrong":
                out.append(NodeProblem("collective_wrong", (*at, ("wrong", r.wrong))))
            elif r.status in ("error", "unverified"):
                out.append(NodeProblem("collective_failed", (*at, ("status", r.status))))
            elif r.status == "skipped" and not any(
                    x.skipped == "out_of_memory" for x in sweep.results if x.op == r.op and x.size_bytes == r.size_bytes):
                out.append(NodeProblem("collective_not_run", at))
    for o in (outliers(benches, outlier_margin(node, margin)) if found is None else found):
        out.append(NodeProblem("outlier", (("gpu", o.gpu), ("metric", o.metric), ("shortfall", round(o.shortfall, 4)))))
    return tuple(out)


def outlier_margin(node: Any, margin: float | None = None) -> float:
    """The margin a node run was judged with: the one given, else the run's setting, else the default."""
    return float(node.settings.get("outlier_margin", DEFAULT_OUTLIER_MARGIN)) if margin is None else margin


def ring_expectation(topology: Topology, gpus: Sequence[int]) -> float | None:
    """The bus bandwidth the links allow a collective over ``gpus``, GB/s per direction: the slowest
    hop of the ring through them in order (busbw is defined so that it reaches the bottleneck link's
    bandwidth at best, doc/PERFORMANCE.md). None when a hop's bandwidth is unknown."""
    if len(gpus) < 2:
        return None
    hops = []
    for i, a in enumerate(gpus):
        b = gpus[(i + 1) % len(gpus)]
        p = pair_path(topology, a, b)
        if p is None or p.expected_gbps is None:
            return None
        hops.append(p.expected_gbps)
    return min(hops)


def pct_of_links(row: CollectiveRow, expectation: float | None) -> float | None:
    """A busbw as a share of what the links allow (a ring's bottleneck hop)."""
    if row.busbw_gbps is None or not expectation:
        return None
    return 100 * row.busbw_gbps / expectation


# --------------------------------------------------------------------------- a node, analysed once

COUNTER_ORDER = ("pcie_replay", "pcie_replay_rollover", *("replay", "recovery", "crc_flit", "crc_data", "ecc_data"))


@dataclass(frozen=True)
class CounterRow:
    """One error counter of one GPU, summed over its links (``links``: how many were read).

    ``before`` / ``after``: the totals at the two readings around the node tests; ``delta`` and
    ``per_s``: their growth over ``interval_s``; ``boot_per_s``: the total since boot as a rate.
    ``over_limit``: a link's growth during the tests is past DCGM's limit; ``boot_over_limit``: a
    link's rate since boot is.
    """

    gpu: int
    name: str
    links: int
    before: int | None
    after: int | None
    delta: int | None
    per_s: float | None
    boot_per_s: float | None
    over_limit: bool
    boot_over_limit: bool


@dataclass(frozen=True)
class UnreadCounter:
    gpu: int
    name: str
    link: int | None
    reason: str


def counter_rows(before: CounterSnapshot | None, after: CounterSnapshot | None
                 ) -> tuple[tuple[CounterRow, ...], tuple[CounterChange, ...], tuple[UnreadCounter, ...]]:
    """Per GPU and counter, the totals and rates (rows); the per-link changes past their limit during the
    tests; the counters that could not be read, with NVML's reason."""
    last = after or before
    if last is None:
        return (), (), ()

    def totals(snap: CounterSnapshot | None) -> dict[tuple[int, str], int]:
        out: dict[tuple[int, str], int] = {}
        for c in (snap.counters if snap else ()):
            if c.value is not None:
                out[(c.gpu, c.name)] = out.get((c.gpu, c.name), 0) + c.value
        return out

    b, a = totals(before), totals(after)
    changes = counter_deltas(before, after) if before is not None and after is not None else ()
    boot = counter_rates(last)
    keys = sorted({(c.gpu, c.name) for c in last.counters if c.value is not None},
                  key=lambda k: (k[0], COUNTER_ORDER.index(k[1]) if k[1] in COUNTER_ORDER else 99, k[1]))
    rows = []
    for gpu, name in keys:
        mine = [c for c in changes if (c.gpu, c.name) == (gpu, name)]
        booted = [c for c in boot if (c.gpu, c.name) == (gpu, name)]
        delta = sum(c.delta for c in mine) if mine else None
        interval = mine[0].interval_s if mine else None
        rows.append(CounterRow(
            gpu, name, sum(1 for c in last.counters if (c.gpu, c.name) == (gpu, name) and c.value is not None),
            b.get((gpu, name)), a.get((gpu, name)), delta,
            delta / interval if delta is not None and interval else None,
            sum(c.per_s for c in booted) if booted else None,
            any(counter_over_limit(c) for c in mine), any(counter_over_limit(c) for c in booted)))
    unread = tuple(UnreadCounter(c.gpu, c.name, c.link, c.reason or "") for c in last.counters if c.value is None)
    return tuple(rows), tuple(c for c in changes if counter_over_limit(c)), unread


@dataclass(frozen=True)
class SweepAnalysis:
    """One collective sweep with its numbers: ``rows`` parallel to ``collectives.results``, each row's
    share of what the links allow (``pct_links``, against ``expectation_gbps``: the slowest hop of a
    ring through the sweep's GPUs, None where the topology is unknown, as across nodes), NCCL's
    algorithm changes, the narrowing runs and where they point."""

    collectives: Collectives
    rows: tuple[CollectiveRow, ...]
    pct_links: tuple[float | None, ...]
    expectation_gbps: float | None
    changes: tuple[tuple[str, int, str | None, str | None], ...]
    narrowing: tuple[CollectiveRow, ...]
    narrowing_pct: tuple[float | None, ...]
    conclusion: Any = None  # envcheck.analysis.fleet.Conclusion

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.op for r in self.rows))


def analyse_sweep(collectives: Collectives, topology: Topology | None = None,
                  gpus: Sequence[int] = ()) -> SweepAnalysis:
    """``gpus``: the machine's GPU of each rank, by rank (a node sweep); empty across nodes."""
    def expect(ranks: Sequence[int]) -> float | None:
        if topology is None or not gpus or any(r >= len(gpus) for r in ranks):
            return None
        return ring_expectation(topology, [gpus[r] for r in ranks])

    rows = collective_rows(collectives)
    narrow = collective_rows(collectives, narrowing=True)
    whole = expect(tuple(range(collectives.world_size)))
    return SweepAnalysis(collectives, rows, tuple(pct_of_links(r, expect(r.ranks)) for r in rows), whole,
                         algorithm_changes(rows), narrow, tuple(pct_of_links(r, expect(r.ranks)) for r in narrow),
                         collective_narrowing(collectives))


@dataclass(frozen=True)
class GpuRow:
    """One GPU of a node: its rates, its cases' tally, whether it fell behind its siblings, and, when it
    did, its condition as probed."""

    index: int | None
    name: str
    backend: str
    rates: GpuRates
    cases: int
    passed: int
    failed: int
    errors: int
    outliers: tuple[Outlier, ...] = ()
    condition: GpuCondition | None = None


@dataclass(frozen=True)
class NodeAnalysis:
    """Everything derived from one node's results (``node`` None: a fleet node whose node tests did
    not report; its GPUs still have rows). ``status``: ``pass`` when ``problems`` is empty."""

    node: Any
    gpus: tuple[GpuRow, ...]
    margin: float
    outliers: tuple[Outlier, ...]
    paths: tuple[PairPath, ...]
    disagreements: tuple[tuple[int, int, str, str], ...]
    copies: tuple[CopyRow, ...]
    sweeps: tuple[SweepAnalysis, ...]
    counters: tuple[CounterRow, ...]
    counters_over_limit: tuple[CounterChange, ...]
    counters_unread: tuple[UnreadCounter, ...]
    problems: tuple[NodeProblem, ...]
    # Seconds between the counter readings around the node tests (None: not both read, or a reboot between).
    counters_interval_s: float | None = None
    nvlinks: tuple[GpuNvlinks, ...] = ()  # per GPU of the topology, in its order

    @property
    def status(self) -> str:
        return "fail" if self.problems else "pass"

    def path(self, a: int, b: int) -> PairPath | None:
        return next((p for p in self.paths if {p.a, p.b} == {a, b}), None)

    def gpu_nvlinks(self, gpu: int) -> GpuNvlinks | None:
        return next((g for g in self.nvlinks if g.gpu == gpu), None)


def analyse_node(node: Any, benches: Sequence[Any], env: Any, margin: float | None = None) -> NodeAnalysis:
    """``benches``: the node's ``BenchAnalysis`` per GPU (their ceilings and results are reused, not
    derived again); ``env``: the environment the GPUs' conditions are read from."""
    m = outlier_margin(node, margin) if node is not None else (DEFAULT_OUTLIER_MARGIN if margin is None else margin)
    rates = [rates_from(ba.bench, ba.ceilings, ba.results) for ba in benches]
    found = outliers_from_rates(rates, m)
    rows = []
    for ba, r in zip(benches, rates, strict=True):
        mine = tuple(o for o in found if o.gpu == r.index and r.index is not None)
        t = ba.summary.overall
        cond = gpu_condition(env, r.index) if mine and env is not None and r.index is not None else None
        rows.append(GpuRow(r.index, ba.bench.device.name, ba.bench.device.backend, r, t.cases, t.passed, t.failed,
                           t.errors, mine, cond))
    if node is None:
        return NodeAnalysis(None, tuple(rows), m, found, (), (), (), (), (), (), (), ())
    topo = node.topology
    counters, over, unread = counter_rows(node.counters_before, node.counters_after)
    sweeps = tuple(analyse_sweep(c, topo, node.gpus if c.scope == "node" else ()) for c in node.collectives)
    return NodeAnalysis(
        node, tuple(rows), m, found,
        pair_paths(topo) if topo is not None else (), smi_disagreements(topo) if topo is not None else (),
        copy_rows(node.peer, topo) if node.peer is not None else (), sweeps, counters, over, unread,
        node_problems(node, (), m, found), counter_interval_s(node.counters_before, node.counters_after),
        tuple(gpu_nvlinks(g) for g in topo.gpus) if topo is not None else ())


# --------------------------------------------------------------------------- narrowing a sweep's slowness


def narrowing_steps(collectives: Collectives) -> tuple[NarrowStep, ...]:
    """The sub-group runs of a sweep as bisection steps (their busbw from the stored samples)."""
    return tuple(NarrowStep(r.ranks, r.busbw_gbps if r.status in ("ok", "unverified") else None)
                 for r in collective_rows(collectives, narrowing=True))


def collective_narrowing(collectives: Collectives) -> Conclusion | None:
    """Where a sweep's slowness comes from, re-derived from its stored sub-group runs; None when it
    ran no narrowing."""
    if not collectives.narrowing:
        return None
    lost = tuple(o.rank for o in collectives.ranks if o.status != "ok")
    if lost:
        return lost_conclusion(lost)
    hosts = collectives.hosts if len(collectives.hosts) == collectives.world_size else tuple(
        str(r) for r in range(collectives.world_size))
    margin = float(collectives.settings.get("narrow_margin", DEFAULT_NARROW_MARGIN))
    return narrowing_conclusion(narrowing_steps(collectives), tuple(range(collectives.world_size)), hosts, margin)
