"""One collective at one size on one group of ranks (NCCL on GPUs, gloo on the CPU), timed per call and as GPU time
in CUDA graphs pooled over communicators and allocations, with L2 kept cold, then checked element by element
(nccl-tests' #wrong) on inputs of small integers whose outputs are exact (``_patterns``); docs/node.md says why.
Every rank of the group calls :func:`measure` alike: what could differ between ranks is agreed by a collective."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.analysis.collectives import layout
from envcheck.bench.l2 import DEFAULT_L2_BYTES, ROTATE_L2_MULTIPLE, rotation_sets
from envcheck.bench.timer import make_clock
from envcheck.errors import one_line

if TYPE_CHECKING:
    import torch

    from envcheck.analysis.collectives import Layout

Buffers = tuple["torch.Tensor", "torch.Tensor | None"]  # (input, output; None where the call is in place)
ValueAt = Callable[["torch.Tensor"], "torch.Tensor"]  # index -> the value an element holds

GRAPH_REPLAY_US = 1000.0  # a replay should last about this long: calls per graph = this / time per call
GRAPH_WARM_US = 50_000.0  # untimed replays back to back for about this long before the timed ones of a capture
MAX_GRAPH_CALLS = 256  # then rounded up to whole cycles through the sets of buffers
CHUNK_ELEMS = 1 << 25  # 128 MiB of float32 per step when writing inputs and checking outputs
MEMORY_HEADROOM = 0.85  # share of the free memory a size may use (NCCL's own buffers need the rest)
CAPTURES = 12  # graph captures the GPU time pools: the communicators, not the captures, are the draws
COMMUNICATORS = CAPTURES  # one capture on each, as long as the extra ones hold at most this share of memory:
COMMUNICATOR_MEMORY_SHARE = 0.15  # about 870 MiB each on an H100
ALLOCATIONS = CAPTURES  # where a large size's buffers land moved it by up to 14%: one allocation is luck
ALLOCATION_WARMUP = 2  # warm-up calls on each allocation after the first (the communicator is warm)
# An event between every eager call adds its own host cost to each; from 64 MiB the host runs ahead anyway.
PER_CALL_LOOP = 10
PER_CALL_LOOP_BELOW = 64 * (1 << 20)
REGISTERED_CAPTURES = 3  # captures of the GPU time on NCCL-registered buffers, on as many communicators
IN_PLACE = ("all_reduce", "broadcast")  # no output buffer


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
    reg_samples_us: tuple[float, ...] = ()
    reg_calls: int = 1
    reg_captures: int = 1
    reg_wrong: int | None = None
    reg_reason: str | None = None  # a model.node.REGISTERED_REASONS key when there is no such time
    reg_error: str | None = None


def whole_cycles(calls: int, sets: int) -> int:
    """``calls`` rounded up to whole cycles through ``sets`` sets of buffers."""
    return max(1, math.ceil(calls / sets)) * sets


def warm_replays(replay_us: float) -> int:
    """Untimed replays, after the one that measured ``replay_us``, that fill about GRAPH_WARM_US."""
    return max(0, math.ceil(GRAPH_WARM_US / max(replay_us, 1.0)) - 1)


def calls_per_graph(per_call_us: float) -> int:
    """Calls in one graph: a replay of about GRAPH_REPLAY_US hides the next replay's launch."""
    if per_call_us <= 0:
        return MAX_GRAPH_CALLS
    return max(1, min(MAX_GRAPH_CALLS, math.ceil(GRAPH_REPLAY_US / per_call_us)))


def allocations_for(buffer_bytes: int, l2_bytes: int | None, sets: int) -> int:
    """Fresh allocations a size's timed calls are spread over: ``ALLOCATIONS`` where one set of buffers
    exceeds 3x L2 (smaller sizes rotate through sets instead), else 1; the same on every rank."""
    if sets > 1 or buffer_bytes < ROTATE_L2_MULTIPLE * (l2_bytes or DEFAULT_L2_BYTES):
        return 1
    return ALLOCATIONS


def need_bytes(op: str, size_bytes: int, n: int, element_bytes: int = 4) -> int:
    """Device memory one rank needs: its buffers, and a chunk of expected values and indices for the check."""
    return buffer_bytes(op, size_bytes, n, element_bytes) + CHUNK_ELEMS * (element_bytes + 8)


def buffer_bytes(op: str, size_bytes: int, n: int, element_bytes: int = 4) -> int:
    """One rank's input and output buffers (one where the call is in place): what L2 could keep."""
    lay = layout(op, size_bytes, n, element_bytes)
    return (lay.send if op in IN_PLACE else lay.send + lay.recv) * element_bytes


def call(dist: ModuleType, op: str, send: torch.Tensor, recv: torch.Tensor | None, group: object = None,
         root: int = 0) -> None:
    """One call of ``op`` on ``group`` (None: the default group; the cross-check loop's too)."""
    if op == "all_reduce":
        dist.all_reduce(send, group=group)
    elif op == "broadcast":
        dist.broadcast(send, src=root, group=group)
    elif op == "all_gather":
        # torch 2.13 renames the single-tensor forms; 2.11 has only the old names.
        (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(recv, send, group=group)
    elif op == "reduce_scatter":
        (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(recv, send, group=group)
    elif op == "all_to_all":
        dist.all_to_all_single(recv, send, group=group)
    else:
        raise ValueError(f"unknown collective {op!r}")


class CollectiveBench:
    """Measures collectives for one rank. ``dist`` is ``torch.distributed``; ``torch`` the module."""

    def __init__(self, torch: ModuleType, dist: ModuleType, device: str, rank: int, world_size: int) -> None:
        self.torch = torch
        self.dist = dist
        self.device = device  # "cuda:<i>" or "cpu"
        self.rank = rank
        self.world_size = world_size
        self.cuda = device.startswith("cuda")
        self.l2_bytes: int | None = None  # None: rotation_sets assumes an H100's
        if self.cuda:
            self.l2_bytes = int(getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 0)) \
                or None
        self.clock = make_clock("cuda" if self.cuda else "cpu")
        self.method = "cuda_events" if self.cuda else "host_clock"
        self._nccl_allocator: object = None  # torch's NCCL allocator, once use_registered_buffers found it
        self._registered_error: str | None = None

    def _min_over(self, value: int, group: object) -> int:
        """The smallest ``value`` over the group (every member calls it)."""
        t = self.torch.tensor([value], dtype=self.torch.int64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MIN, group=group)
        return int(t.item())

    def free_bytes(self) -> int | None:
        if not self.cuda:
            return None
        free, _total = self.torch.cuda.mem_get_info(self.torch.device(self.device))
        return int(free)

    def _chunks(self, t: torch.Tensor, value_at: ValueAt) -> Iterator[tuple[slice, torch.Tensor]]:
        """Each chunk of the flat tensor ``t`` and the values ``value_at`` gives its indices."""
        n = t.numel()
        for lo in range(0, n, CHUNK_ELEMS):
            idx = self.torch.arange(lo, min(n, lo + CHUNK_ELEMS), dtype=self.torch.int64, device=self.device)
            yield slice(lo, lo + len(idx)), value_at(idx).to(t.dtype)

    def _fill(self, t: torch.Tensor, value_at: ValueAt) -> None:
        for part, values in self._chunks(t, value_at):
            t[part] = values

    def _count_wrong(self, t: torch.Tensor, value_at: ValueAt) -> int:
        return sum(int((t[part] != values).sum().item()) for part, values in self._chunks(t, value_at))

    def _check(self, send: torch.Tensor, recv: torch.Tensor | None, values: tuple[ValueAt, ValueAt],
               run: Callable[[], object]) -> int:
        """``run()`` on fresh inputs and a poisoned output (an element never written shows); the wrong count."""
        self._fill(send, values[0])
        if recv is not None:
            recv.fill_(-1.0)
        run()
        self.clock.synchronize()
        return self._count_wrong(recv if recv is not None else send, values[1])

    def _empty(self, elements: int) -> torch.Tensor:
        return self.torch.empty(elements, dtype=self.torch.float32, device=self.device)

    def _patterns(self, op: str, n: int, me: int, per: int) -> tuple[ValueAt, ValueAt]:
        """(input value at index, expected output value at index) for group member ``me``."""
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

    def more_communicators(self, ranks: tuple[int, ...], ops: tuple[str, ...]) -> tuple[object, ...]:
        """Up to ``COMMUNICATORS`` - 1 more communicators of ``ranks`` (every rank calls it), each connected now by
        a small call of each op, while they hold at most ``COMMUNICATOR_MEMORY_SHARE`` of every member's GPU."""
        if not self.cuda:
            return ()
        torch = self.torch
        before, total = (int(x) for x in torch.cuda.mem_get_info(torch.device(self.device)))
        made: list[object] = []
        for _ in range(COMMUNICATORS - 1):
            group = self.dist.new_group(list(ranks))
            for op in ops:
                lay = layout(op, 1024 * len(ranks), len(ranks), 4)
                recv = None if op in IN_PLACE else self._empty(lay.recv)
                self._call(op, self._empty(lay.send).fill_(1.0), recv, group, ranks[0])
            torch.cuda.synchronize()
            held = before - (self.free_bytes() or 0)
            if not self._min_over(int(held <= COMMUNICATOR_MEMORY_SHARE * total), None):
                self.dist.destroy_process_group(group)
                break
            made.append(group)
        return tuple(made)

    def _call(self, op: str, send: torch.Tensor, recv: torch.Tensor | None, group: object, root: int) -> None:
        call(self.dist, op, send, recv, group, root)  # one method: a test hook slows a rank here

    def _capture(self, op: str, sets: list[Buffers], group: object, root: int, calls: int,
                 warm_call: bool = True) -> tuple[torch.cuda.CUDAGraph | None, str | None]:
        """(graph, error): ``calls`` calls cycling through ``sets`` captured in one CUDA graph; None with the
        error where any member of the group failed to capture (every member calls it)."""
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
            # thread_local: ProcessGroupNCCL's watchdog queries its events during the capture, which would
            # invalidate a global-mode capture.
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

    def _gpu_time(self, op: str, sets: list[Buffers], group: object, root: int, calls: int,
                  replays: int) -> tuple[tuple[float, ...], str | None, str | None]:
        """(samples per call, reason, error) of a graph of ``calls`` calls replayed ``replays`` times back to back.
        Every member calls it; none replays unless all captured."""
        torch = self.torch
        graph, error = self._capture(op, sets, group, root, calls)
        if graph is None:
            return (), "capture_failed", error
        try:
            # Untimed replays first (the group's longest replay decides how many, the same on every member): a
            # burst of all_to_all can start at a slower pace.
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
        """Find torch's NCCL memory pool (ncclMemAlloc) of the default group; None where ready, else why not."""
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

    def _registered(self, op: str, size_bytes: int, n: int, lay: Layout, values: tuple[ValueAt, ValueAt],
                    comms: tuple[object, ...], root: int, calls: int, replays: int, free: int | None,
                    need: int) -> dict[str, object]:
        """The ``Measured`` fields of the GPU time on buffers from NCCL's allocator (NCCL registers them, as
        nccl-tests' ``-G`` does its own): ``REGISTERED_CAPTURES`` graphs on the communicators in turn, then a check."""
        torch = self.torch
        pool = torch.cuda.MemPool(self._nccl_allocator)
        sets: list[Buffers] = []
        graph = None
        try:
            with torch.cuda.use_mem_pool(pool):
                first = self._allocate(op, lay, values[0], comms[0])
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
            # The check: one call captured (nothing runs), then replayed once on fresh inputs.
            graph, err = self._capture(op, sets[:1], comms[0], root, 1, warm_call=False)
            if graph is None:
                return {"reg_reason": "capture_failed", "reg_error": err}
            wrong = self._check(*sets[0], values, graph.replay)
            return {"reg_samples_us": samples, "reg_calls": calls, "reg_captures": REGISTERED_CAPTURES,
                    "reg_wrong": wrong}
        finally:
            if graph is not None:
                graph.reset()
            sets, first, graph = [], None, None  # noqa: F841 - released before the pool
            torch.cuda.synchronize()
            del pool
            torch.cuda.empty_cache()

    def _more_sets(self, op: str, size_bytes: int, n: int, send: torch.Tensor, recv: torch.Tensor | None,
                   free: int | None, need: int, group: object) -> list[Buffers]:
        """The extra sets of buffers that keep L2 cold on a GPU (copies of the first set's input), as many on every
        member of the group; none where a member cannot hold them all."""
        if not self.cuda:
            return []
        spare = None if free is None else MEMORY_HEADROOM * free - need
        mine = rotation_sets(buffer_bytes(op, size_bytes, n), self.l2_bytes, memory_bound=True, spare_bytes=spare,
                             min_bytes=0)
        count = self._min_over(mine, group)
        extra: list[Buffers] | None
        try:
            extra = [(send.clone(), None if recv is None else self.torch.empty_like(recv)) for _ in range(count - 1)]
        except RuntimeError:  # out of memory after all (another process took some): no rotation
            extra = None
        held = self._min_over(int(extra is not None), group)  # every member asks, whatever it holds
        return extra if held and extra is not None else []

    def _allocate(self, op: str, lay: Layout, value_in: ValueAt, group: object) -> Buffers | None:
        """A fresh (input, output) pair, the input written; None on every member where any ran out of memory."""
        try:
            send, recv = self._empty(lay.send), None if op in IN_PLACE else self._empty(lay.recv)
        except RuntimeError:  # torch.cuda.OutOfMemoryError is a RuntimeError
            send = recv = None
        if self.cuda and not self._min_over(int(send is not None), group):
            return None
        if send is None:  # the CPU: nothing to agree on, the error is this rank's
            raise MemoryError(f"out of memory allocating {lay.send} float32 elements")
        self._fill(send, value_in)
        return send, recv

    def _timed(self, op: str, sets: list[Buffers], group: object, root: int, warmup: int, iters: int,
               graph: bool, calls: int | None, replays: int, stride: int = 1) -> tuple[
                   tuple[float, ...], tuple[float, ...], int, str | None, str | None]:
        """(per-call samples, GPU samples, calls per graph, reason, error) of ``op`` on ``sets``: ``warmup`` calls,
        ``iters`` marks ``stride`` eager calls apart, then (on a GPU, with ``graph``) ``replays`` replays of a graph
        of ``calls`` calls (None: sized here from the eager calls)."""
        for i in range(warmup):
            self._call(op, *sets[i % len(sets)], group, root)
        self.clock.synchronize()
        # As nccl-tests times its loop: the samples add up to the whole loop, their mean is its time per call.
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

    def measure(self, op: str, size_bytes: int, ranks: tuple[int, ...], group: object, warmup: int,
                iters: int, graph: bool = True, more_groups: tuple[object, ...] = ()) -> Measured:
        """``op`` at nccl-tests' size ``size_bytes`` on the group of global ``ranks`` (this rank among them), the
        captures taken in turn on ``group`` and ``more_groups`` (communicators of the same ranks). An error is
        returned; after one the process group may be unusable and the caller stops."""
        n = len(ranks)
        me = ranks.index(self.rank)
        lay = layout(op, size_bytes, n, 4)
        base = Measured(op, lay.size_bytes, lay.count, ranks, method=self.method)
        need = need_bytes(op, size_bytes, n)
        free = self.free_bytes()
        if self.cuda and not self._min_over(int(free is not None and need <= MEMORY_HEADROOM * free), group):
            return replace(base, skipped="out_of_memory", need_bytes=need, free_bytes=self._min_over(free or 0, group))
        torch = self.torch
        first: Buffers | None = None
        sets: list[Buffers] = []
        try:
            root = ranks[0]
            values = self._patterns(op, n, me, lay.count)
            first = self._allocate(op, lay, values[0], group)
            if first is None:
                return replace(base, skipped="out_of_memory", need_bytes=need, free_bytes=free)
            sets = [first] + self._more_sets(op, size_bytes, n, *first, free, need, group)
            allocations = allocations_for(buffer_bytes(op, size_bytes, n), self.l2_bytes, len(sets)) if self.cuda \
                else 1
            # Rounds: a graph captured afresh in each, the communicators in turn, a fresh allocation in each where
            # there are several; the eager calls split among the allocations, or all in the first round.
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
                    first = self._allocate(op, lay, values[0], group)
                    if first is None:  # another process took the memory meanwhile: the size is not measured
                        return replace(base, skipped="out_of_memory", need_bytes=need, free_bytes=self.free_bytes())
                    sets = [first]
                warm = warmup if k == 0 else min(warmup, ALLOCATION_WARMUP) if allocations > 1 else 0
                eager_iters = per if allocations > 1 else iters if k == 0 else 0
                eager, replays, calls, why, err = self._timed(op, sets, comms[k % len(comms)], root, warm,
                                                              eager_iters, timed_graph, calls, per, stride)
                samples += eager
                if replays:
                    gpu += replays
                    captures += 1
                elif k == 0 or timed_graph:  # no GPU time, or a later capture refused (every member agreed):
                    gpu, timed_graph, reason, error = (), False, why, err  # the per-call time stands alone
            # The check: in the first set of the last allocation (timed all_reduce calls summed in place).
            wrong = self._check(*first, values, lambda: self._call(op, *first, group, root))
            result = replace(base, samples_us=samples, wrong=wrong, gpu_samples_us=gpu, gpu_calls=calls or 1,
                             gpu_reason=None if gpu else reason, gpu_error=None if gpu else error,
                             rotation_sets=len(sets), allocations=allocations, captures=captures if gpu else 1,
                             communicators=min(captures, len(comms)) if gpu else 1)
            if not (self.cuda and graph):
                return result
            if not gpu:  # no graph on plain buffers: none on registered ones either
                return replace(result, reg_reason="not_captured")
            if self._nccl_allocator is None:
                return replace(result, reg_reason="no_nccl_allocator", reg_error=self._registered_error)
            first, sets = None, []  # the plain buffers go back before the pool's are made
            torch.cuda.empty_cache()
            try:
                registered = self._registered(op, size_bytes, n, lay, values, comms, root, calls or 1,
                                              math.ceil(iters / REGISTERED_CAPTURES), free, need)
            except Exception as e:  # noqa: BLE001 - the plain result stands; the registered one failed, and says how
                registered = {"reg_reason": "error", "reg_error": one_line(e)}
            return replace(result, **registered)
        except Exception as e:  # noqa: BLE001 - a failed collective is a result, reported by the caller
            return replace(base, error=one_line(e))
        finally:
            first, sets = None, []  # every buffer released before the cache is emptied
            if self.cuda:
                torch.cuda.empty_cache()

