"""envcheck's Triton kernels: correctness against a float64 reference, argument checks, lazy loading.

The numeric checks run the kernels under the Triton interpreter (``TRITON_INTERPRET=1``),
which must be set before Triton decorates a kernel and then holds for the whole process. So
they run in child processes (this file executed as a script), and no other test, GPU tests
included, ever sees interpreted kernels. Each case poisons ``out`` with NaN first, so an element
a kernel failed to write shows up as NaN.

The case tables and :func:`run_case` are shared with ``test_kernels_gpu.py``.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# One pytest-xdist worker runs this module: its module fixture starts the child process(es) once.
pytestmark = pytest.mark.xdist_group("kernels")
ROOT = Path(__file__).resolve().parents[1]

# Bound on the relative L2 error for the arithmetic actually used.
TOLERANCE = {"fp32": 1e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 3e-2}
DTYPES = ("fp32", "fp16", "bf16")
MATMUL_PRECISIONS = (("fp32", "fp32"), ("fp32", "tf32"), ("fp16", "fp16"), ("bf16", "bf16"))

# Variants: "int64" forces 64-bit offsets (normally only past 2^31 elements); "strided" feeds
# transposed views; "online" forces softmax's looped kernel on short rows; "neg_inf" puts -inf
# entries (and one all -inf tile) into softmax rows; "nan" checks relu passes NaN through;
# "tma" / "tma_persistent" launch matmul's TMA kernels directly with a small tile (on a GPU the
# race decides which kernel runs, so each is checked on its own), "tma_strided" with a K-major B.
# "offset" / "online_offset" shift softmax rows by +100 as the benchmark's inputs are: a kernel
# that skipped the row max would overflow exp there.
VARIANTS = ("plain", "int64", "strided", "online", "neg_inf", "nan", "tma", "tma_persistent", "tma_strided",
            "offset", "online_offset")

# Shapes TMA can address (leading strides of 16 bytes: multiples of 8 fp16/bf16 or 4 fp32
# elements) that no tile divides, so every edge is out of bounds somewhere.
TMA_SHAPES = {"fp32": ((33, 44, 68), (1, 4, 4)), "fp16": ((33, 40, 72), (1, 8, 8)),
              "bf16": ((33, 40, 72), (1, 8, 8))}


@dataclass(frozen=True)
class Case:
    op: str
    dtype: str
    precision: str
    shape: tuple[int, ...]
    variant: str = "plain"

    @property
    def id(self) -> str:
        shape = "x".join(map(str, self.shape))
        return f"{self.op}-{self.dtype}-{self.precision}-{shape}-{self.variant}"


def cpu_cases() -> list[Case]:
    """Small, odd sizes: every masking edge, every dtype and precision, cheap enough to interpret."""
    cases: list[Case] = []
    for dtype in DTYPES:
        for n in (1, 7, 1000, 1025, 4097):
            cases += [Case("vector_add", dtype, dtype, (n,)), Case("relu", dtype, dtype, (n,))]
        cases += [Case("vector_add", dtype, dtype, (1025,), "int64"), Case("relu", dtype, dtype, (1025,), "int64"),
                  Case("relu", dtype, dtype, (1000,), "nan")]
        for shape in ((1, 1), (7, 13), (33, 1000), (4, 4097), (2, 40000)):
            cases.append(Case("softmax", dtype, dtype, shape))
        cases += [Case("softmax", dtype, dtype, (5, 1000), "online"), Case("softmax", dtype, dtype, (5, 1000), "neg_inf"),
                  Case("softmax", dtype, dtype, (7, 1001), "offset"),
                  Case("softmax", dtype, dtype, (7, 1001), "online_offset"),
                  Case("softmax", dtype, dtype, (6, 300), "strided"), Case("softmax", dtype, dtype, (3, 77), "int64")]
        # (100, 7): many short rows, a program of one row each (row_sum's config below 528 programs), as 1000
        # rows had, which took 8 s a dtype to interpret.
        for shape in ((1, 1), (7, 13), (33, 1000), (5, 4097), (100, 7), (3, 0)):
            cases.append(Case("row_sum", dtype, dtype, shape))
        cases += [Case("row_sum", dtype, dtype, (9, 300), "strided"), Case("row_sum", dtype, dtype, (9, 300), "int64")]
    for dtype, precision in MATMUL_PRECISIONS:
        for shape in ((1, 1, 1), (17, 33, 65), (64, 48, 80), (100, 100, 100), (31, 40, 129)):
            cases.append(Case("matmul", dtype, precision, shape))
        cases += [Case("matmul", dtype, precision, (33, 47, 70), "strided"),
                  Case("matmul", dtype, precision, (33, 47, 70), "int64")]
        for shape in TMA_SHAPES[dtype]:
            cases += [Case("matmul", dtype, precision, shape, variant)
                      for variant in ("tma", "tma_persistent", "tma_strided")]
    return cases


def _torch_dtype(name: str) -> Any:
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def _module(op: str) -> Any:
    return importlib.import_module(f"envcheck.bench.kernels.{op}")


def _force(case: Case) -> dict[tuple[Any, str], Any]:
    """Module settings a variant overrides; returns the old values to restore."""
    overrides: dict[tuple[Any, str], Any] = {}
    if case.variant == "int64":
        overrides[(_module(case.op), "_INT32_LIMIT")] = 0
    if case.variant in ("online", "online_offset"):
        overrides[(_module("softmax"), "_MAX_SINGLE_BLOCK_COLS")] = 0
        overrides[(_module("softmax"), "_ONLINE_BLOCK_COLS")] = 128
    old = {}
    for (module, name), value in overrides.items():
        old[(module, name)] = getattr(module, name)
        setattr(module, name, value)
    return old


def _inputs(case: Case, device: str, gen: Any) -> tuple[list[Any], Any]:
    """(kernel arguments before ``out``, poisoned ``out``)."""
    import torch

    dtype = _torch_dtype(case.dtype)

    def rand(*shape: int, scale: float = 1.0) -> Any:
        return (torch.randn(*shape, generator=gen, dtype=torch.float32) * scale).to(device=device, dtype=dtype)

    def poisoned(*shape: int) -> Any:
        return torch.full(shape, math.nan, device=device, dtype=dtype)

    if case.op == "vector_add":
        (n,) = case.shape
        return [rand(n), rand(n)], poisoned(n)
    if case.op == "relu":
        (n,) = case.shape
        x = rand(n)
        if case.variant == "nan":
            x[::97] = math.nan
        return [x], poisoned(n)
    if case.op in ("softmax", "row_sum"):
        rows, cols = case.shape
        if case.variant == "strided":
            x = rand(cols, rows, scale=3.0).t()  # column stride != 1
        else:
            x = rand(rows, cols, scale=3.0)
        if case.variant in ("offset", "online_offset"):
            x = x + 100.0
        if case.variant == "neg_inf":
            x[:, ::3] = -math.inf
            x[0, :200] = -math.inf  # a fully masked stretch at the start of a row
            x[1, :] = -math.inf  # an all -inf row: NaN, as torch gives
        if case.op == "row_sum":
            return [x], poisoned(rows)
        out = poisoned(cols, rows).t() if case.variant == "strided" else poisoned(rows, cols)
        return [x], out
    if case.op == "matmul":
        m, n, k = case.shape
        a = rand(m, k)
        strided = case.variant in ("strided", "tma_strided")
        b = rand(n, k).t() if strided else rand(k, n)  # column-major B
        return [a, b], poisoned(m, n)
    raise ValueError(f"unknown op {case.op!r}")


def _reference(case: Case, args: list[Any]) -> Any:
    import torch

    wide = [a.to(torch.float64) for a in args]
    if case.op == "vector_add":
        return wide[0] + wide[1]
    if case.op == "relu":
        return torch.relu(wide[0])
    if case.op == "softmax":
        return torch.softmax(wide[0], dim=-1)
    if case.op == "row_sum":
        return wide[0].sum(dim=-1)
    return wide[0] @ wide[1]


def _launch_tma(case: Case, a: Any, b: Any, out: Any) -> Any:
    """One TMA kernel on its own: 32-wide tiles so the small shapes span several of them, and
    (persistent) fewer programs than tiles so each program walks more than one."""
    import torch

    from envcheck.bench.kernels import matmul_tma
    from envcheck.bench.kernels.matmul import _PRECISIONS
    from envcheck.bench.kernels.tuning import TMA, TMA_PERSISTENT, Tile

    assert matmul_tma.eligible(a, b, out), f"{case.id}: TMA cannot address these operands"
    tile = Tile(TMA, 32, 32, 16, 2, 4) if case.variant == "tma" else Tile(TMA_PERSISTENT, 32, 64, 16, 4, 4)
    upcast = a.dtype == torch.bfloat16 and not a.is_cuda  # numpy has no bfloat16
    precision = "ieee" if upcast else _PRECISIONS[a.dtype][case.precision]
    matmul_tma.launch(a, b, out, precision, tile, programs=2, upcast=upcast)
    return out


def run_case(case: Case, device: str) -> dict[str, Any]:
    """Run one case, return its measured error: rel_l2, max_abs, unwritten (NaN left in out), tolerance."""
    import torch

    from envcheck.bench import kernels

    gen = torch.Generator().manual_seed(sum(map(ord, case.id)))
    args, out = _inputs(case, device, gen)
    ref = _reference(case, args)
    old = _force(case)
    try:
        if case.variant.startswith("tma"):
            returned = _launch_tma(case, *args, out)
        else:
            fn = kernels.KERNELS[case.op]
            extra = [case.precision] if case.op == "matmul" else []
            returned = fn(*args, out, *extra)
    finally:
        for (module, name), value in old.items():
            setattr(module, name, value)
    if device != "cpu":
        torch.cuda.synchronize()
    got = out.to(torch.float64)
    expect_nan = torch.isnan(ref)
    unwritten = int((torch.isnan(got) & ~expect_nan).sum())
    diff = torch.where(expect_nan, 0.0, got - ref)
    ref_clean = torch.where(expect_nan, 0.0, ref)
    denom = float(torch.linalg.vector_norm(ref_clean))
    rel = float(torch.linalg.vector_norm(diff)) / denom if denom > 0 else float(torch.linalg.vector_norm(diff))
    return {
        "rel_l2": rel,
        "max_abs": float(diff.abs().max()) if diff.numel() else 0.0,
        "unwritten": unwritten,
        "nan_kept": bool(torch.equal(torch.isnan(got), expect_nan)),
        "returned_out": returned is out,
        "tolerance": TOLERANCE[case.precision],
        "numel": out.numel(),
    }


def check_result(case: Case, result: dict[str, Any]) -> None:
    """Assert one case's result (shared with the GPU tests)."""
    assert "error" not in result, result.get("error")
    assert result["returned_out"], "the wrapper must return the out tensor it was given"
    assert result["unwritten"] == 0, f"{result['unwritten']} of {result['numel']} output elements never written"
    assert result["nan_kept"], "NaN pattern differs from the reference"
    assert result["rel_l2"] <= result["tolerance"], (
        f"relative L2 error {result['rel_l2']:.3g} over {case.precision} tolerance {result['tolerance']:g} "
        f"(max abs {result['max_abs']:.3g})")


# ----------------------------------------------------------------------------------------------
# Child process: interpret-mode runner


def _child(case_ids: list[str]) -> int:
    if "triton" in sys.modules or os.environ.get("TRITON_INTERPRET") != "1":
        print(json.dumps({"fatal": "run me with TRITON_INTERPRET=1 in a fresh process"}))
        return 2
    from envcheck.bench.interpret import fix_scalar_index

    fix_scalar_index()
    wanted = set(case_ids)
    for case in cpu_cases():
        if case.id not in wanted:
            continue
        try:
            result = run_case(case, "cpu")
        except Exception as exc:  # noqa: BLE001 - reported per case, so one failure hides no other
            result = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps({"id": case.id, **result}), flush=True)
    return 0


# ----------------------------------------------------------------------------------------------
# Parent: run the cases in two child processes (one per core), matmul apart from the rest; in one under xdist.

_CHILD_TIMEOUT_S = 300


def core(case: Case) -> bool:
    """The cases the fast loop interprets: every op, dtype, precision and variant once, on a shape
    that no block divides (tails masked); the other shapes of the table run with the slow tests."""
    first = {"vector_add": (1025,), "relu": (1025,), "softmax": (4, 4097), "row_sum": (5, 4097),
             "matmul": (31, 40, 129)}
    return case.variant != "plain" or case.shape == first[case.op]


def _params() -> list[Any]:
    return [pytest.param(c, id=c.id, marks=() if core(c) else pytest.mark.slow) for c in cpu_cases()]


@pytest.fixture(scope="module")
def interpreted_results(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    # Only what this session will check is interpreted (the fast loop leaves the slow shapes out).
    wanted = {item.callspec.params["case"].id for item in request.session.items
              if getattr(item, "originalname", "") == "test_interpreted_kernel_matches_float64_reference"}
    cases = [c for c in cpu_cases() if c.id in wanted]
    groups = [[c.id for c in cases if c.op == "matmul"], [c.id for c in cases if c.op != "matmul"]]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        groups = [[i for g in groups for i in g]]  # under pytest-xdist the cores are the workers': one child
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, __file__, *ids], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for ids in groups if ids]
    results: dict[str, dict[str, Any]] = {}
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=_CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        for line in stdout.splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                assert "fatal" not in record, record["fatal"]
                results[record.pop("id")] = record
        if proc.returncode != 0:
            results.setdefault("_stderr", {})[str(proc.pid)] = stderr[-2000:]
    return results


@pytest.mark.parametrize("case", _params())
def test_interpreted_kernel_matches_float64_reference(case: Case, interpreted_results: dict) -> None:
    result = interpreted_results.get(case.id)
    assert result is not None, f"child process gave no result: {interpreted_results.get('_stderr')}"
    check_result(case, result)


def test_case_table_covers_every_op_dtype_and_precision() -> None:
    cases = cpu_cases()
    from envcheck.bench.kernels import OPS
    from tests.test_kernels_new import SHAPES as NEW_OPS  # the issue-22 kernels' own table

    assert {c.op for c in cases} | set(NEW_OPS) == set(OPS)
    assert {(c.dtype, c.precision) for c in cases if c.op == "matmul"} == set(MATMUL_PRECISIONS)
    assert len({c.id for c in cases}) == len(cases)
    assert {c.variant for c in cases} == set(VARIANTS)


# ----------------------------------------------------------------------------------------------
# In-process: loading, registry, argument checks (nothing is launched)


def test_importing_the_package_loads_neither_torch_nor_triton() -> None:
    code = ("import sys, envcheck.bench.kernels as k; "
            "print(sorted(m for m in ('torch', 'triton') if m in sys.modules)); print(k.OPS)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
    assert out[0] == "[]"
    assert "matmul" in out[1]


def test_triton_available_is_none_when_triton_imports() -> None:
    pytest.importorskip("triton")
    from envcheck.bench.kernels import triton_available

    assert triton_available() is None


def test_triton_available_gives_the_reason_when_triton_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from envcheck.bench.kernels import triton_available

    monkeypatch.setitem(sys.modules, "triton", None)  # makes `import triton` raise ImportError
    reason = triton_available()
    assert reason is not None and reason.startswith("cannot import Triton (ModuleNotFoundError")
    assert "\n" not in reason


def test_registry_maps_every_op_to_its_function_even_after_a_submodule_import() -> None:
    pytest.importorskip("triton")
    from envcheck.bench import kernels

    importlib.import_module("envcheck.bench.kernels.relu")
    assert set(kernels.KERNELS) == set(kernels.OPS)
    for op, fn in kernels.KERNELS.items():
        assert callable(fn) and fn.__name__ == op
        assert getattr(kernels, op) is fn
    from envcheck.bench.kernels import relu

    assert relu is kernels.KERNELS["relu"]
    with pytest.raises(AttributeError):
        kernels.no_such_kernel  # noqa: B018


def _t(*shape: int, dtype: str = "fp32", step: int = 1) -> Any:
    import torch

    dtypes = {"fp64": torch.float64, "int32": torch.int32}
    t = torch.zeros(*shape, dtype=dtypes.get(dtype) or _torch_dtype(dtype))
    return t[::step] if step > 1 else t


BAD_CALLS: list[tuple[str, Any, str]] = [
    ("vector_add", lambda: (_t(8), _t(8), _t(9)), "one length"),
    ("vector_add", lambda: (_t(8), _t(8, dtype="fp16"), _t(8)), "one dtype"),
    ("vector_add", lambda: (_t(2, 4), _t(2, 4), _t(2, 4)), "1-D"),
    ("vector_add", lambda: (_t(16, step=2), _t(8), _t(8)), "contiguous"),
    ("vector_add", lambda: (_t(8, dtype="fp64"),) * 3, "fp32/fp16/bf16"),
    ("relu", lambda: (_t(8), _t(8, dtype="bf16")), "one dtype"),
    ("relu", lambda: (_t(8), _t(7)), "one length"),
    ("relu", lambda: (_t(16, step=2), _t(8)), "contiguous"),
    ("softmax", lambda: (_t(4, 8), _t(8, 4)), "2-D shape"),
    ("softmax", lambda: (_t(4), _t(4)), "2-D shape"),
    ("softmax", lambda: (_t(4, 8, dtype="int32"), _t(4, 8, dtype="int32")), "fp32/fp16/bf16"),
    ("row_sum", lambda: (_t(4, 8), _t(8)), r"shape \(rows,\)"),
    ("row_sum", lambda: (_t(4, 8), _t(4, dtype="fp16")), "one dtype"),
    ("matmul", lambda: (_t(4, 8), _t(9, 3), _t(4, 3), "fp32"), r"a \(M, K\)"),
    ("matmul", lambda: (_t(4, 8), _t(8, 3), _t(3, 4), "fp32"), r"out \(M, N\)"),
    ("matmul", lambda: (_t(4, 8), _t(8, 3, dtype="fp16"), _t(4, 3), "fp32"), "one dtype"),
    ("matmul", lambda: (_t(4, 8, dtype="fp16"), _t(8, 3, dtype="fp16"), _t(4, 3, dtype="fp16"), "tf32"), "use fp16"),
    ("matmul", lambda: (_t(4, 8), _t(8, 3), _t(4, 3), "fp16"), "use tf32 or fp32"),
    ("matmul", lambda: (_t(4, 8), _t(8, 3), _t(4, 3), "ieee"), "does not apply"),
]


@pytest.mark.parametrize(("op", "make_args", "message"), BAD_CALLS, ids=[f"{c[0]}-{c[2]}" for c in BAD_CALLS])
def test_bad_arguments_raise_a_one_line_value_error(op: str, make_args: Any, message: str) -> None:
    pytest.importorskip("triton")
    from envcheck.bench import kernels

    with pytest.raises(ValueError, match=message) as info:
        kernels.KERNELS[op](*make_args())
    assert "\n" not in str(info.value)


def test_tma_eligibility_follows_the_16_byte_rules() -> None:
    import torch

    pytest.importorskip("triton")
    from envcheck.bench.kernels.matmul_tma import eligible

    def t(*shape: int, dtype: Any = torch.float16) -> Any:
        return torch.zeros(*shape, dtype=dtype)

    assert eligible(t(33, 40), t(40, 72), t(33, 72))
    assert eligible(t(33, 40), t(72, 40).t(), t(33, 72))  # K-major B, as nn.Linear keeps it
    assert eligible(t(5, 12, dtype=torch.float32), t(12, 4, dtype=torch.float32), t(5, 4, dtype=torch.float32))
    assert not eligible(t(33, 41), t(41, 72), t(33, 72))  # a's rows 82 bytes apart
    assert not eligible(t(33, 40), t(40, 71), t(33, 71))  # b's and out's rows 142 bytes apart
    assert not eligible(t(40, 33).t(), t(40, 72), t(33, 72))  # a column-major
    assert not eligible(t(33, 40), t(40, 72)[:, ::2], t(33, 36))  # b strided in both dims
    assert not eligible(t(33, 48)[:, 1:41], t(40, 72), t(33, 72))  # a starts 2 bytes into a row


def _race(monkeypatch: pytest.MonkeyPatch, times: dict[str, float | BaseException],
          fail: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """Race candidates named by ``times`` (their GPU time, or the error timing them raised);
    those in ``fail`` raise on their first call. Returns the winner and who was timed."""
    import torch

    pytest.importorskip("triton")
    from envcheck.bench.kernels.tuning import POINTER, Tile, fastest

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    tiles = {name: Tile(POINTER, 32 * (i + 1), 32, 32, 2, 4) for i, name in enumerate(times)}
    timed: list[str] = []

    def call(name: str) -> Any:
        def run() -> str:
            if name in fail:
                raise RuntimeError(f"out of resource: shared memory ({name})")
            return name
        return run

    def measure(fns: list[Any]) -> list[float | BaseException]:
        names = [fn() for fn in fns]
        timed.extend(names)
        return [times[name] for name in names]

    winner = fastest({tiles[name]: call(name) for name in times}, measure=measure)
    return next(name for name, tile in tiles.items() if tile == winner), timed


def test_race_picks_the_least_gpu_time(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _race(monkeypatch, {"a": 5.0, "b": 3.0, "c": 4.0}) == ("b", ["a", "b", "c"])


def test_race_drops_candidates_that_fail_and_raises_when_all_do(monkeypatch: pytest.MonkeyPatch) -> None:
    # a fails to compile, b fails while timed: c wins although both would have been faster.
    winner, timed = _race(monkeypatch, {"a": 1.0, "b": RuntimeError("capture failed"), "c": 3.0}, fail=("a",))
    assert winner == "c" and timed == ["b", "c"]
    with pytest.raises(RuntimeError, match="out of resource"):
        _race(monkeypatch, {"a": 1.0, "b": 2.0}, fail=("a", "b"))
    with pytest.raises(RuntimeError, match="capture failed"):
        _race(monkeypatch, {"a": RuntimeError("capture failed"), "b": RuntimeError("replay failed")})


def test_a_lone_candidate_wins_untimed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _race(monkeypatch, {"a": 9.0, "b": 1.0}, fail=("b",)) == ("a", [])


def test_tuned_tile_reads_the_cached_winner_by_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    pytest.importorskip("triton")
    from envcheck.bench.kernels.tuning import TMA_PERSISTENT, Tile

    mm = importlib.import_module("envcheck.bench.kernels.matmul")
    tile = Tile(TMA_PERSISTENT, 128, 256, 64, 4, 8)

    def key(m: int, n: int, k: int, dtype: Any, precision: str) -> tuple[Any, ...]:
        return ((m, k), (k, n), (m, n), dtype, dtype, dtype, precision, (k, 1), (n, 1), (n, 1), 0, 0)

    monkeypatch.setattr(mm, "_LAUNCHERS", {key(0, 8, 8, torch.float16, "fp16"): (None, lambda *a: None),
                                           key(64, 32, 16, torch.bfloat16, "bf16"): (tile, lambda *a: None)})
    assert mm.tuned_tile(64, 32, 16, torch.bfloat16, "bf16") == tile
    assert mm.tuned_tile(64, 32, 16, torch.bfloat16, "bf16").describe()["kernel"] == TMA_PERSISTENT
    assert mm.tuned_tile(64, 16, 32, torch.bfloat16, "bf16") is None  # N and K swapped: another problem
    assert mm.tuned_tile(64, 32, 16, torch.float16, "fp16") is None
    assert mm.tuned_tile(0, 8, 8, torch.float16, "fp16") is None  # an empty output ran no tile


def test_tile_label_names_kernel_tile_stages_and_warps() -> None:
    from envcheck.bench.kernels.tuning import TMA_PERSISTENT, Tile

    tile = Tile(TMA_PERSISTENT, 128, 256, 64, 4, 8)
    assert tile.label == "tma_persistent 128x256x64 s4 w8"
    assert tile.describe() == {"kernel": "tma_persistent", "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64,
                               "GROUP_M": 8, "num_stages": 4, "num_warps": 8}
    with pytest.raises(ValueError, match="unknown matmul kernel kind"):
        Tile("wgmma", 64, 64, 64, 2, 4)


def test_empty_inputs_return_out_without_launching() -> None:
    """Zero-size tensors need no program; launching a 0-sized grid would be an error on CUDA."""
    import torch

    pytest.importorskip("triton")
    from envcheck.bench import kernels

    e = torch.empty(0)
    assert kernels.vector_add(e, e, e) is e
    assert kernels.relu(e, e) is e
    x, out = torch.empty(0, 5), torch.empty(0, 5)
    assert kernels.softmax(x, out) is out
    sums = torch.empty(0)
    assert kernels.row_sum(x, sums) is sums
    c = torch.empty(0, 3)
    assert kernels.matmul(torch.empty(0, 4), torch.empty(4, 3), c, "tf32") is c


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))


def test_race_compiles_its_candidates_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """The candidates' first calls (their compiles) run at the same time: each waits here for all the
    others, which one call after another would never reach (issue 39: 72 s of compiling on an H200)."""
    import threading

    import torch

    pytest.importorskip("triton")
    from envcheck.bench.kernels.tuning import COMPILE_THREADS, POINTER, Tile, fastest

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    n = min(4, COMPILE_THREADS)
    met = threading.Barrier(n, timeout=30)
    tiles = [Tile(POINTER, 32 * (i + 1), 32, 32, 2, 4) for i in range(n)]
    winner = fastest({t: met.wait for t in tiles}, measure=lambda fns: [float(i) for i in range(len(fns), 0, -1)])
    assert winner == tiles[-1]
