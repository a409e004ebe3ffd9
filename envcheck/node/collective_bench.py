"""One collective at one size on one group of ranks, timed twice as single-GPU ops are, then checked:

1. **per call**: warm-up calls, then timed iterations back to back (a CUDA event between consecutive
   calls on a GPU, the host clock between synchronous calls on the CPU), the way nccl-tests times its
   eager loop: what a ``torch.distributed`` caller pays, Python and launch overhead included;
2. **GPU time** (GPUs only): the same call captured ``calls`` times in one CUDA graph (NCCL supports
   capture; the communicator is warm from step 1), the graph replayed back to back with a CUDA event
   between replays, each sample one replay divided by its calls: what NCCL and the links do with the
   host out of the way, the counterpart of nccl-tests' CUDA-graph mode (``-G``). The timed replays follow
   untimed ones, back to back for about ``GRAPH_WARM_US``: a burst of all_to_all at 64 MiB on 2 x H100 ran about
   10% slower for its first 2 ms, and two timed replays right after one untimed one read 223-233 GB/s busbw in
   6 of 6 rounds, against 241-242 after 50 ms of untimed replays
   (evidence/device-logs/2026-11-26_1453Z_2x-h100_diag_alltoall_ramp.log.gz). A replay must last
   long enough (``GRAPH_REPLAY_US``) for each rank's host to queue the next one before it ends, or the
   samples hold the host's gaps: ``calls`` is first sized from the per-call time and, where the GPU
   turns out much quicker than that (small sizes, where a Python caller's cost dominates), sized again
   from the GPU time and the graph captured and timed once more. Every member of the
   group captures or none replays (a graph replayed on one rank alone would wait for its peers for
   ever); a refused capture is recorded with its reason and the per-call time stands alone;
3. a separate call on freshly written inputs whose output is checked element by element against the
   exact expected values (nccl-tests' #wrong);
4. (GPUs, torch with an NCCL memory pool) the GPU time again on buffers from NCCL's own allocator, which NCCL
   registers when a graph captures a call on them and then moves without copying through its own buffers
   (``CollectiveBench._registered``): the counterpart of nccl-tests' default CUDA-graph mode, where one process
   drives every GPU and NCCL registers its plain buffers too; the plain GPU time is that of its mode with
   ``NCCL_GRAPH_REGISTER=0``. Its output is checked too, after one replay of a graph of one call.

On a GPU, L2 is kept cold as for single-GPU ops (``envcheck.bench.l2``): a size whose buffers (this
rank's input and output) could stay in L2 between calls gets ``rotation_sets`` independent sets of
buffers, every group member the same number, and the warm-up, the timed calls and the captured graph
cycle through them (a graph holds whole cycles); the first set is the one checked. Unlike single-GPU
ops, sizes of 1 MiB and less are kept cold too wherever at most ``MAX_ROTATION_SETS`` sets cover
3x L2 (from about 370 KiB of buffers on an H200): nccl-tests shifts its buffers through its largest
size at every iteration (``startColl`` in src/common.cu), so its default sweep (1 MiB .. 4 GiB) meets
cold buffers at every size, and a collective's GPU time of ~10 us is not launch-bound. Left hot,
all_to_all at 4 MiB read 5-11% above nccl-tests on four machines (half of its data is the rank's own
chunk, a local copy L2 served; evidence/device-logs/2026-11-26_0602Z_2x-h100_diag_alltoall_comparison_gpus.md),
as nccl-tests itself does when run at that size alone, with one set of buffers (115.8 against 111.1 GB/s
on 2 x H200, evidence/device-logs/2026-11-26_0748Z_2x-h200_device_node.log.gz).

The GPU time of every size joins the replays of ``CAPTURES`` graphs, captured in turn on each of the communicators
the caller passes (the sweep's own and up to ``COMMUNICATORS`` - 1 more of the same ranks, one capture on each, as
many as hold at most ``COMMUNICATOR_MEMORY_SHARE`` of a GPU's memory, each made afresh by
``torch.distributed.new_group``: NCCL's own buffers and connections); the samples keep each capture's replays
together, and ``envcheck.analysis.collectives.gpu_time_us`` joins them (the median of the captures where they share
one allocation). Which communicator a call goes through can set its pace: on 2 x H100, all_to_all at 64 MiB read
224-244 GB/s busbw on eighteen communicators (three processes of six), most holding within 1% over six rounds and
some switching between 224 and 240, while neither the capture, the buffers, a skew between the ranks' starts, an
idle GPU nor NVML's queries moved it (evidence/device-logs/2026-11-26_1125Z_2x-h100_diag_communicators.log.gz and the
1106Z-1124Z logs beside it). nccl-tests makes one communicator per process, so each of its runs is one such draw,
as one communicator's number is envcheck's luck. Pooling does not settle every run, though: a short burst moves
between the two paces on one communicator too (nccl-tests' 100-call cycles in one process read 224-241, its
4000-call ones 241-244 in all 21, evidence/device-logs/2026-11-26_1257Z_2x-h100_diag_alltoall_draws.log.gz), and in 3
of 8 node runs at 1309Z-1326Z 11-13 of the 24 replays here ran at the slow pace, and the size read 232.6-234.9
GB/s. Those runs had no warm-up; with it, one of the six node runs at 1458Z-1511Z had 12 of its 24 replays at the
slow pace (233.0 GB/s), the other five none; with twelve communicators, one capture each, 0-3 of 12 ran slow in
each of five node runs at 1724Z-1736Z, and the median of the captures read 241.4-242.3 in all five. Some
communicators hold the slow pace through bursts of 250-600 ms
(evidence/device-logs/2026-11-26_1512Z_2x-h100_diag_alltoall_ramp_split.log.gz: 3 of 16, the first made by the process
group and the rest split from it, held it in over half of their windows past a burst's first 2 ms; in the process
right after, none of 16 made afresh, _fresh.log: too few to tell the two kinds apart). The report flags a size
whose replays ran at two paces (``envcheck.analysis.collectives.pace_spread``).
A size whose buffers exceed 3x L2 (one set) also makes each capture on a fresh allocation (``allocations``),
the previous one freed (the cache emptied) first, with the warm-up and eager calls repeated on each; the last
allocation is the one checked. Where a buffer lands moved reduce_scatter at 4 GiB by up to 14% on 2 x H100 while
one allocation held within 1%; nccl-tests allocates once per process,
so each of its runs is one such draw too. Smaller sizes time their eager calls once, on the sweep's
communicator and their rotating sets, and capture again on the same buffers.

Runs inside a torchrun worker (``envcheck.node.collective_worker``) with a process group already up.
The same code drives NCCL on GPUs and gloo on the CPU: only the device of the tensors and the clock
differ. Every rank of the group must call :func:`measure` with the same arguments in the same
order, as with any collective; decisions that could differ between ranks (out of memory) are agreed
on with a tiny collective first, so one rank never skips a size the others run.

Inputs hold small integers (exact in float32 for any rank count envcheck meets), so every expected
output is exact and the check is equality, not a tolerance:

- rank r's element i of an input is ``r + 1 + i % 7`` (all_reduce, broadcast, all_gather,
  reduce_scatter, i counted over the rank's whole input);
- all_to_all: rank r's chunk for rank j, element k, is ``8 (r n + j) + 1 + k % 7``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from envcheck.analysis.node import layout
from envcheck.bench.failure import one_line
from envcheck.bench.l2 import DEFAULT_L2_BYTES, ROTATE_L2_MULTIPLE, rotation_sets

GRAPH_REPLAY_US = 1000.0  # a replay should last about this long: calls per graph = this / time per call
GRAPH_WARM_US = 50_000.0  # untimed replays back to back for about this long before the timed ones of a capture
# At most this many calls in one graph (1 MiB collectives take ~12 us on NVLink), before the count is
# rounded up to whole cycles through the sets of buffers (up to l2.MAX_ROTATION_SETS calls).
MAX_GRAPH_CALLS = 256
CHUNK_ELEMS = 1 << 25  # 128 MiB of float32 per step when writing inputs and checking outputs
MEMORY_HEADROOM = 0.85  # share of the free memory a size may use (NCCL's own buffers need the rest)
MiB = 1 << 20
# The GPU time pools the replays of this many graph captures, spread over the communicators the caller passes.
CAPTURES = 12
# How many communicators of the same ranks the node sweep spreads them over, one capture on each: which
# communicator a call goes through moved all_to_all 64 MiB by up to 8% on 2 x H100, while most held within 1%
# (evidence/device-logs/2026-11-26_1125Z_2x-h100_diag_communicators.log.gz). A communicator's slow pace mostly holds
# for all its bursts: of 96 bursts of 300 ms on 48 communicators with NCCL's defaults, 13 ran over 2% below their
# process's median, on 8 communicators, 5 of them slow in both their bursts (the ramp diagnostic of 2026-11-26 on
# evidence/device-logs/2026-11-26_1713Z_2x-h100_diag_alltoall_nccl_settings.log.gz). So the communicators, not the
# captures, are the independent draws, and twelve of them, one capture each, leave the GPU time less to one
# communicator's luck than six of two each. (Neither the SM clock, at 1980 MHz in slow and fast windows alike, nor
# NVLink replays or recoveries, none, went with the slow pace: _1711Z_2x-h100_diag_alltoall_clocks_split.log.)...
COMMUNICATORS = CAPTURES
# ...as long as the extra ones hold at most this share of a GPU's memory: each took 868-870 MiB of an H100 on two
# GPUs, connected for all_reduce and all_to_all (evidence/device-logs/2026-11-26_1128Z_2x-h100_comm_memory.log.gz), so
# eleven take 12% of one, and NCCL's point-to-point buffers grow with the peers.
COMMUNICATOR_MEMORY_SHARE = 0.15
# A size whose buffers exceed 3x L2 (one set, no rotation) makes each capture on a fresh allocation, freed and
# allocated again in turn: where a buffer lands moves all_gather and reduce_scatter at 1-4 GiB by up to 14% on
# 2 x H100, while one allocation holds within 1% (2026-11-26 0924Z,
# evidence/device-logs/2026-11-26_0924Z_2x-h100_diag_large.log.gz), so one allocation's number is luck.
ALLOCATIONS = CAPTURES
ALLOCATION_WARMUP = 2  # warm-up calls on each allocation after the first (the communicator is warm)
# The per-call time is what a loop of calls costs its caller: a CUDA event marks every PER_CALL_LOOP calls
# below PER_CALL_LOOP_BELOW, not every call. An event recorded between every call adds its own host cost to each:
# all_reduce 1 MiB on 2 x H200 read 110.8 us a call with an event between calls and 50.5 in a plain loop
# (68.8 and 46.2 cycling through 16 sets of buffers, evidence/device-logs/2026-11-28_2006Z_4x-h200_collective_causes.log.gz).
# From 64 MiB a call keeps the GPU busy for over 150 us and the host runs ahead (64 MiB: 255.2 us in the loop, 248.0
# replayed in a graph), so an event between calls costs nothing there and each call is a sample.
PER_CALL_LOOP = 10
PER_CALL_LOOP_BELOW = 64 * (1 << 20)
# The GPU time on NCCL-registered buffers pools this many captures, on as many of the communicators.
REGISTERED_CAPTURES = 3


@dataclass(frozen=True)
class Measured:
    """What one rank saw of one (op, size, group): its samples, its wrong count, or why not."""

    op: str
    size_bytes: int
    count: int
    ranks: tuple[int, ...]
    samples_us: tuple[float, ...] = ()
    method: str = "cuda_events"
    wrong: int | None = None
    error: str | None = None
    skipped: str | None = None
    need_bytes: int | None = None
    free_bytes: int | None = None
    gpu_samples_us: tuple[float, ...] = ()  # one per graph replay, already divided by gpu_calls
    gpu_calls: int = 1
    gpu_reason: str | None = None  # a model.node.GPU_TIME_REASONS key when there is no GPU time
    gpu_error: str | None = None
    rotation_sets: int = 1  # sets of buffers cycled through to keep L2 cold (1: none)
    allocations: int = 1  # fresh allocations the timed calls were spread over (1: one)
    captures: int = 1  # graphs captured afresh whose replays gpu_samples_us pools (1: one)
    communicators: int = 1  # communicators those graphs were captured on (1: the one given)
    # The GPU time again on buffers from NCCL's allocator (torch's NCCL memory pool), which NCCL registers when a
    # graph captures a call on them: zero-copy transfers (see CollectiveBench._registered).
    reg_samples_us: tuple[float, ...] = ()
    reg_calls: int = 1
    reg_captures: int = 1
    reg_wrong: int | None = None
    reg_reason: str | None = None  # a model.node.REGISTERED_REASONS key when there is no such time
    reg_error: str | None = None


def whole_cycles(calls: int, sets: int) -> int:
    """``calls`` rounded up to whole cycles through ``sets`` sets of buffers: every replay of a graph
    then visits each set the same number of times, in the same order."""
    return max(1, math.ceil(calls / sets)) * sets


def warm_replays(replay_us: float) -> int:
    """Untimed replays of a graph, after the one that measured ``replay_us``, that keep the GPUs busy for about
    GRAPH_WARM_US before the timed ones (none where a replay lasts that long)."""
    return max(0, math.ceil(GRAPH_WARM_US / max(replay_us, 1.0)) - 1)


def calls_per_graph(per_call_us: float) -> int:
    """How many calls one graph holds: enough for a replay of about GRAPH_REPLAY_US (so the replay's
    own launch is hidden behind the previous one), at least 1 and at most MAX_GRAPH_CALLS."""
    if per_call_us <= 0:
        return MAX_GRAPH_CALLS
    return max(1, min(MAX_GRAPH_CALLS, math.ceil(GRAPH_REPLAY_US / per_call_us)))


def allocations_for(buffer_bytes: int, l2_bytes: int | None, sets: int) -> int:
    """How many fresh allocations a size's timed calls are spread over on a GPU: ``ALLOCATIONS`` where one set
    of buffers (``sets`` 1) exceeds 3x L2 (smaller sizes already rotate through as many sets as cover 3x L2),
    else 1. Every member of a group gets the same count from the same arguments."""
    if sets > 1 or buffer_bytes < ROTATE_L2_MULTIPLE * (l2_bytes or DEFAULT_L2_BYTES):
        return 1
    return ALLOCATIONS


def need_bytes(op: str, size_bytes: int, n: int, element_bytes: int = 4) -> int:
    """Device memory one rank needs for ``op`` at size S: its input and output buffers, plus one
    chunk of expected values and one of indices for the check."""
    return buffer_bytes(op, size_bytes, n, element_bytes) + CHUNK_ELEMS * (element_bytes + 8)


def buffer_bytes(op: str, size_bytes: int, n: int, element_bytes: int = 4) -> int:
    """One rank's input and output buffers for ``op`` at size S (one buffer where the call is in place):
    the working set L2 could keep between calls."""
    lay = layout(op, size_bytes, n, element_bytes)
    inplace = op in ("all_reduce", "broadcast")
    return (lay.send if inplace else lay.send + lay.recv) * element_bytes


class CollectiveBench:
    """Measures collectives for one rank. ``dist`` is ``torch.distributed``; ``torch`` the module."""

    def __init__(self, torch: Any, dist: Any, device: str, rank: int, world_size: int) -> None:
        self.torch = torch
        self.dist = dist
        self.device = device  # "cuda:<i>" or "cpu"
        self.rank = rank
        self.world_size = world_size
        self.cuda = device.startswith("cuda")
        self.l2_bytes: int | None = None  # None: rotation_sets assumes an H100's
        if self.cuda:
            from envcheck.bench.timer import CudaEventClock

            self.l2_bytes = int(getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 0)) \
                or None

            self.clock: Any = CudaEventClock()
        else:
            from envcheck.bench.timer import HostClock

            self.clock = HostClock()
        self.method = "cuda_events" if self.cuda else "host_clock"
        self._nccl_allocator: Any = None  # torch's NCCL allocator, once use_registered_buffers found it
        self._registered_error: str | None = None

    # ----------------------------------------------------------------- agreement

    def _min_over(self, value: int, group: Any) -> int:
        """The smallest ``value`` over the group (every member calls it)."""
        t = self.torch.tensor([value], dtype=self.torch.int64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MIN, group=group)
        return int(t.item())

    def free_bytes(self) -> int | None:
        if not self.cuda:
            return None
        free, _total = self.torch.cuda.mem_get_info(self.torch.device(self.device))
        return int(free)

    # ----------------------------------------------------------------- inputs and expected outputs

    def _fill(self, t: Any, value_at: Any) -> None:
        """Write ``value_at(indices)`` into the flat tensor ``t``, one chunk at a time."""
        n = t.numel()
        for lo in range(0, n, CHUNK_ELEMS):
            hi = min(n, lo + CHUNK_ELEMS)
            idx = self.torch.arange(lo, hi, dtype=self.torch.int64, device=self.device)
            t[lo:hi] = value_at(idx).to(t.dtype)

    def _count_wrong(self, t: Any, value_at: Any) -> int:
        n = t.numel()
        wrong = 0
        for lo in range(0, n, CHUNK_ELEMS):
            hi = min(n, lo + CHUNK_ELEMS)
            idx = self.torch.arange(lo, hi, dtype=self.torch.int64, device=self.device)
            wrong += int((t[lo:hi] != value_at(idx).to(t.dtype)).sum().item())
        return wrong

    def _patterns(self, op: str, n: int, me: int, per: int) -> tuple[Any, Any]:
        """(input value at index, expected output value at index) for this rank (index ``me`` in the group)."""
        tri = n * (n + 1) // 2
        if op == "all_reduce":
            return (lambda i: me + 1 + i % 7), (lambda i: tri + n * (i % 7))
        if op == "broadcast":
            return (lambda i: me + 1 + i % 7), (lambda i: 1 + i % 7)
        if op == "all_gather":
            return (lambda i: me + 1 + i % 7), (lambda i: (i // per) + 1 + (i % per) % 7)
        if op == "reduce_scatter":
            return (lambda i: me + 1 + i % 7), (lambda i: tri + n * ((me * per + i) % 7))
        if op == "all_to_all":
            return ((lambda i: 8 * (me * n + i // per) + 1 + (i % per) % 7),
                    (lambda i: 8 * ((i // per) * n + me) + 1 + (i % per) % 7))
        raise ValueError(f"unknown collective {op!r}")

    def more_communicators(self, ranks: tuple[int, ...], ops: tuple[str, ...]) -> tuple[Any, ...]:
        """Up to ``COMMUNICATORS`` - 1 more communicators of ``ranks`` (every rank of the world calls it, as
        ``new_group`` requires), each connected now by one small call of each op in ``ops`` rather than inside a
        timed size; the making stops, the last one freed, where the extra ones would hold more than
        ``COMMUNICATOR_MEMORY_SHARE`` of some member's GPU memory. None off a GPU (gloo: one communicator)."""
        if not self.cuda:
            return ()
        torch = self.torch
        before, total = (int(x) for x in torch.cuda.mem_get_info(torch.device(self.device)))
        made: list[Any] = []
        for _ in range(COMMUNICATORS - 1):
            group = self.dist.new_group(list(ranks))
            for op in ops:
                lay = layout(op, 1024 * len(ranks), len(ranks), 4)
                send = torch.empty(lay.send, dtype=torch.float32, device=self.device).fill_(1.0)
                recv = None if op in ("all_reduce", "broadcast") else \
                    torch.empty(lay.recv, dtype=torch.float32, device=self.device)
                self._call(op, send, recv, group, ranks[0])
            torch.cuda.synchronize()
            held = before - (self.free_bytes() or 0)
            if not self._min_over(int(held <= COMMUNICATOR_MEMORY_SHARE * total), None):
                self.dist.destroy_process_group(group)
                break
            made.append(group)
        return tuple(made)

    # ----------------------------------------------------------------- the call

    def _call(self, op: str, send: Any, recv: Any, group: Any, root: int) -> None:
        d = self.dist
        if op == "all_reduce":
            d.all_reduce(send, group=group)
        elif op == "broadcast":
            d.broadcast(send, src=root, group=group)
        elif op == "all_gather":
            # torch 2.13 renames the single-tensor forms; 2.11 (the lent GPUs) has only the old names.
            (getattr(d, "all_gather_single", None) or d.all_gather_into_tensor)(recv, send, group=group)
        elif op == "reduce_scatter":
            (getattr(d, "reduce_scatter_single", None) or d.reduce_scatter_tensor)(recv, send, group=group)
        elif op == "all_to_all":
            d.all_to_all_single(recv, send, group=group)
        else:
            raise ValueError(f"unknown collective {op!r}")

    def _capture(self, op: str, sets: list[tuple[Any, Any]], group: Any, root: int, calls: int,
                 warm_call: bool = True) -> tuple[Any, str | None]:
        """(graph, error): ``calls`` calls (whole cycles through ``sets``) captured in one CUDA graph, None with
        the error where any member of the group failed to capture (every member calls it and agrees)."""
        torch = self.torch
        graph = None
        error = None
        try:
            if warm_call:  # torch's recipe for capture: one call on a side stream first (lazy state settles there)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    self._call(op, *sets[0], group, root)
                torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            # thread_local: ProcessGroupNCCL's watchdog thread keeps querying its events during the
            # capture; in the default global mode those queries would invalidate it.
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                for i in range(calls):
                    self._call(op, *sets[i % len(sets)], group, root)
        except Exception as e:  # noqa: BLE001 - a refused capture is a recorded reason, not a crash
            error = one_line(e)
            graph = None
        if not self._min_over(int(graph is not None), group):
            if graph is not None:
                graph.reset()
            return None, error or "another rank's capture failed"
        return graph, None

    def _gpu_time(self, op: str, sets: list[tuple[Any, Any]], group: Any, root: int, calls: int,
                  replays: int) -> tuple[tuple[float, ...], str | None, str | None]:
        """(samples per call, reason, error) of ``calls`` calls (whole cycles through the ``sets`` of
        (input, output) buffers) captured in one CUDA graph and replayed ``replays`` times back to back.
        Every member calls it; none replays unless all captured."""
        torch = self.torch
        graph, error = self._capture(op, sets, group, root, calls)
        if graph is None:
            return (), "capture_failed", error
        try:
            # Untimed replays first, back to back for about GRAPH_WARM_US (the group's longest estimate of a
            # replay decides how many, so every member replays as often): on an idle GPU the first replay's
            # start event fires before its launch, and a burst of all_to_all can start at a slower pace.
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            longest = -self._min_over(-max(1, math.ceil(start.elapsed_time(end) * 1e3)), group)
            for _ in range(warm_replays(longest)):
                graph.replay()
            events = [torch.cuda.Event(enable_timing=True) for _ in range(replays + 1)]
            events[0].record()
            for i in range(replays):
                graph.replay()
                events[i + 1].record()
            torch.cuda.synchronize()
            samples = tuple(max(a.elapsed_time(b) * 1e3 / calls, 1e-3) for a, b in zip(events[:-1], events[1:],
                                                                                      strict=True))
        finally:
            graph.reset()
        return samples, None, None

    def use_registered_buffers(self) -> str | None:
        """Make the GPU time on NCCL-registered buffers possible: torch's NCCL memory pool (ncclMemAlloc) of the
        default process group. None where it is ready, else why not (torch or NCCL too old, no GPU)."""
        if not self.cuda:
            self._registered_error = "no GPU"
            return "no_cuda_graphs"
        try:
            backend = self.dist.distributed_c10d._get_default_group()._get_backend(self.torch.device(self.device))
            self._nccl_allocator = backend.mem_allocator
            self.torch.cuda.MemPool(self._nccl_allocator)  # one made and dropped: the API is there
        except Exception as e:  # noqa: BLE001 - an older torch or NCCL: the plain GPU time stands alone
            self._nccl_allocator = None
            self._registered_error = one_line(e)
            return "no_nccl_allocator"
        return None

    def _registered(self, op: str, size_bytes: int, n: int, lay: Any, values: tuple[Any, Any], comms: tuple[Any, ...],
                    root: int, calls: int, replays: int, free: int | None, need: int) -> dict[str, Any]:
        """The ``Measured`` fields of the GPU time on buffers from NCCL's allocator (a memory pool of its own, made
        for this size and dropped after it): ``REGISTERED_CAPTURES`` graphs of ``calls`` calls, one on each
        communicator in turn, ``replays`` timed replays each, then a graph of one call replayed on fresh inputs
        and its output checked.

        NCCL registers a buffer a captured call uses where its peers can map it (NCCL_GRAPH_REGISTER, on by
        default): buffers from ncclMemAlloc can be shared with the other processes, those of torch's caching
        allocator (cudaMalloc) cannot, so between processes only these get NCCL's zero-copy transfers. nccl-tests
        drives every GPU from one process, where NCCL registers its plain buffers too: its CUDA-graph mode (-G) is
        the counterpart of this time, its eager loop and -G with NCCL_GRAPH_REGISTER=0 that of the plain one (on 2 x
        H200, all_gather 256 MiB read 309.1 GB/s busbw in -G, 245.7 with NCCL_GRAPH_REGISTER=0 and 243.4 eager;
        broadcast 4 MiB in place on 4 x H200 106.8 in -G, 168.1 unregistered: registration is not always faster,
        evidence/device-logs/2026-11-28_2006Z_4x-h200_collective_causes_nccl-tests.txt.gz)."""
        torch = self.torch
        value_in, value_out = values
        pool = torch.cuda.MemPool(self._nccl_allocator)
        sets: list[tuple[Any, Any]] = []
        graph = None
        try:
            with torch.cuda.use_mem_pool(pool):
                first = self._allocate(op, lay, value_in, comms[0])
                if first is None:
                    return {"reg_reason": "out_of_memory"}
                sets = [first] + self._more_sets(op, size_bytes, n, *first, free, need, comms[0])
            calls = whole_cycles(calls, len(sets))
            samples: tuple[float, ...] = ()
            for k in range(REGISTERED_CAPTURES):
                got, _why, err = self._gpu_time(op, sets, comms[k % len(comms)], root, calls, replays)
                if not got:
                    return {"reg_reason": "capture_failed", "reg_error": err}
                samples += got
            # The check: one call captured (nothing runs), fresh inputs written, the output poisoned, one replay.
            send, recv = sets[0]
            graph, err = self._capture(op, sets[:1], comms[0], root, 1, warm_call=False)
            if graph is None:
                return {"reg_reason": "capture_failed", "reg_error": err}
            self._fill(send, value_in)
            if recv is not None:
                recv.fill_(-1.0)
            graph.replay()
            torch.cuda.synchronize()
            wrong = self._count_wrong(recv if recv is not None else send, value_out)
            return {"reg_samples_us": samples, "reg_calls": calls, "reg_captures": REGISTERED_CAPTURES,
                    "reg_wrong": wrong}
        finally:
            if graph is not None:
                graph.reset()
            sets, first, send, recv, graph = [], None, None, None, None  # noqa: F841 - released before the pool
            torch.cuda.synchronize()
            del pool
            torch.cuda.empty_cache()

    def _more_sets(self, op: str, size_bytes: int, n: int, send: Any, recv: Any, free: int | None, need: int,
                   group: Any) -> list[tuple[Any, Any]]:
        """The extra sets of (input, output) buffers that keep L2 cold on a GPU (``envcheck.bench.l2``),
        copies of the first set's input; as many on every member of the group (the fewest any member
        can hold), none on the CPU or where a member cannot hold them all."""
        if not self.cuda:
            return []
        spare = None if free is None else MEMORY_HEADROOM * free - need
        mine = rotation_sets(buffer_bytes(op, size_bytes, n), self.l2_bytes, memory_bound=True, spare_bytes=spare,
                             min_bytes=0)
        count = self._min_over(mine, group)
        extra: list[tuple[Any, Any]] = []
        try:
            for _ in range(count - 1):
                extra.append((send.clone(), None if recv is None else self.torch.empty_like(recv)))
            held = 1
        except RuntimeError:  # out of memory after all (another process took some): no rotation
            extra, held = [], 0
        if not self._min_over(held, group):
            return []
        return extra

    def _allocate(self, op: str, lay: Any, value_in: Any, group: Any) -> tuple[Any, Any] | None:
        """A fresh (input, output) pair for ``op`` (no output where the call is in place), the input
        written; None on every member of the group where any member ran out of memory."""
        torch = self.torch
        try:
            send = torch.empty(lay.send, dtype=torch.float32, device=self.device)
            recv = None if op in ("all_reduce", "broadcast") else \
                torch.empty(lay.recv, dtype=torch.float32, device=self.device)
            allocated = 1
        except RuntimeError:  # torch.cuda.OutOfMemoryError is a RuntimeError
            send = recv = None
            allocated = 0
        if self.cuda and not self._min_over(allocated, group):
            return None
        if send is None:  # the CPU: nothing to agree on, the error is this rank's
            raise MemoryError(f"out of memory allocating {lay.send} float32 elements")
        self._fill(send, value_in)
        return send, recv

    def _timed(self, op: str, sets: list[tuple[Any, Any]], group: Any, root: int, warmup: int, iters: int,
               graph: bool, calls: int | None, replays: int, stride: int = 1) -> tuple[
                   tuple[float, ...], tuple[float, ...], int, str | None, str | None]:
        """(per-call samples, GPU samples, calls per graph, reason, error) of ``op`` on ``sets``: ``warmup``
        calls, ``iters`` x ``stride`` eager calls timed back to back (a mark every ``stride`` calls, each sample
        the mean call between two marks), then (on a GPU, with ``graph``) ``replays`` replays of a graph of
        ``calls`` calls (sized here from the eager calls when None, so ``iters`` is then at least 1)."""
        for i in range(warmup):
            self._call(op, *sets[i % len(sets)], group, root)
        self.clock.synchronize()
        # Marks between calls, as nccl-tests times its loop: the samples add up to the whole loop, so their
        # mean is its time per call (the host runs ahead of the GPU on large sizes; on small ones the samples
        # hold the launch cost a real caller's loop pays, and no more: PER_CALL_LOOP).
        marks = [self.clock.mark()]
        for i in range(warmup, warmup + iters * stride):  # the cycle goes on from the warm-up's
            self._call(op, *sets[i % len(sets)], group, root)
            if (i - warmup + 1) % stride == 0:
                marks.append(self.clock.mark())
        self.clock.synchronize()
        samples = tuple(max(self.clock.elapsed_us(a, b) / stride, 1e-3)
                        for a, b in zip(marks[:-1], marks[1:], strict=True))
        if not (self.cuda and graph):
            return samples, (), 1, ("not_captured" if self.cuda else "no_cuda_graphs"), None
        if calls is not None:
            gpu, reason, error = self._gpu_time(op, sets, group, root, calls, replays)
            return samples, gpu, calls, reason, error
        # The calls per graph must be the same on every rank: the group's largest per-call time decides.
        slowest = -self._min_over(-round(sum(samples) / len(samples)), group)
        calls = whole_cycles(calls_per_graph(float(slowest)), len(sets))
        gpu, reason, error = self._gpu_time(op, sets, group, root, calls, replays)
        if gpu:  # every member has samples or none has (the capture is agreed on)
            more = whole_cycles(-self._min_over(-calls_per_graph(statistics.median(gpu)), group), len(sets))
            if more > 2 * calls:  # the replays lasted under half of GRAPH_REPLAY_US: host gaps
                again = self._gpu_time(op, sets, group, root, more, replays)
                if again[0]:  # a refused second capture keeps the first graph's samples
                    calls, (gpu, reason, error) = more, again
        return samples, gpu, calls, reason, error

    def measure(self, op: str, size_bytes: int, ranks: tuple[int, ...], group: Any, warmup: int,
                iters: int, graph: bool = True, more_groups: tuple[Any, ...] = ()) -> Measured:
        """Measure ``op`` at nccl-tests' size ``size_bytes`` on the group of global ``ranks`` (this
        rank among them): per call, then (on a GPU, with ``graph``) the GPU time of graph replays, the
        captures taken in turn on ``group`` and ``more_groups`` (other communicators of the same ranks).
        Errors inside the call are caught and returned; after one, the process group may be unusable
        and the caller stops."""
        n = len(ranks)
        me = ranks.index(self.rank)
        lay = layout(op, size_bytes, n, 4)
        base = Measured(op, lay.size_bytes, lay.count, ranks, method=self.method)
        need = need_bytes(op, size_bytes, n)
        free = self.free_bytes()
        if self.cuda:
            ok = self._min_over(int(free is not None and need <= MEMORY_HEADROOM * free), group)
            if not ok:
                least = self._min_over(free or 0, group)
                return _replace(base, skipped="out_of_memory", need_bytes=need, free_bytes=least)
        torch = self.torch
        first: tuple[Any, Any] | None = None
        sets: list[tuple[Any, Any]] = []
        send = recv = None
        try:
            root = ranks[0]
            value_in, value_out = self._patterns(op, n, me, lay.count)
            first = self._allocate(op, lay, value_in, group)
            if first is None:
                return _replace(base, skipped="out_of_memory", need_bytes=need, free_bytes=free)
            sets = [first] + self._more_sets(op, size_bytes, n, *first, free, need, group)
            allocations = allocations_for(buffer_bytes(op, size_bytes, n), self.l2_bytes, len(sets)) if self.cuda \
                else 1
            # Rounds: one graph captured afresh in each (GPU time), the communicators taken in turn, on a fresh
            # allocation in each where there are several; the eager calls split among the allocations, or all
            # in the first round.
            comms = (group, *more_groups) if self.cuda else (group,)
            stride = PER_CALL_LOOP if self.cuda and lay.size_bytes < PER_CALL_LOOP_BELOW else 1
            rounds = CAPTURES if self.cuda and (graph or allocations > 1) else 1
            per = math.ceil(iters / rounds)
            samples: tuple[float, ...] = ()
            gpu: tuple[float, ...] = ()
            calls: int | None = None
            reason = error = None
            timed_graph = graph
            captures = 0
            for k in range(rounds):
                if k and allocations == 1 and not timed_graph:  # no graph: nothing left to time
                    break
                if k and allocations > 1:  # the previous buffers go back to the driver first: the new land elsewhere
                    sets, first = [], None
                    torch.cuda.empty_cache()
                    first = self._allocate(op, lay, value_in, group)
                    if first is None:  # another process took the memory meanwhile: the size is not measured
                        return _replace(base, skipped="out_of_memory", need_bytes=need, free_bytes=self.free_bytes())
                    sets = [first]
                if allocations > 1:
                    warm, eager_iters = (warmup if k == 0 else min(warmup, ALLOCATION_WARMUP)), per
                else:
                    warm, eager_iters = (warmup, iters) if k == 0 else (0, 0)
                eager, replays, calls, why, err = self._timed(op, sets, comms[k % len(comms)], root, warm,
                                                              eager_iters, timed_graph, calls, per, stride)
                samples += eager
                if replays:
                    gpu += replays
                    captures += 1
                elif k == 0 or timed_graph:  # no GPU time, or a later capture refused (every member agreed):
                    gpu, timed_graph, reason, error = (), False, why, err  # the per-call time stands alone
            send, recv = first
            # The check runs on fresh inputs (timed all_reduce iterations summed in place), in the first set
            # of the last allocation.
            self._fill(send, value_in)
            if recv is not None:
                recv.fill_(-1.0)  # poison: an element the collective never wrote shows as wrong
            self._call(op, send, recv, group, root)
            self.clock.synchronize()
            wrong = self._count_wrong(recv if recv is not None else send, value_out)
            result = _replace(base, samples_us=samples, wrong=wrong, gpu_samples_us=gpu,
                              gpu_calls=calls or 1, gpu_reason=None if gpu else reason,
                              gpu_error=None if gpu else error, rotation_sets=len(sets), allocations=allocations,
                              captures=captures if gpu else 1, communicators=min(captures, len(comms)) if gpu else 1)
            if not (self.cuda and graph):
                return result
            if not gpu:  # no graph on plain buffers: none on registered ones either
                return _replace(result, reg_reason="not_captured")
            if self._nccl_allocator is None:
                return _replace(result, reg_reason="no_nccl_allocator", reg_error=self._registered_error)
            first, sets, send, recv = None, [], None, None  # the plain buffers go back before the pool's are made
            torch.cuda.empty_cache()
            try:
                registered = self._registered(op, size_bytes, n, lay, (value_in, value_out), comms, root, calls or 1,
                                              math.ceil(iters / REGISTERED_CAPTURES), free, need)
            except Exception as e:  # noqa: BLE001 - the plain result stands; the registered one failed, and says how
                registered = {"reg_reason": "error", "reg_error": one_line(e)}
            return _replace(result, **registered)
        except Exception as e:  # noqa: BLE001 - a failed collective is a result, reported by the caller
            return _replace(base, error=one_line(e))
        finally:
            first, sets, send, recv = None, [], None, None  # every buffer released before the cache is emptied
            if self.cuda:
                torch.cuda.empty_cache()


def _replace(m: Measured, **changes: Any) -> Measured:
    from dataclasses import replace

    return replace(m, **changes)
