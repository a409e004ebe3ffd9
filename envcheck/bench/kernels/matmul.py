"""``out = a @ b`` with tensor cores: fp16 / bf16 (fp32 accumulation) and fp32 as TF32 or IEEE. The pointer
kernel runs anywhere; on Hopper the TMA kernels (matmul_tma.py) join it and each problem's first call races them
(tuning.py). TF32 needs B K-major (Hopper's TF32 wgmma reads B only that way, as nn.Linear keeps its weight).
Under the interpreter or on CPU tensors, the pointer kernel runs one small tile.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from envcheck.bench import compile_cache
from envcheck.bench.kernels import tuning
from envcheck.bench.kernels.checks import one_dtype
from envcheck.bench.kernels.tile_order import grouped_tile
from envcheck.bench.kernels.tuning import POINTER, TMA, TMA_PERSISTENT, Tile

matmul_tma: types.ModuleType | None
try:
    from envcheck.bench.kernels import matmul_tma
except ImportError:  # a Triton without tensor descriptors: the pointer kernel only
    matmul_tma = None

_INT32_LIMIT = 2**31  # int64 offsets from this size on; module-level so a test can force them

# precision argument -> tl.dot input_precision, per dtype (fp16/bf16: their own; "tf32" is ignored there).
_PRECISIONS: dict[torch.dtype, dict[str, str]] = {
    torch.float32: {"tf32": "tf32", "fp32": "ieee"},
    torch.float16: {"fp16": "tf32"},
    torch.bfloat16: {"bf16": "tf32"},
}

# Triton 3.0 replaced tl.dot's allow_tf32 flag with input_precision; both are supported.
_HAS_INPUT_PRECISION = "input_precision" in inspect.signature(tl.dot).parameters

if _HAS_INPUT_PRECISION:
    @triton.jit
    def _dot(a, b, acc, INPUT_PRECISION: tl.constexpr, ALLOW_TF32: tl.constexpr):
        return tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
else:  # triton < 3.0
    @triton.jit
    def _dot(a, b, acc, INPUT_PRECISION: tl.constexpr, ALLOW_TF32: tl.constexpr):
        return acc + tl.dot(a, b, allow_tf32=ALLOW_TF32)


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   INPUT_PRECISION: tl.constexpr, ALLOW_TF32: tl.constexpr, INT64: tl.constexpr,
                   UPCAST: tl.constexpr, ALIGNED: tl.constexpr, VEC: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    if ALIGNED:
        # Multiples of VEC (16 bytes), as the wrapper checked: Triton infers divisibility by 16 elements only,
        # so without the hints a shape like 1000 would make every load scalar (~6x slower at 1000^3).
        K = tl.multiple_of(K, VEC)
        N = tl.multiple_of(N, VEC)
        stride_am = tl.multiple_of(stride_am, VEC)
        stride_bk = tl.multiple_of(stride_bk, VEC)
        stride_cm = tl.multiple_of(stride_cm, VEC)
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if INT64:
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # Rows/cols past the edge wrap around instead of being masked (cheaper, better pipelined loads); the
    # store drops them.
    ram = rm % M
    rbn = rn % N
    if ALIGNED:
        # N % VEC == 0 and tiles start at multiples of VEC, so wrapping never splits a group.
        rbn = tl.max_contiguous(tl.multiple_of(rbn, VEC), VEC)
    a_ptrs = a_ptr + ram[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rbn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        if UPCAST:
            # Interpreter only (numpy has no bfloat16): bf16 products are exact in fp32, so the IEEE fp32 dot
            # computes what the tensor cores do.
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = _dot(a, b, acc, INPUT_PRECISION, ALLOW_TF32)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


# Candidates raced per problem (tuning.py); what each was for and how it did: docs/measurement.md.
_CANDIDATES_16BIT = (
    Tile(POINTER, 128, 256, 64, 3, 8),
    Tile(POINTER, 256, 128, 64, 3, 8),  # tall outputs (M >> N)
    Tile(POINTER, 128, 128, 64, 4, 8),
    Tile(POINTER, 64, 128, 64, 4, 4),
    Tile(TMA, 128, 128, 64, 5, 4),
    Tile(TMA_PERSISTENT, 128, 256, 64, 4, 8),
    Tile(TMA_PERSISTENT, 128, 128, 64, 5, 4),
)
# fp32 operands are twice as wide: half the K depth per stage. TF32 and IEEE are raced apart.
_CANDIDATES_32BIT = (
    Tile(POINTER, 128, 256, 32, 3, 8),
    Tile(POINTER, 128, 128, 32, 4, 8),
    Tile(POINTER, 64, 128, 32, 4, 4),
    Tile(TMA_PERSISTENT, 128, 256, 32, 3, 8),
    Tile(TMA_PERSISTENT, 128, 128, 32, 4, 8),
)
# Per compute capability and precision, candidates that never won a race in the committed H100 and H200
# reports: not compiled nor raced there (the tall tile stays for tall outputs).
_NEVER_WON: dict[tuple[int, int], dict[str, frozenset[Tile]]] = {
    (9, 0): {
        "16bit": frozenset({_CANDIDATES_16BIT[1]}),
        "tf32": frozenset({_CANDIDATES_32BIT[1]}),
        "fp32": frozenset(_CANDIDATES_32BIT[1:2] + _CANDIDATES_32BIT[3:]),
    },
}

Launcher = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]

# What a launch depends on (shapes, dtypes, strides, device, 16-byte alignment) -> the winning tile and its
# launcher with all but the tensors bound: a warm call is a dict lookup and the launch.
_LAUNCHERS: dict[tuple[object, ...], tuple[Tile | None, Launcher]] = {}

_INTERPRET_TILE = Tile(POINTER, 32, 32, 32, 1, 4, group_m=4)  # little numpy work per program
# Decided when @triton.jit ran: under TRITON_INTERPRET=1 it made an interpreter object, not a JITFunction.
_INTERPRETED = not isinstance(_matmul_kernel, triton.runtime.JITFunction)


# CUDA device -> (SM count, compute capability): read once, or given by compile_ahead.py (which opens no GPU).
DEVICES: dict[int, tuple[int, tuple[int, int]]] = {}


def _device(device: int) -> tuple[int, tuple[int, int]]:
    if device not in DEVICES:
        props = torch.cuda.get_device_properties(device)
        DEVICES[device] = (int(props.multi_processor_count), (int(props.major), int(props.minor)))
    return DEVICES[device]


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str) -> torch.Tensor:
    """``out = a @ b`` for a (M, K), b (K, N), out (M, N) of one dtype; ``precision`` ``fp16`` / ``bf16``, or
    ``tf32`` / ``fp32`` (IEEE) for fp32. The first call of a new problem picks its tile (``_race``)."""
    if _INTERPRETED or not a.is_cuda:
        input_precision = _validate(a, b, out, precision)
        if a.shape[0] and b.shape[1]:
            # numpy has no bfloat16: the interpreter multiplies bf16 as the exact fp32 it widens to.
            upcast = a.dtype == torch.bfloat16
            launcher(_INTERPRET_TILE, a, b, out, "ieee" if upcast else input_precision, precision == "tf32",
                     upcast=upcast)(a, b, out)
        return out
    key = (a.shape, b.shape, out.shape, a.dtype, b.dtype, out.dtype, precision, a.stride(), b.stride(),
           out.stride(), a.get_device(), (a.data_ptr() | b.data_ptr() | out.data_ptr()) % 16)
    tuned = _LAUNCHERS.get(key)
    if tuned is None:
        tuned = _LAUNCHERS[key] = _race(a, b, out, precision)
    tuned[1](a, b, out)
    return out


def _validate(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str) -> str:
    """tl.dot's input precision for these operands, or ValueError in one line."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0] or out.shape != (a.shape[0], b.shape[1]):
        raise ValueError(f"matmul needs a (M, K), b (K, N) and out (M, N), got {tuple(a.shape)}, "
                         f"{tuple(b.shape)}, {tuple(out.shape)}")
    return dot_precision("matmul", "a, b and out", precision, a, b, out)


def dot_precision(op: str, names: str, precision: str, *tensors: torch.Tensor) -> str:
    """tl.dot's input precision for ``precision`` on ``tensors`` of one dtype, or ValueError in one line."""
    dtype = one_dtype(op, names, *tensors)
    if precision not in _PRECISIONS[dtype]:
        raise ValueError(f"{op} precision {precision!r} does not apply to {dtype}: use "
                         f"{' or '.join(_PRECISIONS[dtype])}")
    return _PRECISIONS[dtype][precision]


def _race(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str) -> tuple[Tile | None, Launcher]:
    """Validate, then this problem's tile: the one an earlier run on this GPU recorded
    (compile_cache.py), else the race's winner (tuning.fastest), recorded; with its launcher."""
    input_precision = _validate(a, b, out, precision)
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return None, lambda a, b, out: None  # an empty output: nothing to launch
    sms, cc = _device(a.get_device())
    tiles = candidates(a, b, out, precision, cc)
    key = compile_cache.problem_key(a, b, out, precision)
    known = compile_cache.tile(key)
    if known in tiles:
        return known, launcher(known, a, b, out, input_precision, precision == "tf32", programs=sms)
    launchers = {t: launcher(t, a, b, out, input_precision, precision == "tf32", programs=sms) for t in tiles}
    tile = tuning.fastest({t: functools.partial(launch, a, b, out) for t, launch in launchers.items()})
    compile_cache.record(key, tile)
    return tile, launchers[tile]


def candidates(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str, cc: tuple[int, int]
               ) -> tuple[Tile, ...]:
    """The tiles raced for this problem on a GPU of compute capability ``cc``: TMA ones on Hopper and later
    where the operands allow, less those that never won on ``cc`` (``_NEVER_WON``)."""
    tma = a.shape[1] > 0 and matmul_tma is not None and cc[0] >= 9 and matmul_tma.eligible(a, b, out)
    wide = a.dtype == torch.float32
    never = _NEVER_WON.get(cc, {}).get(precision if wide else "16bit", frozenset())
    tall = a.shape[0] >= 2 * b.shape[1]
    return tuple(t for t in (_CANDIDATES_32BIT if wide else _CANDIDATES_16BIT)
                 if (tma or t.kind == POINTER) and (t not in never or (tall and t.block_m > t.block_n)))


def vector_aligned(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether the pointer kernel may load 16 bytes at a time along rows (its ALIGNED hint)."""
    vec = 16 // a.element_size()
    K, N = a.shape[1], b.shape[1]
    return (K % vec == 0 and N % vec == 0 and a.stride(1) == 1 and b.stride(1) == 1 and out.stride(1) == 1
            and a.stride(0) % vec == 0 and b.stride(0) % vec == 0 and out.stride(0) % vec == 0)


def launcher(tile: Tile, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, input_precision: str,
             allow_tf32: bool, *, upcast: bool = False, programs: int = 2) -> Launcher:
    """A launch of ``tile``'s kernel for operands laid out as these, all but the tensors bound; ``programs``:
    the persistent kernel's (the SM count); ``upcast``: interpreter only (bf16 widened to fp32)."""
    M, K = a.shape
    N = b.shape[1]
    if tile.kind != POINTER:
        assert matmul_tma is not None
        return functools.partial(matmul_tma.launch, input_precision=input_precision, tile=tile,
                                 programs=programs, upcast=upcast)
    grid = (triton.cdiv(M, tile.block_m) * triton.cdiv(N, tile.block_n),)
    kernel = _matmul_kernel[grid]
    sizes = (M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1))
    meta = {"INPUT_PRECISION": input_precision, "ALLOW_TF32": allow_tf32,
            "INT64": max(a.numel(), b.numel(), out.numel()) >= _INT32_LIMIT, "UPCAST": upcast,
            "ALIGNED": vector_aligned(a, b, out), "VEC": 16 // a.element_size(), **tile.blocks,
            "num_stages": tile.num_stages, "num_warps": tile.num_warps}

    def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        kernel(a, b, out, *sizes, **meta)

    return launch


def tuned_tile(m: int, n: int, k: int, dtype: torch.dtype, precision: str) -> Tile | None:
    """The tile the race picked for this problem (of several layouts, the first); None before its first GPU call."""
    for (a_shape, b_shape, _, a_dtype, _, _, prec, *_), (tile, _) in _LAUNCHERS.items():
        if tile is not None and (*a_shape, b_shape[1], a_dtype, prec) == (m, k, n, dtype, precision):
            return tile
    return None
