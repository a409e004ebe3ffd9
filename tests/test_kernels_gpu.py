"""envcheck's Triton kernels compiled for a real GPU: the CPU checks at large sizes, plus CUDA-graph safety.

Same cases and judgement as ``test_kernels.py`` (float64 reference, NaN-poisoned ``out``,
tolerance of the precision used), at the sizes a benchmark runs: multi-wave grids, long rows
(softmax's online kernel), the autotuned matmul configs on odd and LLM-shaped problems.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from test_kernels import DTYPES, MATMUL_PRECISIONS, TOLERANCE, Case, check_result, run_case

pytestmark = pytest.mark.gpu


def gpu_cases() -> list[Case]:
    cases: list[Case] = []
    for dtype in DTYPES:
        for n in (2**20 + 3, 2**26):
            cases += [Case("vector_add", dtype, dtype, (n,)), Case("relu", dtype, dtype, (n,))]
        cases.append(Case("relu", dtype, dtype, (2**20 + 3,), "nan"))
        # (65536, 7): many short rows packed per program; 32768: the longest single-tile row;
        # 50257 (a vocabulary size): the online kernel.
        for shape in ((65536, 7), (4096, 1000), (1024, 32768), (256, 50257)):
            cases.append(Case("softmax", dtype, dtype, shape))
        cases += [Case("softmax", dtype, dtype, (512, 3000), "neg_inf"),
                  Case("softmax", dtype, dtype, (512, 3000), "strided")]
        for shape in ((100000, 5), (8192, 8192), (3, 2**20 + 1)):
            cases.append(Case("row_sum", dtype, dtype, shape))
        cases.append(Case("row_sum", dtype, dtype, (2048, 3000), "strided"))
    for dtype, precision in MATMUL_PRECISIONS:
        for shape in ((1000, 1000, 1000), (1, 4096, 4096), (4096, 4096, 4096), (257, 129, 4099)):
            cases.append(Case("matmul", dtype, precision, shape))
        cases.append(Case("matmul", dtype, precision, (1000, 1000, 1000), "strided"))
    for dtype in ("fp16", "bf16"):
        cases.append(Case("matmul", dtype, dtype, (4096, 11008, 4096)))
    return cases


@pytest.mark.parametrize("case", gpu_cases(), ids=lambda c: c.id)
def test_gpu_kernel_matches_float64_reference(case: Case) -> None:
    check_result(case, run_case(case, "cuda"))


def _graph_replay(fn: Any, *args: Any) -> None:
    """Warm up (compile, autotune) on a side stream, capture one call, replay it."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn(*args)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(*args)
    # New inputs in place after capture: the replay must read them, not what was captured.
    for t in args:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            t.normal_()
    out = args[-2] if isinstance(args[-1], str) else args[-1]
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()


def test_every_kernel_replays_correctly_from_a_cuda_graph() -> None:
    import torch

    from envcheck.bench import kernels

    dev = "cuda"
    x, y, out = (torch.randn(1 << 20, device=dev) for _ in range(3))
    # out is also randomised by the replay helper; restore x and y meaning after
    _graph_replay(kernels.vector_add, x, y, out)
    torch.testing.assert_close(out, x + y)
    _graph_replay(kernels.relu, x, out)
    torch.testing.assert_close(out, torch.relu(x))
    m, mout = torch.randn(300, 5000, device=dev), torch.empty(300, 5000, device=dev)
    _graph_replay(kernels.softmax, m, mout)
    torch.testing.assert_close(mout, torch.softmax(m, dim=-1))
    s = torch.empty(300, device=dev)
    _graph_replay(kernels.row_sum, m, s)
    torch.testing.assert_close(s, m.sum(dim=-1), rtol=1e-5, atol=1e-3)
    a, b = torch.randn(512, 384, device=dev, dtype=torch.float16), torch.randn(384, 640, device=dev, dtype=torch.float16)
    c = torch.empty(512, 640, device=dev, dtype=torch.float16)
    _graph_replay(kernels.matmul, a, b, c, "fp16")
    torch.testing.assert_close(c, a @ b, rtol=2e-2, atol=5e-2)


def test_warm_calls_allocate_no_device_memory() -> None:
    """Warm calls: both kernels' first calls (compiles) come before the count, and no garbage collection runs
    during it (one set off by softmax's compile, inside the count, could free earlier tests' tensors)."""
    import gc

    import torch

    from envcheck.bench import kernels

    a, b = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    c = torch.empty(1024, 1024, device="cuda")
    kernels.matmul(a, b, c, "tf32")  # compile + autotune
    kernels.softmax(a, c)
    torch.cuda.synchronize()
    gc.collect()
    gc.disable()
    try:
        before = torch.cuda.memory_allocated()
        for _ in range(3):
            kernels.matmul(a, b, c, "tf32")
            kernels.softmax(a, c)
        torch.cuda.synchronize()
        assert torch.cuda.memory_allocated() == before
    finally:
        gc.enable()


def test_matmul_reports_the_config_autotuning_picked() -> None:
    import torch

    from envcheck.bench import kernels
    from envcheck.bench.kernels.matmul import tuned_tile
    from envcheck.bench.kernels.tuning import KINDS

    a = torch.randn(768, 768, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    assert tuned_tile(768, 768, 768, torch.bfloat16, "bf16") is None
    kernels.matmul(a, a, c, "bf16")
    first = c.clone()
    tile = tuned_tile(768, 768, 768, torch.bfloat16, "bf16")
    config = tile.describe() if tile is not None else None
    assert config is not None and config["BLOCK_M"] in (64, 128, 256) and config["num_warps"] in (4, 8)
    assert config["kernel"] in KINDS
    from envcheck.bench import impls

    label = impls.triton_kernel("matmul", (768, 768, 768), "bf16", "bf16")
    assert label is not None and label.startswith(config["kernel"] + " ")  # what the report's case records
    c.fill_(float("nan"))
    kernels.matmul(a, a, c, "bf16")  # the cached-config launch path
    torch.cuda.synchronize()
    assert torch.equal(c, first)


@pytest.mark.parametrize(("dtype", "precision"), MATMUL_PRECISIONS, ids=lambda v: str(v))
def test_every_matmul_candidate_is_correct_not_only_the_winner(dtype: str, precision: str) -> None:
    """The race keeps whichever candidate is fastest on the GPU at hand, so each must be right:
    every kernel and tile of the dtype, on an odd shape and with a K-major B."""
    import torch

    from envcheck.bench.kernels.tuning import POINTER

    # The module, not the function of the same name that the kernels package exports.
    mm = importlib.import_module("envcheck.bench.kernels.matmul")
    tdtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    candidates = mm._CANDIDATES_32BIT if dtype == "fp32" else mm._CANDIDATES_16BIT
    device = torch.cuda.current_device()
    input_precision = mm._PRECISIONS[tdtype][precision]
    gen = torch.Generator(device="cuda").manual_seed(0)
    tested = 0
    for m, n, k, kmajor in ((1000, 1000, 1000, False), (1000, 1000, 1000, True), (136, 2048, 520, False)):
        a = torch.randn(m, k, generator=gen, device="cuda").to(tdtype)
        b = (torch.randn(n, k, generator=gen, device="cuda").t() if kmajor
             else torch.randn(k, n, generator=gen, device="cuda")).to(tdtype)
        ref = a.double() @ b.double()
        tma = (mm.matmul_tma is not None and mm._device(device)[1][0] >= 9
               and mm.matmul_tma.eligible(a, b, torch.empty(m, n, device="cuda", dtype=tdtype)))
        for tile in candidates:
            if tile.kind != POINTER and not tma:
                continue
            out = torch.full((m, n), float("nan"), device="cuda", dtype=tdtype)
            try:
                mm.launcher(tile, a, b, out, input_precision, precision == "tf32", programs=mm._device(device)[0])(a, b, out)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - too much shared memory for this GPU: the race drops it too
                assert "out of resource" in str(e).lower(), f"{tile}: {e}"
                continue
            err = float((out.double() - ref).norm() / ref.norm())
            assert err <= TOLERANCE[precision], f"{tile} {m}x{n}x{k} K-major B={kmajor}: rel L2 {err:.3g}"
            tested += 1
    assert tested >= len(candidates)
