"""One node's raw results beyond the per-GPU suites: the links between its GPUs, copies over them,
collectives across them, and the error counters that say whether the links are healthy.

Everything here is what was found or measured, as values or the reasons they are missing: no
bandwidths derived from the samples, no percentages, no verdicts (``envcheck.analysis.node``
computes those). Units live in the field names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envcheck.model.bench import OMIT_DEFAULT, Timing
from envcheck.model.facts import Fact, missing

# --------------------------------------------------------------------------- topology

# NVML's nvmlGpuTopologyLevel_t, as the names ``nvidia-smi topo -m`` prints for them.
PCIE_LEVELS = ("internal", "single", "multiple", "hostbridge", "node", "system")
# What the far end of an NVLink is (nvmlDeviceGetNvLinkRemoteDeviceType).
REMOTE_TYPES = ("gpu", "ibmnpu", "switch", "unknown")
# NVLink error counters (nvmlNvLinkErrorCounter_t), each counted since the driver loaded.
NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data", "ecc_data")


@dataclass(frozen=True)
class NvLink:
    """One NVLink of one GPU (``nvidia-smi nvlink -s`` / ``--status``).

    ``speed_mbps``: per direction, MB/s (NVML's NVLINK_GET_SPEED field: 26562 on an H200);
    ``speed_source`` says where it came from (``nvml`` or ``nvidia-smi``).
    """

    link: int
    active: bool
    version: Fact = field(default_factory=lambda: missing("not probed"))
    speed_mbps: Fact = field(default_factory=lambda: missing("not probed"))
    speed_source: str | None = None
    remote_type: Fact = field(default_factory=lambda: missing("not probed"))  # one of REMOTE_TYPES
    remote_pci_bus_id: Fact = field(default_factory=lambda: missing("not probed"))


@dataclass(frozen=True)
class GpuLinks:
    """One GPU's links to the rest of the machine: its PCIe link and its NVLinks."""

    index: int
    uuid: Fact = field(default_factory=lambda: missing("not probed"))
    pci_bus_id: Fact = field(default_factory=lambda: missing("not probed"))
    pcie_gen: Fact = field(default_factory=lambda: missing("not probed"))
    pcie_gen_max: Fact = field(default_factory=lambda: missing("not probed"))
    pcie_width: Fact = field(default_factory=lambda: missing("not probed"))
    pcie_width_max: Fact = field(default_factory=lambda: missing("not probed"))
    numa_node: Fact = field(default_factory=lambda: missing("not probed"))
    nvlink_count: Fact = field(default_factory=lambda: missing("not probed"))  # links the GPU has, active or not
    nvlinks: tuple[NvLink, ...] = ()
    lost: str | None = None  # the GPU could not be queried at all


@dataclass(frozen=True)
class GpuPair:
    """What NVML says of two GPUs together (``nvidia-smi topo -m`` and ``topo -p2p``).

    ``pcie_level``: the closest common PCIe ancestor, one of PCIE_LEVELS. ``p2p``: capability ->
    NVML's status name (``ok``, ``not_supported``, ...) for ``read``, ``write``, ``nvlink``,
    ``atomics``.
    """

    a: int
    b: int
    pcie_level: Fact = field(default_factory=lambda: missing("not probed"))
    p2p: dict[str, Fact] = field(default_factory=dict)


@dataclass(frozen=True)
class TopoCell:
    """One cell of ``nvidia-smi topo -m``: the connection between GPU ``a`` and GPU ``b`` as printed."""

    a: int
    b: int
    text: str  # NV18, SYS, NODE, PHB, PXB, PIX


@dataclass(frozen=True)
class Topology:
    """GPUs, their links and their pairs; ``smi_cells`` is ``nvidia-smi topo -m`` as a cross-check."""

    gpus: tuple[GpuLinks, ...] = ()
    pairs: tuple[GpuPair, ...] = ()
    smi_cells: tuple[TopoCell, ...] = ()
    smi_reason: str | None = None  # why nvidia-smi topo -m gave nothing
    reason: str | None = None  # why NVML gave nothing (then gpus and pairs are empty)


# --------------------------------------------------------------------------- error counters


@dataclass(frozen=True)
class Counter:
    """One error counter's reading. ``link`` is None for per-GPU counters (PCIe replays)."""

    gpu: int
    name: str  # pcie_replay, pcie_replay_rollover, or an NVLINK_COUNTERS name
    value: int | None = None
    link: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class CounterSnapshot:
    """Every error counter at one moment; ``uptime_s`` (/proc/uptime) dates it against boot."""

    uptime_s: float | None
    counters: tuple[Counter, ...] = ()
    uptime_reason: str | None = None


@dataclass(frozen=True)
class XidEvent:
    """One NVIDIA Xid line from the kernel log (``NVRM: Xid (PCI:0000:00:06): 79, pid=..., ...``)."""

    xid: int
    pci_bus_id: str | None
    line: str  # the kernel's own text, trimmed
    uptime_s: float | None = None  # kernel timestamp, seconds since boot


@dataclass(frozen=True)
class XidScan:
    """Xid events since boot, and where they were read from (``/dev/kmsg``, ``journalctl -k``, ``dmesg``).

    ``source`` None means no source was readable; ``reasons`` says why each one failed.
    """

    source: str | None
    events: tuple[XidEvent, ...] = ()
    reasons: tuple[str, ...] = ()


# --------------------------------------------------------------------------- copies

COPY_KINDS = ("h2d", "d2h", "d2d")  # d2d: between two different GPUs
COPY_METHODS = ("copy_engine", "sm_kernel")


@dataclass(frozen=True)
class Copy:
    """One copy measurement: ``bytes_per_direction`` moved from ``src`` to ``dst`` per call.

    ``src`` / ``dst`` are GPU indices, None for host memory. ``bidirectional``: ``dst`` -> ``src``
    ran at the same time with the same size, so the link carried twice the bytes (the timing
    covers both). ``wrong``: elements that differed from the source after the copy (None when not
    verified). ``error``: why it was not measured.
    """

    kind: str
    method: str
    src: int | None
    dst: int | None
    bytes_per_direction: int
    bidirectional: bool = False
    timing: Timing | None = None
    wrong: int | None = None
    error: str | None = None
    pinned: bool | None = None  # host buffer pinned (h2d, d2h)

    def __post_init__(self) -> None:
        if self.kind not in COPY_KINDS:
            raise ValueError(f"unknown copy kind {self.kind!r}")
        if self.method not in COPY_METHODS:
            raise ValueError(f"unknown copy method {self.method!r}")
        if (self.src is None) != (self.kind == "h2d") or (self.dst is None) != (self.kind == "d2h"):
            raise ValueError(f"a {self.kind} copy has src={self.src!r}, dst={self.dst!r}")
        if self.kind == "d2d" and self.src == self.dst:
            raise ValueError("a d2d copy is between two different GPUs")


@dataclass(frozen=True)
class PeerAccess:
    """Whether CUDA lets GPU ``a`` map GPU ``b``'s memory (``torch.cuda.can_device_access_peer``)."""

    a: int
    b: int
    allowed: bool


@dataclass(frozen=True)
class PeerCopies:
    """The copy matrices of one node; ``error`` says why the worker gave nothing or stopped early."""

    copies: tuple[Copy, ...] = ()
    access: tuple[PeerAccess, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    duration_s: float | None = None


# --------------------------------------------------------------------------- collectives

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
# Why a collective has no GPU time: ``no_cuda_graphs`` (gloo on the CPU: CUDA graphs exist only on
# GPUs), ``capture_failed`` (NCCL or torch refused the graph capture; ``gpu_error`` says how),
# ``not_captured`` (a check or a size that did not run got as far as the capture).
GPU_TIME_REASONS = ("no_cuda_graphs", "capture_failed", "not_captured")
# Why a collective has no GPU time on NCCL-registered buffers: those above, ``no_nccl_allocator`` (torch or NCCL
# too old for torch's NCCL memory pool), ``out_of_memory``, ``error`` (the registered calls raised: the message in
# ``registered_error``).
REGISTERED_REASONS = (*GPU_TIME_REASONS, "no_nccl_allocator", "out_of_memory", "error")


@dataclass(frozen=True)
class RankTiming:
    """One rank's samples of one collective: one per timed iteration (CUDA events on a GPU)."""

    rank: int
    timing: Timing


@dataclass(frozen=True)
class CollectiveResult:
    """One collective at one size on one group of ranks.

    ``size_bytes`` is nccl-tests' "size" column (S in doc/PERFORMANCE.md): the whole buffer for
    all_reduce and broadcast, the gathered output for all_gather, the input to scatter for
    reduce_scatter, each rank's whole send buffer for all_to_all. ``count``: nccl-tests' "count"
    column (elements per rank for all_gather / reduce_scatter / all_to_all). ``wrong``: elements
    that differed from the expected result, summed over ranks (nccl-tests' #wrong); None when the
    check could not run. ``skipped``: a key saying why the size was not run (``out_of_memory``:
    ``need_bytes`` per rank against the smallest ``free_bytes`` of the group; ``not_run``: planned,
    never reached), with no timings.

    Two times per call, as for single-GPU ops: ``timings`` holds each rank's *per-call* samples
    (eager ``torch.distributed`` calls back to back, a CUDA event between consecutive calls, or the
    host clock on the CPU: what a Python caller pays, host overhead included); ``gpu_timings`` the
    *GPU time* (the calls captured in a CUDA graph and replayed, each sample one replay divided by
    its calls: what NCCL and the links do, launch gaps removed). Without a GPU time,
    ``gpu_reason`` says why (``GPU_TIME_REASONS``) and ``gpu_error`` holds the capture's exception.
    ``rotation_sets``: how many sets of buffers each rank cycled through to keep L2 cold (1: one set,
    L2 not kept cold: the CPU, a size above 3x L2 or of 1 MiB and less, or no memory to spare; reports
    before 2026-11-26 always used one). ``allocations``: how many fresh allocations of its buffers
    each rank spread the timed calls over, freeing one before the next (1: one; a GPU size above 3x L2 gets
    ``collective_bench.ALLOCATIONS``, as where a buffer lands moves large sizes by up to 14%; earlier
    reports always used one). ``captures``: how many graphs, each captured afresh, the ``gpu_timings`` pool
    the replays of, and ``communicators``: over how many communicators of the same ranks those graphs were
    captured in turn (1 and 1 in reports before 2026-11-26 11:34 UTC; on a GPU since, ``collective_bench.CAPTURES``
    over ``COMMUNICATORS``, as which communicator a call goes through moved all_to_all 64 MiB by up to 8%).
    ``registered_timings``: the GPU time again on buffers from NCCL's allocator (torch's NCCL memory pool), which
    NCCL registers when a graph captures a call on them, for zero-copy transfers (``collective_bench._registered``),
    pooled over ``registered_captures`` graphs; ``registered_wrong`` its output check; without it
    ``registered_reason`` (``REGISTERED_REASONS``) and ``registered_error`` say why. Reports before 2026-11-28 21:00
    UTC have none, and no reason.
    """

    op: str
    size_bytes: int
    count: int
    dtype: str
    ranks: tuple[int, ...]
    timings: tuple[RankTiming, ...] = ()
    wrong: int | None = None
    error: str | None = None
    skipped: str | None = None
    need_bytes: int | None = None
    free_bytes: int | None = None
    absent_ranks: tuple[int, ...] = ()  # member ranks that reported nothing for this call
    gpu_timings: tuple[RankTiming, ...] = ()
    gpu_reason: str | None = None
    gpu_error: str | None = None
    rotation_sets: int = field(default=1, metadata={OMIT_DEFAULT: True})
    allocations: int = field(default=1, metadata={OMIT_DEFAULT: True})
    captures: int = field(default=1, metadata={OMIT_DEFAULT: True})
    communicators: int = field(default=1, metadata={OMIT_DEFAULT: True})
    registered_timings: tuple[RankTiming, ...] = ()
    registered_captures: int = field(default=1, metadata={OMIT_DEFAULT: True})
    registered_wrong: int | None = None
    registered_reason: str | None = None
    registered_error: str | None = None

    def __post_init__(self) -> None:
        if self.registered_captures < 1:
            raise ValueError(f"registered_captures must be at least 1, not {self.registered_captures}")
        if self.registered_reason is not None and self.registered_reason not in REGISTERED_REASONS:
            raise ValueError(f"unknown reason for no registered GPU time {self.registered_reason!r}")
        if self.rotation_sets < 1:
            raise ValueError(f"rotation_sets must be at least 1, not {self.rotation_sets}")
        if self.allocations < 1:
            raise ValueError(f"allocations must be at least 1, not {self.allocations}")
        if self.captures < 1:
            raise ValueError(f"captures must be at least 1, not {self.captures}")
        if not 1 <= self.communicators <= self.captures:
            raise ValueError(f"communicators must be 1 to captures ({self.captures}), not {self.communicators}")
        if self.op not in COLLECTIVES:
            raise ValueError(f"unknown collective {self.op!r}")
        if self.gpu_reason is not None and self.gpu_reason not in GPU_TIME_REASONS:
            raise ValueError(f"unknown reason for no GPU time {self.gpu_reason!r}")


@dataclass(frozen=True)
class AlgoChoice:
    """One ``NCCL INFO AllReduce: 1073741824 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}`` line.

    ``nccl_op`` and ``nccl_bytes`` are as NCCL printed them (its bytes are count x element size,
    per rank for AllGather / ReduceScatter); ``nranks`` and ``comm`` come from the call's
    ``opCount`` line just before it in the same process, when NCCL_DEBUG_SUBSYS has COLL.
    """

    rank: int
    nccl_op: str
    nccl_bytes: int
    algo: str
    proto: str
    channel_lo: int | None = None
    channel_hi: int | None = None
    nranks: int | None = None
    comm: str | None = None


@dataclass(frozen=True)
class RankOutcome:
    """How one rank of a launched job ended: ``ok``, ``error`` (with its message) or ``missing`` (no word)."""

    rank: int
    status: str
    host: str | None = None
    local_rank: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Launch:
    """One launched job (torchrun, a worker, nccl-tests): what ran and how it ended."""

    argv: tuple[str, ...]
    returncode: int | None
    timeout_s: float
    wall_s: float
    timed_out: bool = False
    interrupted: bool = False
    error: str | None = None  # it could not start
    stderr_tail: str = ""

    @property
    def ended_early(self) -> str | None:
        """Why the launch ended before what it ran did: ``interrupted`` (Ctrl-C, a signal), ``timed_out`` or
        ``launch_failed`` (it could not start); None when it ran to its own end (whatever its exit status)."""
        if self.interrupted:
            return "interrupted"
        if self.timed_out:
            return "timed_out"
        if self.error:
            return "launch_failed"
        return None


@dataclass(frozen=True)
class Collectives:
    """A collective sweep over one group of processes (``scope``: ``node`` or ``world``).

    ``hosts``: the host of each rank, by rank. ``narrowing``: the same collective re-run on
    sub-groups (halves, pairs) to find what makes it slow; the choice of each sub-group follows
    from the results before it (``envcheck.analysis.fleet.next_narrowing_group``).
    """

    scope: str
    backend: str  # nccl | gloo
    world_size: int
    hosts: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    results: tuple[CollectiveResult, ...] = ()
    narrowing: tuple[CollectiveResult, ...] = ()
    choices: tuple[AlgoChoice, ...] = ()
    choices_reason: str | None = None  # why no algorithm is known (gloo, no NCCL log)
    nccl_version: str | None = None
    ranks: tuple[RankOutcome, ...] = ()
    launch: Launch | None = None
    error: str | None = None


# --------------------------------------------------------------------------- the node


@dataclass(frozen=True)
class NodeSkip:
    """A node test that did not run (``peer_copies``, ``collectives``, ``xid``...) and why."""

    test: str
    reason: str


@dataclass(frozen=True)
class Node:
    """Everything envcheck found and measured across one machine's GPUs.

    ``gpus``: the GPU indices the run selected. ``counters_before`` / ``counters_after`` bracket
    the node tests, so errors the tests themselves provoked show as a delta.
    """

    host: str
    gpus: tuple[int, ...] = ()
    topology: Topology | None = None
    counters_before: CounterSnapshot | None = None
    counters_after: CounterSnapshot | None = None
    xid: XidScan | None = None
    peer: PeerCopies | None = None
    collectives: tuple[Collectives, ...] = ()
    skipped: tuple[NodeSkip, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    started: str | None = None
    duration_s: float | None = None
