"""``out = a @ b`` with tensor cores: fp16 / bf16 (fp32 accumulation) and fp32 as TF32 or IEEE.

The pointer kernel here runs on any GPU: a program per output tile, K walked in BLOCK_K steps
that Triton pipelines through shared memory (on Hopper it lowers to wgmma); tiles are visited
in GROUP_M-tall column groups so that consecutive programs share A row-panels and B
column-panels while they are still in L2. On Hopper and later the TMA kernels of
matmul_tma.py join it, and the first call for each problem races them all (tuning.py).

Measured on an H200 (triton 3.6, against cuBLAS through torch.matmul), the pointer kernel
alone: fp16 / bf16 0.96x at 4096^3, 0.99x at 4096x11008x4096; TF32 0.82x; 1000^3 0.25x; with
the TMA kernels in the race see matmul_tma.py. TF32 needs B K-major (as nn.Linear keeps its
weight): Hopper's TF32 wgmma reads B only that way, and with a row-major B it ran at ~0.25x.

Under the Triton interpreter (``TRITON_INTERPRET=1``) or with CPU tensors, racing has nothing
to measure, so the pointer kernel runs with one small tile.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from envcheck.bench.kernels import tuning
from envcheck.bench.kernels.tile_order import grouped_tile
from envcheck.bench.kernels.tuning import POINTER, TMA, TMA_PERSISTENT, Tile

matmul_tma: types.ModuleType | None
try:
    from envcheck.bench.kernels import matmul_tma
except ImportError:  # a Triton without tensor descriptors: the pointer kernel only
    matmul_tma = None

# Offsets are int32 unless an operand spans 2^31 elements; module-level so a test can force int64.
_INT32_LIMIT = 2**31

# precision argument -> tl.dot input_precision, per dtype. fp16/bf16 have one precision (their
# own: tensor cores read them natively); "tf32" there would only be ignored by tl.dot.
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
        # The wrapper checked these are multiples of VEC (16 bytes of elements). Triton only
        # infers divisibility by 16 elements from argument values, so without the hints a
        # shape like 1000 would turn every load into scalar accesses (~6x slower at 1000^3).
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
    # Rows/cols past the edge wrap around (% M, % N) instead of being masked: the loads stay
    # unmasked along M and N (cheaper, better pipelined) and the store below drops them.
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
            # Interpreter only: numpy has no bfloat16, so the interpreter's dot would multiply raw
            # bits. bf16 -> fp32 is exact and so is every bf16 x bf16 product in fp32, so the
            # IEEE fp32 dot computes what the tensor cores do (fp32 accumulation).
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = _dot(a, b, acc, INPUT_PRECISION, ALLOW_TF32)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


# Candidates raced per problem (see tuning.py). The pointer kernel runs on any GPU; the TMA
# kernels (matmul_tma.py) on Hopper and later where the operands' layout allows.
_CANDIDATES_16BIT = (
    # Large square-ish problems: the widest tile gets the most FLOPs per byte of shared-memory
    # traffic; 3 stages x 48 KiB fit. On an H200 at 4096^3: 0.96x of cuBLAS.
    Tile(POINTER, 128, 256, 64, 3, 8),
    # Same tile transposed, for tall outputs (M >> N) where 128x256 leaves a ragged last column.
    Tile(POINTER, 256, 128, 64, 3, 8),
    # Mid-size or odd shapes (e.g. 1000^3) where 128x256 tiles give fewer programs than SMs.
    Tile(POINTER, 128, 128, 64, 4, 8),
    # Small outputs: 64x128 tiles quadruple the program count of 128x256 (512^3: 0.85x, the best).
    Tile(POINTER, 64, 128, 64, 4, 4),
    # TMA: 1000^3 at 0.67x (pointer kernels: 0.25x).
    Tile(TMA, 128, 128, 64, 5, 4),
    # Persistent TMA: 4096^3 at 0.995x, 8192^3 at 1.02x.
    Tile(TMA_PERSISTENT, 128, 256, 64, 4, 8),
    # Persistent TMA, smaller tile: 4096x11008x4096 at 1.07x.
    Tile(TMA_PERSISTENT, 128, 128, 64, 5, 4),
)

# fp32 operands are twice as wide: half the K depth per stage keeps the same shared memory.
# The same candidates serve TF32 (tensor cores) and IEEE (FMA); they are raced separately.
_CANDIDATES_32BIT = (
    Tile(POINTER, 128, 256, 32, 3, 8),
    Tile(POINTER, 128, 128, 32, 4, 8),
    Tile(POINTER, 64, 128, 32, 4, 4),
    # TF32 at 4096^3: 0.99x (pointer kernels: 0.82x).
    Tile(TMA_PERSISTENT, 128, 256, 32, 3, 8),
    Tile(TMA_PERSISTENT, 128, 128, 32, 4, 8),
)

Launcher = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]

# Everything the launch depends on (shapes, dtypes, strides, device, 16-byte alignment) -> the
# winning tile and its launcher with every argument but the tensors bound: a warm call costs a
# dict lookup and the launch itself (a per-call dispatch doubled the host time of a 1024^3 call).
_LAUNCHERS: dict[tuple[Any, ...], tuple[Tile | None, Launcher]] = {}

# Interpreter: one small tile, little numpy work per program.
_INTERPRET_TILE = Tile(POINTER, 32, 32, 32, 1, 4, group_m=4)


# Decided once, when @triton.jit ran: under TRITON_INTERPRET=1 it returns an interpreter
# object instead of a JITFunction, whatever the environment says later.
_INTERPRETED = not isinstance(_matmul_kernel, triton.runtime.JITFunction)


@functools.cache
def _sm_count(device: int) -> int:
    return int(torch.cuda.get_device_properties(device).multi_processor_count)


@functools.cache
def _has_tma(device: int) -> bool:
    """TMA needs Hopper (compute capability 9.0) or later and a Triton with tensor descriptors."""
    return matmul_tma is not None and torch.cuda.get_device_capability(device)[0] >= 9


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str) -> torch.Tensor:
    """``out = a @ b`` for a (M, K), b (K, N), out (M, N), all one dtype; returns ``out``.

    ``precision``: ``fp16`` / ``bf16`` for those dtypes, ``tf32`` or ``fp32`` (IEEE) for fp32.
    Accumulates in fp32. The first call for a new problem (sizes, dtype, precision, layout)
    races the candidate kernels and tiles (compiling each, synchronising); later calls launch
    the winner directly.
    """
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
    dtype = a.dtype
    if b.dtype != dtype or out.dtype != dtype or dtype not in _PRECISIONS:
        raise ValueError(f"matmul needs a, b and out of one dtype among fp32/fp16/bf16, got "
                         f"{a.dtype}, {b.dtype}, {out.dtype}")
    input_precision = _PRECISIONS[dtype].get(precision)
    if input_precision is None:
        raise ValueError(f"matmul precision {precision!r} does not apply to {dtype}: use "
                         f"{' or '.join(_PRECISIONS[dtype])}")
    return input_precision


def _race(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str) -> tuple[Tile | None, Launcher]:
    """Validate, race this problem's candidates (tuning.fastest), return the winner and its launcher."""
    input_precision = _validate(a, b, out, precision)
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return None, lambda a, b, out: None  # an empty output: nothing to launch
    device = a.get_device()
    tma = K > 0 and _has_tma(device) and matmul_tma.eligible(a, b, out)
    candidates = _CANDIDATES_32BIT if a.dtype == torch.float32 else _CANDIDATES_16BIT
    launchers = {tile: launcher(tile, a, b, out, input_precision, precision == "tf32")
                 for tile in candidates if tma or tile.kind == POINTER}
    tile = tuning.fastest({t: functools.partial(launch, a, b, out) for t, launch in launchers.items()})
    return tile, launchers[tile]


def vector_aligned(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether the pointer kernel may load 16 bytes at a time along rows (its ALIGNED hint)."""
    vec = 16 // a.element_size()
    K, N = a.shape[1], b.shape[1]
    return (K % vec == 0 and N % vec == 0 and a.stride(1) == 1 and b.stride(1) == 1 and out.stride(1) == 1
            and a.stride(0) % vec == 0 and b.stride(0) % vec == 0 and out.stride(0) % vec == 0)


def launcher(tile: Tile, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, input_precision: str,
             allow_tf32: bool, *, upcast: bool = False) -> Launcher:
    """A launch of ``tile``'s kernel for operands shaped, strided and aligned as these are, with
    everything but the tensors bound. ``upcast``: interpreter only (bf16 widened to fp32)."""
    M, K = a.shape
    N = b.shape[1]
    if tile.kind != POINTER:
        assert matmul_tma is not None
        return functools.partial(matmul_tma.launch, input_precision=input_precision, tile=tile,
                                 programs=_sm_count(a.get_device()) if a.is_cuda else 2, upcast=upcast)
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
    """The kernel and tile the race picked for this problem; None before its first GPU call.

    With several layouts of one problem raced (e.g. a row-major and a K-major B), the first.
    """
    for (a_shape, b_shape, _, a_dtype, _, _, prec, *_), (tile, _) in _LAUNCHERS.items():
        if tile is not None and (*a_shape, b_shape[1], a_dtype, prec) == (m, k, n, dtype, precision):
            return tile
    return None


def tuned_config(m: int, n: int, k: int, dtype: torch.dtype, precision: str) -> dict[str, Any] | None:
    """:func:`tuned_tile` as a dict (kernel kind, block sizes, stages, warps), e.g. for a log."""
    tile = tuned_tile(m, n, k, dtype, precision)
    return tile.describe() if tile is not None else None
