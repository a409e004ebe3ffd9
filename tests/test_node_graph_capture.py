"""The GPU-time path of a collective measurement (CUDA-graph capture and replay) on the CPU: real torch
tensors and a one-rank group, with torch.cuda replaced by a fake whose events read a fake clock, so the
protocol is exercised here (calls per graph, one untimed replay, samples per call, a refused capture
recorded with its reason and the per-call time kept). The real capture runs in tests/test_node_gpu.py."""

from __future__ import annotations

import contextlib
import types

import pytest
import torch

from envcheck.node.collective_bench import CollectiveBench, calls_per_graph


class FakeDist:
    """A one-rank group: every collective leaves the data as it is (the sum over one rank)."""

    class ReduceOp:
        MIN = "min"

    def __init__(self, log):
        self.log = log

    def all_reduce(self, t, op=None, group=None):
        self.log.append(("all_reduce", op))


class FakeCuda:
    """torch.cuda as the capture path uses it. ``capture_error``: raised at the end of a capture."""

    def __init__(self, log, us_per_replay=300.0, capture_error=None):
        self.log, self.us_per_replay, self.capture_error, self.now_ms = log, us_per_replay, capture_error, 0.0
        self.capturing = False

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
            def replay(self):
                cuda.log.append("replay")
                cuda.now_ms += cuda.us_per_replay / 1e3

            def reset(self):
                cuda.log.append("reset")

        return Graph()

    @contextlib.contextmanager
    def graph(self, g, capture_error_mode="global"):
        self.log.append(("capture", capture_error_mode))
        yield
        if self.capture_error is not None:
            raise self.capture_error

    def Event(self, enable_timing=False):  # noqa: N802
        cuda = self

        class Event:
            def record(self):
                self.at = cuda.now_ms

            def elapsed_time(self, other):
                return other.at - self.at

        return Event()


def _bench(cuda):
    log = []
    fake_torch = types.SimpleNamespace(**{k: getattr(torch, k) for k in ("empty", "arange", "tensor", "int64",
                                                                          "float32", "device")}, cuda=cuda)
    b = CollectiveBench(torch, FakeDist(log), "cpu", 0, 1)  # the CPU build of torch holds the tensors
    b.torch, b.cuda = fake_torch, True  # ...and the capture path runs as on a GPU
    return b, log


def test_graph_replays_give_the_gpu_time_per_call():
    cuda = FakeCuda([], us_per_replay=300.0)
    b, _ = _bench(cuda)
    m = b.measure("all_reduce", 1 << 12, (0,), None, warmup=1, iters=6)
    assert m.error is None and m.wrong == 0 and len(m.samples_us) == 6  # per call, eager, host clock here
    assert m.gpu_reason is None and m.gpu_calls == calls_per_graph(sum(m.samples_us) / 6, 6)
    assert len(m.gpu_samples_us) == 6 and m.gpu_samples_us == pytest.approx([300.0 / m.gpu_calls] * 6)
    # One capture (thread-local: NCCL's watchdog thread may query events meanwhile), one untimed replay
    # before the six timed ones, and the graph freed.
    assert cuda.log.count(("capture", "thread_local")) == 1
    assert cuda.log.count("replay") == 7 and cuda.log[-1] == "reset"


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
