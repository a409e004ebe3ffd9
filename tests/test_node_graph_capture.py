"""The GPU-time path of a collective measurement (CUDA-graph capture and replay) on the CPU: real torch
tensors and a one-rank group, with torch.cuda replaced by a fake whose events read a fake clock, so the
protocol is exercised here (calls per graph, one untimed replay, samples per call, a refused capture
recorded with its reason and the per-call time kept). The real capture runs in tests/test_node_gpu.py."""

from __future__ import annotations

import contextlib
import time
import types

import pytest
import torch

from envcheck.node.collective_bench import CollectiveBench, calls_per_graph


class FakeDist:
    """A one-rank group: every collective leaves the data as it is (the sum over one rank). A call
    captured into a fake graph is counted there; an eager one takes ``host_s`` of the host's time."""

    class ReduceOp:
        MIN = "min"

    def __init__(self, log, cuda=None, host_s=0.0):
        self.log, self.cuda, self.host_s = log, cuda, host_s

    def all_reduce(self, t, op=None, group=None):
        self.log.append(("all_reduce", op))
        if self.cuda is not None and self.cuda.capturing:
            self.cuda.captured += op is None  # the timed calls; MIN is the group agreeing
        elif op is None and self.host_s:
            time.sleep(self.host_s)


class FakeCuda:
    """torch.cuda as the capture path uses it: a replay advances the fake GPU clock by ``us_per_call``
    for each call captured in its graph. ``capture_error``: raised at the end of a capture."""

    def __init__(self, log, us_per_call=15.0, capture_error=None, error_from=1):
        self.log, self.us_per_call, self.capture_error, self.now_ms = log, us_per_call, capture_error, 0.0
        self.capturing, self.captured, self.error_from, self.captures = False, 0, error_from, 0

    def mem_get_info(self, device):
        return (1 << 40, 1 << 40)

    def empty_cache(self):
        pass

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

            def replay(self):
                cuda.log.append("replay")
                cuda.now_ms += cuda.us_per_call * self.calls / 1e3

            def reset(self):
                cuda.log.append("reset")

        return Graph()

    @contextlib.contextmanager
    def graph(self, g, capture_error_mode="global"):
        self.log.append(("capture", capture_error_mode))
        self.capturing, self.captured = True, 0
        self.captures += 1
        try:
            yield
        finally:
            self.capturing = False
            g.calls = self.captured
        if self.capture_error is not None and self.captures >= self.error_from:
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
    fake_torch = types.SimpleNamespace(**{k: getattr(torch, k) for k in ("empty", "arange", "tensor", "int64",
                                                                          "float32", "device")}, cuda=cuda)
    b = CollectiveBench(torch, FakeDist(log, cuda, host_s), "cpu", 0, 1)  # the CPU build of torch holds the tensors
    b.torch, b.cuda = fake_torch, True  # ...and the capture path runs as on a GPU
    return b, log


def test_graph_replays_give_the_gpu_time_per_call():
    cuda = FakeCuda([], us_per_call=700.0)
    b, _ = _bench(cuda, host_s=0.001)  # a caller pays about as much as the GPU takes: no second capture
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=6)
    assert m.error is None and m.wrong == 0 and len(m.samples_us) == 6  # per call, eager, host clock here
    assert m.gpu_reason is None and m.gpu_calls == calls_per_graph(round(sum(m.samples_us) / 6)) == 1
    assert len(m.gpu_samples_us) == 6 and m.gpu_samples_us == pytest.approx([700.0] * 6)
    # One capture (thread-local: NCCL's watchdog thread may query events meanwhile), one untimed replay
    # before the six timed ones, and the graph freed.
    assert cuda.log.count(("capture", "thread_local")) == 1
    assert cuda.log.count("replay") == 7 and cuda.log[-1] == "reset"


def test_a_graph_sized_from_a_slow_caller_is_sized_again_from_the_gpu_time():
    """Run B of 2026-11-25 on 2 x H200: all_gather 1 MiB cost its caller ~490 us a call, so a graph held 3
    calls (~40 us of GPU work) and the replays carried the hosts' gaps (samples 110 -> 16 us)."""
    cuda = FakeCuda([], us_per_call=12.0)
    b, _ = _bench(cuda, host_s=0.001)
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=6)
    assert cuda.log.count(("capture", "thread_local")) == 2  # sized from ~1 ms a call, then from 12 us
    assert m.gpu_calls == calls_per_graph(12.0) == 84
    assert m.gpu_samples_us == pytest.approx([12.0] * 6)
    assert cuda.log.count("replay") == 14 and cuda.log.count("reset") == 2


def test_a_refused_capture_keeps_the_per_call_time_and_says_why():
    cuda = FakeCuda([], capture_error=RuntimeError("CUDA error: operation not permitted when stream is capturing"))
    b, log = _bench(cuda)
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=4)
    assert m.error is None and m.wrong == 0 and len(m.samples_us) == 4
    assert m.gpu_samples_us == () and m.gpu_reason == "capture_failed"
    assert m.gpu_error.startswith("RuntimeError: CUDA error: operation not permitted")
    assert "replay" not in cuda.log  # nothing replayed: the group agreed (MIN over the members) first
    assert ("all_reduce", "min") in log


def test_without_a_graph_the_reason_is_recorded():
    b, _ = _bench(FakeCuda([]))
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=0, iters=1, graph=False)  # the learning launch
    assert m.gpu_reason == "not_captured" and m.gpu_samples_us == ()
    cpu = CollectiveBench(torch, FakeDist([]), "cpu", 0, 1)
    assert cpu.measure("all_reduce", 1 << 12, (0,), None, warmup=0, iters=2).gpu_reason == "no_cuda_graphs"


def test_a_refused_second_capture_keeps_the_first_graph_s_samples():
    cuda = FakeCuda([], us_per_call=12.0, capture_error=RuntimeError("out of graph memory"), error_from=2)
    b, _ = _bench(cuda, host_s=0.001)
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=6)
    assert cuda.captures == 2 and m.gpu_reason is None and m.gpu_error is None
    assert m.gpu_calls == 1 and m.gpu_samples_us == pytest.approx([12.0] * 6)  # the first graph's calls
