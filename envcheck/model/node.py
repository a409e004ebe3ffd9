"""One node's raw results beyond the per-GPU suites: its GPUs' links, copies over them, collectives across them
and the links' error counters; values or the reasons they are missing."""

from __future__ import annotations

from dataclasses import dataclass, field

from envcheck.model.bench import OMIT_DEFAULT, Timing
from envcheck.model.facts import Fact, check_in, missing
from envcheck.outside_json import Int, Json

# NVML's nvmlGpuTopologyLevel_t, as the names ``nvidia-smi topo -m`` prints for them.
PCIE_LEVELS = ("internal", "single", "multiple", "hostbridge", "node", "system")
# What the far end of an NVLink is (nvmlDeviceGetNvLinkRemoteDeviceType).
REMOTE_TYPES = ("gpu", "ibmnpu", "switch", "unknown")
# NVLink error counters (nvmlNvLinkErrorCounter_t), each counted since the driver loaded.
NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data", "ecc_data")


@dataclass(frozen=True)
class NvLink:
    """One NVLink of one GPU (``nvidia-smi nvlink -s``); ``speed_mbps`` per direction, from ``speed_source``."""

    link: Int
    active: bool
    version: Fact = field(default_factory=lambda: missing("not probed"))
    speed_mbps: Fact = field(default_factory=lambda: missing("not probed"))
    speed_source: str | None = None
    remote_type: Fact = field(default_factory=lambda: missing("not probed"))  # one of REMOTE_TYPES
    remote_pci_bus_id: Fact = field(default_factory=lambda: missing("not probed"))


@dataclass(frozen=True)
class GpuLinks:
    """One GPU's links to the rest of the machine: its PCIe link and its NVLinks."""

    index: Int
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
    """Two GPUs as NVML sees them (``nvidia-smi topo -m``, ``topo -p2p``): their closest common PCIe ancestor
    (``PCIE_LEVELS``) and NVML's status name per P2P capability (read, write, nvlink, atomics)."""

    a: Int
    b: Int
    pcie_level: Fact = field(default_factory=lambda: missing("not probed"))
    p2p: dict[str, Fact] = field(default_factory=dict)


@dataclass(frozen=True)
class TopoCell:
    """One cell of ``nvidia-smi topo -m``: the connection between GPU ``a`` and GPU ``b`` as printed."""

    a: Int
    b: Int
    text: str  # NV18, SYS, NODE, PHB, PXB, PIX


@dataclass(frozen=True)
class Topology:
    """GPUs, their links and their pairs; ``smi_cells`` is ``nvidia-smi topo -m`` as a cross-check."""

    gpus: tuple[GpuLinks, ...] = ()
    pairs: tuple[GpuPair, ...] = ()
    smi_cells: tuple[TopoCell, ...] = ()
    smi_reason: str | None = None  # why nvidia-smi topo -m gave nothing
    reason: str | None = None  # why NVML gave nothing (then gpus and pairs are empty)


@dataclass(frozen=True)
class Counter:
    """One error counter's reading. ``link`` is None for per-GPU counters (PCIe replays)."""

    gpu: Int
    name: str  # pcie_replay, pcie_replay_rollover, or an NVLINK_COUNTERS name
    value: Int | None = None
    link: Int | None = None
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

    xid: Int
    pci_bus_id: str | None
    line: str  # the kernel's own text, trimmed
    uptime_s: float | None = None  # kernel timestamp, seconds since boot


@dataclass(frozen=True)
class XidScan:
    """Xid events since boot and where they were read (``/dev/kmsg``, ``journalctl -k``, ``dmesg``; None: nowhere)."""

    source: str | None
    events: tuple[XidEvent, ...] = ()
    reasons: tuple[str, ...] = ()


COPY_KINDS = ("h2d", "d2h", "d2d")  # d2d: between two different GPUs
COPY_METHODS = ("copy_engine", "sm_kernel")


@dataclass(frozen=True)
class Copy:
    """One copy of ``bytes_per_direction`` per call from ``src`` to ``dst`` (GPU indices, None: host memory);
    ``bidirectional``: the reverse copy ran at once; ``wrong``: elements that differed."""

    kind: str
    method: str
    src: Int | None
    dst: Int | None
    bytes_per_direction: Int
    bidirectional: bool = False
    timing: Timing | None = None
    wrong: Int | None = None
    error: str | None = None
    pinned: bool | None = None  # host buffer pinned (h2d, d2h)

    def __post_init__(self) -> None:
        check_in("copy kind", self.kind, COPY_KINDS)
        check_in("copy method", self.method, COPY_METHODS)
        if (self.src is None) != (self.kind == "h2d") or (self.dst is None) != (self.kind == "d2h"):
            raise ValueError(f"a {self.kind} copy has src={self.src!r}, dst={self.dst!r}")
        if self.kind == "d2d" and self.src == self.dst:
            raise ValueError("a d2d copy is between two different GPUs")


@dataclass(frozen=True)
class PeerAccess:
    """Whether CUDA lets GPU ``a`` map GPU ``b``'s memory (``torch.cuda.can_device_access_peer``)."""

    a: Int
    b: Int
    allowed: bool


@dataclass(frozen=True)
class PeerCopies:
    """The copy matrices of one node; ``error`` says why the worker gave nothing or stopped early."""

    copies: tuple[Copy, ...] = ()
    access: tuple[PeerAccess, ...] = ()
    settings: dict[str, Json] = field(default_factory=dict)
    error: str | None = None
    duration_s: float | None = None


COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
# Why a collective has no GPU time (graph replays): gloo on the CPU, a refused capture, or none reached.
GPU_TIME_REASONS = ("no_cuda_graphs", "capture_failed", "not_captured")
# Why none on NCCL-registered buffers: those, torch or NCCL too old for its memory pool, no memory, or an error.
REGISTERED_REASONS = (*GPU_TIME_REASONS, "no_nccl_allocator", "out_of_memory", "error")


@dataclass(frozen=True)
class RankTiming:
    """One rank's samples of one collective: one per timed iteration (CUDA events on a GPU)."""

    rank: Int
    timing: Timing


@dataclass(frozen=True)
class CollectiveResult:
    """One collective at one size on a group of ranks: ``timings`` (eager calls, per rank) and ``gpu_timings``
    (graph replays; else ``gpu_reason``), again on NCCL-registered buffers (``registered_*``)."""

    op: str
    size_bytes: Int
    count: Int
    dtype: str
    ranks: tuple[Int, ...]
    timings: tuple[RankTiming, ...] = ()
    wrong: Int | None = None
    error: str | None = None
    skipped: str | None = None
    need_bytes: Int | None = None
    free_bytes: Int | None = None
    absent_ranks: tuple[Int, ...] = ()  # member ranks that reported nothing for this call
    gpu_timings: tuple[RankTiming, ...] = ()
    gpu_reason: str | None = None
    gpu_error: str | None = None
    rotation_sets: Int = field(default=1, metadata={OMIT_DEFAULT: True})
    allocations: Int = field(default=1, metadata={OMIT_DEFAULT: True})
    captures: Int = field(default=1, metadata={OMIT_DEFAULT: True})
    communicators: Int = field(default=1, metadata={OMIT_DEFAULT: True})
    registered_timings: tuple[RankTiming, ...] = ()
    registered_captures: Int = field(default=1, metadata={OMIT_DEFAULT: True})
    registered_wrong: Int | None = None
    registered_reason: str | None = None
    registered_error: str | None = None

    def __post_init__(self) -> None:
        for name in ("rotation_sets", "allocations", "captures", "registered_captures"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if not 1 <= self.communicators <= self.captures:
            raise ValueError(f"communicators must be 1 to captures ({self.captures}), not {self.communicators}")
        check_in("collective", self.op, COLLECTIVES)
        check_in("reason for no registered GPU time", self.registered_reason, (None, *REGISTERED_REASONS))
        check_in("reason for no GPU time", self.gpu_reason, (None, *GPU_TIME_REASONS))


@dataclass(frozen=True)
class AlgoChoice:
    """One ``NCCL INFO AllReduce: 1073741824 Bytes -> Algo RING proto SIMPLE ...`` line; ``nranks`` and ``comm``
    from the call's ``opCount`` line before it."""

    rank: Int
    nccl_op: str
    nccl_bytes: Int
    algo: str
    proto: str
    channel_lo: Int | None = None
    channel_hi: Int | None = None
    nranks: Int | None = None
    comm: str | None = None


@dataclass(frozen=True)
class RankOutcome:
    """How one rank of a launched job ended: ``ok``, ``error`` (with its message) or ``missing`` (no word)."""

    rank: Int
    status: str
    host: str | None = None
    local_rank: Int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Launch:
    """One launched job (torchrun, a worker, nccl-tests): what ran and how it ended."""

    argv: tuple[str, ...]
    returncode: Int | None
    timeout_s: float
    wall_s: float
    timed_out: bool = False
    interrupted: bool = False
    error: str | None = None  # it could not start
    stderr_tail: str = ""

    @property
    def ended_early(self) -> str | None:
        """Why it ended before what it ran did (``interrupted``, ``timed_out``, ``launch_failed``); None: it did not."""
        causes = (("interrupted", self.interrupted), ("timed_out", self.timed_out), ("launch_failed", self.error))
        return next((cause for cause, happened in causes if happened), None)


@dataclass(frozen=True)
class Collectives:
    """A collective sweep over one group of processes; ``narrowing``: re-runs on sub-groups."""

    scope: str
    backend: str  # nccl | gloo
    world_size: Int
    hosts: tuple[str, ...] = ()
    settings: dict[str, Json] = field(default_factory=dict)
    results: tuple[CollectiveResult, ...] = ()
    narrowing: tuple[CollectiveResult, ...] = ()
    choices: tuple[AlgoChoice, ...] = ()
    choices_reason: str | None = None  # why no algorithm is known (gloo, no NCCL log)
    nccl_version: str | None = None
    ranks: tuple[RankOutcome, ...] = ()
    launch: Launch | None = None
    error: str | None = None


@dataclass(frozen=True)
class NodeSkip:
    """A node test that did not run (``peer_copies``, ``collectives``, ``xid``...) and why."""

    test: str
    reason: str


@dataclass(frozen=True)
class Node:
    """Everything found and measured across one machine's ``gpus``; the counters bracket the node tests."""

    host: str
    gpus: tuple[Int, ...] = ()
    topology: Topology | None = None
    counters_before: CounterSnapshot | None = None
    counters_after: CounterSnapshot | None = None
    xid: XidScan | None = None
    peer: PeerCopies | None = None
    collectives: tuple[Collectives, ...] = ()
    skipped: tuple[NodeSkip, ...] = ()
    settings: dict[str, Json] = field(default_factory=dict)
    started: str | None = None
    duration_s: float | None = None
