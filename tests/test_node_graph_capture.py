"""The GPU-time path of a collective measurement (CUDA-graph capture and replay) on the CPU: real torch
tensors and a one-rank group, with torch.cuda replaced by a fake whose events read a fake clock, so the
protocol is exercised here (calls per graph, untimed replays first, samples per call, a refused capture
recorded with its reason and the per-call time kept). The real capture runs in tests/test_node_gpu.py."""

from __future__ import annotations

import contextlib
import math
import time
import types

import pytest

torch = pytest.importorskip("torch")  # real tensors in every test

from envcheck.node import collective_bench  # noqa: E402
from envcheck.node.collective_bench import (  # noqa: E402
    ALLOCATIONS,
    CAPTURES,
    CollectiveBench,
    calls_per_graph,
    warm_replays,
)


class FakeDist:
    """A one-rank group: every collective leaves the data as it is (the sum over one rank). A call
    captured into a fake graph is counted there; an eager one takes ``host_s`` of the host's time."""

    class ReduceOp:
        MIN = "min"

    def __init__(self, log, cuda=None, host_s=0.0):
        self.log, self.cuda, self.host_s = log, cuda, host_s
        self.groups = []  # (captured or not, group) of each timed call

    def all_reduce(self, t, op=None, group=None):
        self.log.append(("all_reduce", op))
        if op is None:
            self.groups.append((self.cuda is not None and self.cuda.capturing, group))
        if self.cuda is not None and self.cuda.capturing:
            self.cuda.captured += op is None  # the timed calls; MIN is the group agreeing
        elif op is None and self.host_s:
            time.sleep(self.host_s)

    def new_group(self, ranks):
        """A communicator of ``ranks``: it takes ``cuda.group_bytes`` of the GPU's memory once connected."""
        self.made = getattr(self, "made", 0) + 1
        self.cuda.free -= self.cuda.group_bytes
        return f"group {self.made}"

    def destroy_process_group(self, group=None):
        self.log.append(("destroyed", group))
        self.cuda.free += self.cuda.group_bytes

    def all_to_all_single(self, recv, send, group=None):
        """One rank: its whole input is its own chunk. Records which buffers each call used."""
        capturing = self.cuda is not None and self.cuda.capturing
        self.log.append(("all_to_all", send.data_ptr(), recv.data_ptr(), capturing))
        if capturing:
            self.cuda.captured += 1
        recv.copy_(send)


class FakeCuda:
    """torch.cuda as the capture path uses it: a replay advances the fake GPU clock by ``us_per_call``
    for each call captured in its graph. ``capture_error``: raised at the end of the captures numbered
    ``error_from`` to ``error_until`` (every later one when None)."""

    def __init__(self, log, us_per_call=15.0, capture_error=None, error_from=1, free=1 << 40, us_by_capture=(),
                 error_until=None, total=1 << 40, group_bytes=0, ramp_ms=0.0, ramp_slower=1.0):
        self.log, self.us_per_call, self.capture_error, self.now_ms = log, us_per_call, capture_error, 0.0
        # A burst's start: a graph's replays run ``ramp_slower`` times slower until it has replayed ``ramp_ms``.
        self.ramp_ms, self.ramp_slower = ramp_ms, ramp_slower
        self.error_until, self.total, self.group_bytes = error_until, total, group_bytes
        self.us_by_capture = us_by_capture  # the k-th graph's calls take this long each (else us_per_call)
        self.free = free
        self.capturing, self.captured, self.error_from, self.captures = False, 0, error_from, 0

    def mem_get_info(self, device):
        return (self.free, self.total)

    def empty_cache(self):
        self.log.append("empty_cache")

    def synchronize(self):
        pass

    class _Stream:
        def wait_stream(self, other):
            pass

    def Stream(self):  # noqa: N802 - torch's name
        return self._Stream()

    def current_stream(self):
        return self._Stream()

    @contextlib.contextmanager
    def stream(self, s):
        yield

    def CUDAGraph(self):  # noqa: N802
        cuda = self

        class Graph:
            calls = 0
            us = None
            ran_ms = 0.0

            def replay(self):
                cuda.log.append("replay")
                ms = (self.us or cuda.us_per_call) * self.calls / 1e3
                ms *= cuda.ramp_slower if self.ran_ms < cuda.ramp_ms else 1.0
                self.ran_ms += ms
                cuda.now_ms += ms

            def reset(self):
                cuda.log.append("reset")

        return Graph()

    @contextlib.contextmanager
    def graph(self, g, capture_error_mode="global"):
        self.log.append(("capture", capture_error_mode))
        self.capturing, self.captured = True, 0
        self.captures += 1
        if self.captures <= len(self.us_by_capture):
            g.us = self.us_by_capture[self.captures - 1]
        try:
            yield
        finally:
            self.capturing = False
            g.calls = self.captured
        if self.capture_error is not None and self.error_from <= self.captures <= (self.error_until or self.captures):
            raise self.capture_error

    def Event(self, enable_timing=False):  # noqa: N802
        cuda = self

        class Event:
            def record(self):
                self.at = cuda.now_ms

            def elapsed_time(self, other):
                return other.at - self.at

        return Event()


def _bench(cuda, host_s=0.0):
    log = []
    fake_torch = types.SimpleNamespace(**{k: getattr(torch, k) for k in ("empty", "empty_like", "arange", "tensor",
                                                                          "int64", "float32", "device")}, cuda=cuda)
    b = CollectiveBench(torch, FakeDist(log, cuda, host_s), "cpu", 0, 1)  # the CPU build of torch holds the tensors
    b.torch, b.cuda = fake_torch, True  # ...and the capture path runs as on a GPU
    return b, log


def test_graph_replays_give_the_gpu_time_per_call():
    cuda = FakeCuda([], us_per_call=700.0)
    b, _ = _bench(cuda, host_s=0.001)  # a caller pays about as much as the GPU takes: no second capture
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=2 * CAPTURES)
    assert m.error is None and m.wrong == 0 and len(m.samples_us) == 2 * CAPTURES  # per call, eager, host clock
    assert m.gpu_reason is None and m.gpu_calls == calls_per_graph(round(sum(m.samples_us) / len(m.samples_us))) == 1
    assert len(m.gpu_samples_us) == 2 * CAPTURES and m.gpu_samples_us == pytest.approx([700.0] * 2 * CAPTURES)
    # CAPTURES captures (thread-local: NCCL's watchdog thread may query events meanwhile), each with untimed
    # replays for about GRAPH_WARM_US (one timed to size the rest) before its two timed ones, each graph freed.
    assert cuda.log.count(("capture", "thread_local")) == CAPTURES == m.captures
    assert warm_replays(700.0) == 71  # 72 replays of 700 us: 50.4 ms
    assert cuda.log.count("replay") == (1 + 71 + 2) * CAPTURES and cuda.log.count("reset") == CAPTURES
    assert cuda.log[-2:] == ["reset", "empty_cache"]  # then the buffers go


def test_a_graph_sized_from_a_slow_caller_is_sized_again_from_the_gpu_time():
    """Run B of 2026-11-25 on 2 x H200: all_gather 1 MiB cost its caller ~490 us a call, so a graph held 3
    calls (~40 us of GPU work) and the replays carried the hosts' gaps (samples 110 -> 16 us)."""
    cuda = FakeCuda([], us_per_call=12.0)
    b, _ = _bench(cuda, host_s=0.001)
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=CAPTURES)
    # Sized from ~1 ms a call, then from 12 us; the other captures keep that size.
    assert cuda.log.count(("capture", "thread_local")) == CAPTURES + 1 and m.captures == CAPTURES
    assert m.gpu_calls == calls_per_graph(12.0) == 84
    assert m.gpu_samples_us == pytest.approx([12.0] * CAPTURES)
    warm = 1 + warm_replays(12.0) + 1 + CAPTURES * (1 + warm_replays(84 * 12.0) + 1)  # the first graph: 1 call
    assert cuda.log.count("replay") == warm and cuda.log.count("reset") == CAPTURES + 1


def test_a_refused_capture_keeps_the_per_call_time_and_says_why():
    cuda = FakeCuda([], capture_error=RuntimeError("CUDA error: operation not permitted when stream is capturing"))
    b, log = _bench(cuda)
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=4)
    assert m.error is None and m.wrong == 0 and len(m.samples_us) == 4
    assert m.gpu_samples_us == () and m.gpu_reason == "capture_failed"
    assert m.gpu_error.startswith("RuntimeError: CUDA error: operation not permitted")
    assert "replay" not in cuda.log  # nothing replayed: the group agreed (MIN over the members) first
    assert ("all_reduce", "min") in log
    assert cuda.captures == 1 and m.captures == 1  # no capture tried after the refusal


def test_without_a_graph_the_reason_is_recorded():
    b, _ = _bench(FakeCuda([]))
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=0, iters=1, graph=False)  # the learning launch
    assert m.gpu_reason == "not_captured" and m.gpu_samples_us == ()
    cpu = CollectiveBench(torch, FakeDist([]), "cpu", 0, 1)
    assert cpu.measure("all_reduce", 1 << 12, (0,), None, warmup=0, iters=2).gpu_reason == "no_cuda_graphs"


def test_a_refused_second_capture_keeps_the_first_graph_s_samples():
    cuda = FakeCuda([], us_per_call=12.0, capture_error=RuntimeError("out of graph memory"), error_from=2,
                    error_until=2)
    b, _ = _bench(cuda, host_s=0.001)
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=CAPTURES)
    assert cuda.captures == CAPTURES + 1 and m.gpu_reason is None and m.gpu_error is None
    assert m.gpu_calls == 1 and m.gpu_samples_us == pytest.approx([12.0] * CAPTURES)  # the first graph's calls


def test_a_capture_refused_after_the_first_leaves_the_per_call_time_alone():
    """Graphs pooled: one refused later drops the GPU time (the group agreed), never a share of it."""
    cuda = FakeCuda([], us_per_call=700.0, capture_error=RuntimeError("out of graph memory"), error_from=4)
    b, _ = _bench(cuda, host_s=0.001)
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=CAPTURES)
    assert m.error is None and m.wrong == 0 and len(m.samples_us) == CAPTURES
    assert m.gpu_samples_us == () and m.gpu_reason == "capture_failed" and m.captures == 1
    assert cuda.captures == 4


def test_every_size_pools_graphs_captured_afresh_on_the_same_buffers():
    """The GPU time pools CAPTURES graphs (so that they can go round the communicators, below). Below 3 x L2 each
    size captures them on its rotating sets (no new allocation), the eager calls timed once, and pools every
    graph's replays: one slower graph in three moves the pooled samples, not the whole number."""
    per_capture = [140.0 + (10.0 if k % 3 == 0 else 0.0) for k in range(CAPTURES)]  # a slow pace in a third
    cuda = FakeCuda([], us_by_capture=per_capture)
    b, log = _bench(cuda)
    m = b.measure("all_to_all", 4 << 20, (0,), None, warmup=2, iters=2 * CAPTURES)
    assert m.error is None and m.wrong == 0 and m.rotation_sets == 19 and m.allocations == 1
    assert m.captures == cuda.captures == CAPTURES
    assert len(m.samples_us) == 2 * CAPTURES  # the eager calls once, back to back
    assert sorted(m.gpu_samples_us) == pytest.approx(sorted(per_capture * 2))  # every graph, pooled
    assert "empty_cache" not in cuda.log[:-1]  # the same buffers throughout (emptied once, at the end)
    captured = _a2a_calls(log, True)
    assert len({e[1] for e in captured}) == 19  # every graph cycles through the same 19 sets
    assert len({e[1] for e in _a2a_calls(log, False)}) == 19


def test_the_captures_take_the_communicators_in_turn():
    """2 x H100, 2026-11-26 1125Z: all_to_all 64 MiB read 224-244 GB/s busbw over eighteen communicators of the same
    two GPUs, most within 1% over their own six rounds: the captures go round the communicators given, the eager
    calls and the check stay on the sweep's own."""
    cuda = FakeCuda([], us_by_capture=[100.0, 110.0, 120.0] * (CAPTURES // 3))
    b, _ = _bench(cuda)
    m = b.measure("all_reduce", 1 << 12, (0,), "own", warmup=1, iters=CAPTURES, more_groups=("second", "third"))
    assert m.error is None and m.wrong == 0 and m.captures == CAPTURES and m.communicators == 3
    captured = [g for c, g in b.dist.groups if c]
    per_graph = len(captured) // CAPTURES
    assert [captured[k * per_graph] for k in range(CAPTURES)] == ["own", "second", "third"] * (CAPTURES // 3)
    eager = [g for c, g in b.dist.groups if not c]
    assert eager[:1 + CAPTURES] == ["own"] * (1 + CAPTURES) and eager[-1] == "own"  # warm-up, timed calls, check
    # Elsewhere only the one untimed call before each capture on that communicator (its connections made there).
    assert eager.count("second") == eager.count("third") == CAPTURES // 3
    assert sorted(m.gpu_samples_us) == pytest.approx(sorted([100.0, 110.0, 120.0] * (CAPTURES // 3)))


def test_more_communicators_stop_short_of_a_tenth_of_the_gpu_memory():
    """An extra communicator took 868-870 MiB of an H100 on two GPUs (2026-11-26 1128Z): they are made, each connected
    by a call of every planned op, until one more would hold over COMMUNICATOR_MEMORY_SHARE of the GPU; that one
    is freed. Off a GPU there are none."""
    from envcheck.node.collective_bench import COMMUNICATOR_MEMORY_SHARE, COMMUNICATORS

    total = 80 << 30
    per = int(COMMUNICATOR_MEMORY_SHARE * total / 2.5)  # two fit, a third would not
    cuda = FakeCuda([], free=total - (1 << 30), total=total, group_bytes=per)
    b, log = _bench(cuda)
    more = b.more_communicators((0,), ("all_reduce", "all_to_all"))
    assert more == ("group 1", "group 2") and ("destroyed", "group 3") in log
    assert [g for c, g in b.dist.groups if not c] == ["group 1", "group 2", "group 3"]  # connected when made
    assert len(_a2a_calls(log, False)) == 3
    roomy = FakeCuda([], total=total, group_bytes=1 << 20)
    b, log = _bench(roomy)
    assert len(b.more_communicators((0,), ("all_reduce",))) == COMMUNICATORS - 1
    assert not any(e[0] == "destroyed" for e in log if isinstance(e, tuple))
    cpu = CollectiveBench(torch, FakeDist([]), "cpu", 0, 1)
    assert cpu.more_communicators((0,), ("all_reduce",)) == ()


def _a2a_calls(log, captured):
    return [e for e in log if isinstance(e, tuple) and e[0] == "all_to_all" and e[3] is captured]


def test_a_size_that_fits_in_l2_cycles_through_sets_of_buffers_in_whole_cycles():
    """all_to_all at 4 MiB on one rank: 8 MiB of buffers, under 3 x L2 (an H100's 50 MiB assumed where the
    L2 is unknown), so 19 sets; left hot, half of its data (the rank's own chunk) came from L2."""
    cuda = FakeCuda([], us_per_call=20.0)
    b, log = _bench(cuda, host_s=0.0005)
    m = b.measure("all_to_all", 4 << 20, (0,), None, warmup=2, iters=25)
    assert m.error is None and m.wrong == 0 and m.rotation_sets == 19
    eager = _a2a_calls(log, False)
    sends = [e[1] for e in eager[:27]]  # warm-up and timed calls: one cycle from the first set on
    assert len(set(sends)) == 19 and sends[19:27] == sends[:8]
    assert len({e[2] for e in eager[:27]}) == 19  # an output buffer per set too
    assert eager[-1][1:3] == eager[0][1:3]  # the check ran in the first set
    captured = _a2a_calls(log, True)
    assert m.gpu_calls % 19 == 0 and len(captured) % 19 == 0 and len(captured) >= m.gpu_calls
    graph = [e[1] for e in captured[-m.gpu_calls:]]
    assert graph == sends[:19] * (m.gpu_calls // 19)  # whole cycles, in the same order


def test_a_size_left_in_l2_or_without_memory_to_spare_uses_one_set():
    b, log = _bench(FakeCuda([]))
    # 128 KiB of buffers: 1,200 sets would cover 3 x L2, more than a graph should hold; left in L2.
    assert b.measure("all_to_all", 1 << 16, (0,), None, warmup=1, iters=3).rotation_sets == 1
    assert b.measure("all_reduce", 1 << 20, (0,), None, warmup=1, iters=3).rotation_sets == 150  # 1 MiB: cold
    need = (8 << 20) + (1 << 25) * 12  # 4 MiB in and out, and the check's chunks
    tight = FakeCuda([], free=int((need + (16 << 20)) / 0.85))  # room for 2 more sets of the 18 wanted
    b, log = _bench(tight)
    m = b.measure("all_to_all", 4 << 20, (0,), None, warmup=1, iters=3)
    assert m.error is None and m.wrong == 0 and m.rotation_sets == 1
    assert len({e[1] for e in _a2a_calls(log, False)}) == 1
    cpu = CollectiveBench(torch, FakeDist([]), "cpu", 0, 1)
    cpu.dist.all_to_all_single = lambda recv, send, group=None: recv.copy_(send)
    assert cpu.measure("all_to_all", 4 << 20, (0,), None, warmup=0, iters=2).rotation_sets == 1  # no L2 on the CPU


def test_a_size_above_3x_l2_spreads_its_timed_calls_over_fresh_allocations():
    """2 x H100, 2026-11-26 0924Z: reduce_scatter 4 GiB read 6845-7838 us a call on ten fresh allocations and
    7414-7500 on one allocation timed five times: one allocation's number is luck, so a size whose buffers
    exceed 3 x L2 is timed on ALLOCATIONS of them in turn, each freed (the cache emptied) before the next."""
    per_allocation = [7000.0 + 100 * k for k in range(ALLOCATIONS)]
    cuda = FakeCuda([], us_by_capture=per_allocation)
    b, _ = _bench(cuda)
    b.l2_bytes = 1 << 20  # 3 x L2 = 3 MiB: a 4 MiB all_reduce (in place, one 4 MiB buffer) is above it
    m = b.measure("all_reduce", 4 << 20, (0,), None, warmup=3, iters=2 * ALLOCATIONS)
    assert m.error is None and m.wrong == 0 and m.rotation_sets == 1 and m.allocations == ALLOCATIONS
    assert cuda.captures == ALLOCATIONS == m.captures  # one graph per allocation, sized once (no second capture)
    assert len(m.samples_us) == len(m.gpu_samples_us) == 2 * ALLOCATIONS  # the iterations split among them
    assert sorted(m.gpu_samples_us) == pytest.approx(sorted(per_allocation * 2))  # every allocation, pooled
    # Each later allocation comes after the previous buffers went back: the cache emptied in between.
    captures = [i for i, e in enumerate(cuda.log) if e == ("capture", "thread_local")]
    assert all("empty_cache" in cuda.log[a:c] for a, c in zip(captures, captures[1:], strict=False))


def test_a_capture_refused_on_a_later_allocation_leaves_the_per_call_time_alone():
    cuda = FakeCuda([], capture_error=RuntimeError("out of graph memory"), error_from=3)
    b, _ = _bench(cuda)
    b.l2_bytes = 1 << 20
    m = b.measure("all_reduce", 4 << 20, (0,), None, warmup=1, iters=ALLOCATIONS)
    assert m.error is None and m.wrong == 0 and len(m.samples_us) == ALLOCATIONS
    assert m.gpu_samples_us == () and m.gpu_reason == "capture_failed" and "out of graph memory" in m.gpu_error
    assert cuda.captures == 3  # no capture tried after the refusal


def test_sizes_that_rotate_or_run_on_the_cpu_use_one_allocation():
    b, _ = _bench(FakeCuda([]))
    b.l2_bytes = 1 << 20
    m = b.measure("all_to_all", 1 << 20, (0,), None, warmup=1, iters=4)  # 2 MiB of buffers: rotated
    assert m.rotation_sets == 2 and m.allocations == 1
    cpu = CollectiveBench(torch, FakeDist([]), "cpu", 0, 1)
    cpu.dist.all_reduce = lambda t, op=None, group=None: None
    assert cpu.measure("all_reduce", 4 << 20, (0,), None, warmup=0, iters=2).allocations == 1


def test_memory_taken_between_allocations_skips_the_size_for_want_of_memory():
    """Another process takes the memory after the second allocation is freed: the third cannot be made, and the
    size is recorded as skipped for want of memory (the sweep goes on), not as a failed collective."""
    b, _ = _bench(FakeCuda([]))
    b.l2_bytes = 1 << 20
    made = []

    def empty(*shape, **kw):
        made.append(shape)
        if len(made) == 3:
            raise RuntimeError("CUDA out of memory")
        return torch.empty(*shape, **kw)

    b.torch.empty = empty
    m = b.measure("all_reduce", 4 << 20, (0,), None, warmup=1, iters=ALLOCATIONS)
    assert m.skipped == "out_of_memory" and m.error is None and m.samples_us == () and m.need_bytes > 0


@pytest.mark.parametrize("warm_us", [50_000.0, 0.0])
def test_the_timed_replays_follow_a_warm_up_that_outlasts_a_slow_start(monkeypatch, warm_us):
    """2 x H100, 2026-11-26 1453Z (evidence/device-logs/2026-11-26_1453Z_2x-h100_diag_alltoall_ramp.log.gz): a burst of
    all_to_all 64 MiB ran about 10% slower for its first 2 ms, and 2 timed replays right after one untimed one read
    223-233 GB/s busbw in 6 of 6 rounds, against 241-242 after 50 ms of untimed replays. Here the fake GPU's
    replays run 10% slower for their first 5 ms: with the warm-up every sample is the steady pace, without it the
    first timed replays are slow (so the test can fail)."""
    monkeypatch.setattr(collective_bench, "GRAPH_WARM_US", warm_us)
    cuda = FakeCuda([], us_per_call=140.0, ramp_ms=5.0, ramp_slower=1.1)
    b, _ = _bench(cuda, host_s=0.001)  # graphs of 1 call, then of 7 or 8 (sized again from the GPU time)
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=2 * CAPTURES)
    assert m.error is None and len(m.gpu_samples_us) == 2 * CAPTURES
    if warm_us:
        assert m.gpu_samples_us == pytest.approx([140.0] * 2 * CAPTURES)
    else:
        assert max(m.gpu_samples_us) == pytest.approx(154.0)


def test_every_member_warms_up_as_long_as_the_slowest_replay_asks():
    """The number of untimed replays is the same on every member (each replay holds collectives): it comes from the
    group's longest first replay, agreed on with a MIN over negated values."""
    cuda = FakeCuda([], us_per_call=700.0)
    b, log = _bench(cuda, host_s=0.001)
    b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=2 * CAPTURES)
    agreed = [e for e in log if e == ("all_reduce", "min")]
    assert len(agreed) >= 2 * CAPTURES  # at least one agreement on the capture and one on the warm-up per graph
    assert warm_replays(1e9) == 0 and warm_replays(0.0) == math.ceil(collective_bench.GRAPH_WARM_US) - 1
