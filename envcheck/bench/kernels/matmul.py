"""``out = a @ b`` with tensor cores: fp16 / bf16 (fp32 accumulation) and fp32 as TF32 or IEEE.

One tiled kernel (a program per output tile, K walked in BLOCK_K steps that Triton pipelines
through shared memory; on Hopper it lowers to wgmma), autotuned over a few configs per
input width. Tiles are visited in GROUP_M-tall column groups so that consecutive programs
share A row-panels and B column-panels while they are still in L2.

Measured on an H200 (triton 3.6, vs cuBLAS through torch.matmul): fp16 / bf16 at 4096^3 and
4096x11008x4096 reach 0.92-0.99x; IEEE fp32 0.87-0.93x. Two known gaps: TF32 with a row-major B
runs at ~0.25x, because Hopper's TF32 wgmma reads B only K-major (a column-major B, i.e.
``b.t().contiguous().t()``, reached 306 vs 354 TFLOP/s); and small odd problems such as 1000^3
reach ~0.3x (too few 128-wide tiles to fill 132 SMs, and masked K tails).

Under the Triton interpreter (``TRITON_INTERPRET=1``) or with CPU tensors, autotuning has
nothing to measure, so one small fixed config runs instead.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import triton
import triton.language as tl

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
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # Grouped ordering: GROUP_M tile-rows are swept column by column, for L2 reuse.
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

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


def _config(bm: int, bn: int, bk: int, stages: int, warps: int) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                         num_stages=stages, num_warps=warps)


# fp16 / bf16, sized for Hopper (228 KiB shared memory per SM, wgmma on 2 warpgroups).
_CONFIGS_16BIT = [
    # Large square-ish problems: the widest tile gets the most FLOPs per byte of shared memory
    # traffic; 3 stages x 48 KiB fit. The best for 4096^3 on H100/H200: on an H200, timed
    # interleaved with cuBLAS, 0.963-0.967x (fp16) and 0.963-0.964x (bf16); 4 stages, GROUP_M=16
    # (both within 0.3% of it), 256x128 (0.88-0.89x) and 128x128x128 (0.79-0.80x) did not beat it.
    _config(128, 256, 64, 3, 8),
    # Same tile transposed, for tall outputs (M >> N) where 128x256 leaves a ragged last column.
    _config(256, 128, 64, 3, 8),
    # Mid-size or odd shapes (e.g. 1000^3) where 128x256 tiles give fewer programs than SMs.
    _config(128, 128, 64, 4, 8),
    # Small outputs: 64x128 tiles quadruple the program count of 128x256 to keep SMs busy.
    _config(64, 128, 64, 4, 4),
]

# fp32 operands are twice as wide: half the K depth per stage keeps the same shared memory.
# The same configs serve TF32 (tensor cores) and IEEE (FMA); they tune separately (the
# precision is part of the autotune key).
_CONFIGS_32BIT = [
    _config(128, 256, 32, 3, 8),
    _config(128, 128, 32, 4, 8),
    _config(64, 128, 32, 4, 4),
]

_KEY = ["M", "N", "K", "INPUT_PRECISION"]
_matmul_16bit = triton.autotune(configs=_CONFIGS_16BIT, key=_KEY)(_matmul_kernel)
_matmul_32bit = triton.autotune(configs=_CONFIGS_32BIT, key=_KEY)(_matmul_kernel)

# (M, N, K, dtype, precision, int64, aligned) -> (grid, launch meta) of the config autotuning picked.
_TUNED: dict[tuple[Any, ...], tuple[tuple[int], dict[str, Any]]] = {}

# Interpreter: one small tile, little numpy work per program.
_INTERPRET_META = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}


def _grid(meta: dict[str, Any]) -> tuple[int]:
    return (triton.cdiv(meta["M"], meta["BLOCK_M"]) * triton.cdiv(meta["N"], meta["BLOCK_N"]),)


# Decided once, when @triton.jit ran: under TRITON_INTERPRET=1 it returns an interpreter
# object instead of a JITFunction, whatever the environment says later.
_INTERPRETED = not isinstance(_matmul_kernel, triton.runtime.JITFunction)


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str) -> torch.Tensor:
    """``out = a @ b`` for a (M, K), b (K, N), out (M, N), all one dtype; returns ``out``.

    ``precision``: ``fp16`` / ``bf16`` for those dtypes, ``tf32`` or ``fp32`` (IEEE) for fp32.
    Accumulates in fp32. The first call for a new (M, N, K, dtype, precision) autotunes
    (compiles and times each config, synchronising); later calls only launch.
    """
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
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return out
    int64 = max(a.numel(), b.numel(), out.numel()) >= _INT32_LIMIT
    args = (a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1))
    allow_tf32 = precision == "tf32"
    vec = 16 // a.element_size()
    aligned = (K % vec == 0 and N % vec == 0 and a.stride(1) == 1 and b.stride(1) == 1 and out.stride(1) == 1
               and a.stride(0) % vec == 0 and b.stride(0) % vec == 0 and out.stride(0) % vec == 0)
    if _INTERPRETED or not a.is_cuda:
        upcast = dtype == torch.bfloat16
        _matmul_kernel[_grid](*args, INPUT_PRECISION="ieee" if upcast else input_precision, ALLOW_TF32=allow_tf32,
                              INT64=int64, UPCAST=upcast, ALIGNED=aligned, VEC=vec, **_INTERPRET_META)
        return out
    key = (M, N, K, dtype, precision, int64, aligned)
    tuned = _TUNED.get(key)
    if tuned is not None:
        # Launch the tuned config directly: the Autotuner's per-call dispatch (argument dicts,
        # key building) costs more host time than the launch itself.
        _matmul_kernel[tuned[0]](*args, INPUT_PRECISION=input_precision, ALLOW_TF32=allow_tf32, INT64=int64,
                                 UPCAST=False, ALIGNED=aligned, VEC=vec, **tuned[1])
        return out
    tuner = _matmul_32bit if dtype == torch.float32 else _matmul_16bit
    tuner[_grid](*args, INPUT_PRECISION=input_precision, ALLOW_TF32=allow_tf32, INT64=int64, UPCAST=False,
                 ALIGNED=aligned, VEC=vec)
    config = tuner.best_config
    meta = config.all_kwargs()
    grid = (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    _TUNED[key] = (grid, meta)
    return out


def tuned_config(m: int, n: int, k: int, dtype: torch.dtype, precision: str) -> dict[str, Any] | None:
    """The config autotuning picked for this problem (block sizes, warps, stages), e.g. for a report.

    None before the first GPU call with these sizes, dtype and precision.
    """
    for (tm, tn, tk, tdtype, tprecision, _, _), (_, meta) in _TUNED.items():
        if (tm, tn, tk, tdtype, tprecision) == (m, n, k, dtype, precision):
            return dict(meta)
    return None
