"""GPU time by CUDA-graph replay: capture ``k`` back-to-back calls, size ``k``, replay.

A replay's own cost (3-5 us on an H100/H200) lands in each sample, so replays last ``GRAPH_TARGET_US`` = 1 ms
(a bias under 0.5%; do_bench_cudagraph replays ~``rep`` ms for the same reason), at most ``MAX_GRAPH_CALLS``
calls. ``k`` is sized from multi-call graphs, where that cost is amortised, and re-sized until it holds. With
a ``Rotation`` over R sets (l2.py), ``k`` is a whole number of cycles and restarts at set 0 before each capture.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.bench.l2 import Rotation
from envcheck.bench.timer import GRAPH, Region, Timer, calls_per_sample

GRAPH_TARGET_US = 1000.0
MAX_GRAPH_CALLS = 1000
# How many times graph_region may re-size a graph (2 -> ~400 -> ~1000 calls in practice).
MAX_SIZING_ROUNDS = 4
# Re-capturing for a few more calls changes nothing measurable: stop within this factor.
SIZING_SLACK = 1.1


def capture_graph(fn: Callable[[], Any], calls: int) -> Any:
    """A ``torch.cuda.CUDAGraph`` of ``calls`` back-to-back calls of ``fn`` (already warmed up).

    Warm-up calls run on a side stream first, as the torch CUDA-graph docs require (lazy
    initialisation, e.g. cuBLAS workspaces, must not happen during capture); the capture
    itself runs on the side stream ``torch.cuda.graph`` creates.
    """
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


def _warm_capture(timer: Timer, fn: Callable[[], Any], calls: int) -> Any:
    """``capture_graph`` and one replay: the first replay of a graph uploads it to the device."""
    if isinstance(fn, Rotation):
        fn.restart()
    graph = capture_graph(fn, calls)
    graph.replay()
    timer.clock.synchronize()
    return graph


def graph_region(timer: Timer, fn: Callable[[], Any], sets: int = 1) -> Region:
    """The CUDA graph of ``fn`` (warmed up) to replay for its GPU time, as a Region to sample."""
    if sets > 1:
        graph = _warm_capture(timer, fn, sets)
        cycle = timer.shortest_us(graph.replay)  # its replay cost is shared by ``sets`` calls already
        m = calls_per_sample(cycle, GRAPH_TARGET_US, max(1, MAX_GRAPH_CALLS // sets))
        if m > 1:
            del graph
            graph = _warm_capture(timer, fn, m * sets)
        return Region(graph.replay, GRAPH, m * sets)
    # k only grows: each estimate can be too long (the replay's own cost, or a host that
    # submits replays more slowly than the GPU runs them), never too short, so a per-call time
    # that shrinks as k grows was inflated and k is sized again from the longer graph. The
    # first graph holds 2 calls: a one-call replay can read 100 us for a 2 us kernel (seen on
    # an H100, vector_add 65536: k = 1 and 20 us reported), which would stop sizing at once.
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
