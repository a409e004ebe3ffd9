"""GPU time by CUDA-graph replay: ``k`` back-to-back calls captured, replays of about ``GRAPH_TARGET_US`` so a
replay's own 3-5 us cost is under 0.5%. ``k`` is sized from multi-call graphs and re-sized until it holds; with
a ``Rotation`` (l2.py) it is whole cycles, restarted at set 0 before each capture.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from envcheck.bench.l2 import Rotation
from envcheck.bench.timer import GRAPH, Region, Timer, calls_per_sample

if TYPE_CHECKING:
    import torch

GRAPH_TARGET_US = 1000.0
MAX_GRAPH_CALLS = 1000
MAX_SIZING_ROUNDS = 4  # re-sizings of a graph (2 -> ~400 -> ~1000 calls in practice)
SIZING_SLACK = 1.1  # re-capturing for a few more calls changes nothing measurable


def capture_graph(fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
    """A ``torch.cuda.CUDAGraph`` of ``calls`` back-to-back calls of ``fn``, after two on a side stream (torch's
    recipe: lazy initialisation must not happen during capture)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    return graph


def _warm_capture(timer: Timer, fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
    """``capture_graph`` and one replay: the first replay of a graph uploads it to the device."""
    if isinstance(fn, Rotation):
        fn.restart()
    graph = capture_graph(fn, calls)
    graph.replay()
    timer.clock.synchronize()
    return graph


def graph_region(timer: Timer, fn: Callable[[], object], sets: int = 1) -> Region:
    """The CUDA graph of ``fn`` (warmed up) to replay for its GPU time, as a Region to sample."""
    if sets > 1:
        graph = _warm_capture(timer, fn, sets)
        cycle = timer.shortest_us(graph.replay)  # its replay cost is shared by ``sets`` calls already
        m = calls_per_sample(cycle, GRAPH_TARGET_US, max(1, MAX_GRAPH_CALLS // sets))
        if m > 1:
            del graph
            graph = _warm_capture(timer, fn, m * sets)
        return Region(graph.replay, GRAPH, m * sets)
    # k only grows: an estimate can be too long (the replay's cost, a slow host), never too short. The first
    # graph holds 2 calls: a one-call replay can read 100 us for a 2 us kernel and stop the sizing at once.
    k = 2
    graph = _warm_capture(timer, fn, k)
    for _ in range(MAX_SIZING_ROUNDS):
        per_call = timer.shortest_us(graph.replay) / k
        want = calls_per_sample(per_call, GRAPH_TARGET_US, MAX_GRAPH_CALLS)
        if want <= k * SIZING_SLACK:
            break
        del graph
        k = want
        graph = _warm_capture(timer, fn, k)
    return Region(graph.replay, GRAPH, k)
