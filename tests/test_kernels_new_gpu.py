"""The new Triton kernels (issue 22) compiled for a real GPU: the interpreter's cases (correct at
every precision, planted bugs failing) plus the suite's sizes, and CUDA-graph safety.

Same path and judgement as ``test_kernels_new.py`` (the worker's inputs, bindings, NaN-poisoned
output, float64 reference, the analysis's tolerance).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_kernels_new import DTYPES, Case, _precisions, cases, run_case

pytestmark = pytest.mark.gpu

# Multi-wave grids, the first users' shapes and the verification's headline shapes.
GPU_SHAPES: dict[str, tuple[tuple[int, ...], ...]] = {
    "conv2d": ((32, 64, 32, 32, 64, 3, 1), (16, 64, 64, 64, 128, 5, 2), (8, 32, 128, 128, 64, 7, 2),
               (8, 32, 127, 129, 48, 3, 1)),
    "layer_norm": ((4096, 1024), (1000, 4097), (1024, 32768)),
    "softmax_fwbw": ((4096, 1024), (1000, 4097), (1024, 32768)),
    "linear_fwbw": ((1000, 1001, 999),),  # each new problem and layout races matmul tiles: few shapes
    **{f"{how}_{over}": ((4, 512, 896), (64, 1024, 1024), (1000, 3, 4097), (1, 1, 3))
       for how in ("sum", "max") for over in ("all", "inner", "lead")},
}


def gpu_cases() -> list[Case]:
    out = list(cases())  # the interpreter's cases, correct and planted, compiled this time
    for op, shapes in GPU_SHAPES.items():
        for dtype in DTYPES:
            for precision in _precisions(op, dtype):
                out += [Case(op, dtype, precision, s) for s in shapes]
    return out


@pytest.fixture(scope="module")
def cuda() -> Any:
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return torch


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in gpu_cases()])
def test_new_kernel_on_the_gpu(case: Case, cuda: Any) -> None:
    r = run_case(case, "cuda")
    if case.plant:
        assert not r["passed"], f"planted {case.plant} passed (error {r['ratio']:.3g} x its bound)"
    else:
        assert r["poisoned"] and r["passed"], f"broke {r['broken']}, error {r['ratio']:.3g} x its bound"


@pytest.mark.parametrize("op", list(GPU_SHAPES))
def test_new_kernel_replays_in_a_cuda_graph(op: str, cuda: Any) -> None:
    """Bound once (workspaces made at binding), warmed up, captured: replays give the eager result."""
    from envcheck.bench import impls

    torch = cuda
    shape = GPU_SHAPES[op][0]
    dtype = "fp16"
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = impls.make_inputs(op, shape, dtype, "cuda", gen)
    out = impls.make_output(op, shape, dtype, "cuda")
    fn = impls.triton_impl(op, inputs, out, dtype, shape=shape)
    fn()
    torch.cuda.synchronize()
    eager = out.clone()
    out.fill_(float("nan"))
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)
