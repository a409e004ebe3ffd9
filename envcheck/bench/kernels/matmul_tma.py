"""``out = a @ b`` with operands loaded by the Tensor Memory Accelerator (Hopper and later). ``tma``: a program per
output tile; ``tma_persistent``: one per SM walking tiles, the (tile, K) loop flattened so the next tile's loads
overlap this one's epilogue. Descriptors are built on the host and passed by value (a CUDA graph captures them).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from envcheck.bench.kernels.tile_order import grouped_tile
from envcheck.bench.kernels.tuning import TMA_PERSISTENT, Tile

_ALIGN_BYTES = 16  # TMA's unit: the base and every stride but the last (contiguous) dimension's


@triton.jit
def _tile_product(a_desc, b_desc, off_m, off_n, K, INPUT_PRECISION: tl.constexpr, B_KMAJOR: tl.constexpr,
                  UPCAST: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The (BLOCK_M, BLOCK_N) fp32 tile of ``a @ b`` at (off_m, off_n)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        off_k = k * BLOCK_K
        a = a_desc.load([off_m, off_k])
        if B_KMAJOR:
            b = b_desc.load([off_n, off_k]).T  # b given as its (N, K) transpose, rows contiguous
        else:
            b = b_desc.load([off_k, off_n])
        if UPCAST:
            # Interpreter only: numpy has no bfloat16 (see matmul.py).
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    return acc


@triton.jit
def _store_tile(c_desc, acc, off_m, off_n, BLOCK_N: tl.constexpr, SPLIT_STORE: tl.constexpr):
    """Store ``acc`` in ``c``'s dtype; in two column halves when SPLIT_STORE, which halves the staging buffer
    (a 128x256 tile keeps four stages: 4 x 48 KiB + 32 KiB fits Hopper's 227 KiB, a whole tile would not)."""
    if SPLIT_STORE:
        halves = tl.permute(tl.reshape(acc, (acc.shape[0], 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([off_m, off_n], left.to(c_desc.dtype))
        c_desc.store([off_m, off_n + BLOCK_N // 2], right.to(c_desc.dtype))
    else:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def _matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, INPUT_PRECISION: tl.constexpr, B_KMAJOR: tl.constexpr,
                       UPCAST: tl.constexpr, SPLIT_STORE: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = _tile_product(a_desc, b_desc, off_m, off_n, K, INPUT_PRECISION, B_KMAJOR, UPCAST, BLOCK_M, BLOCK_N, BLOCK_K)
    _store_tile(c_desc, acc, off_m, off_n, BLOCK_N, SPLIT_STORE)


@triton.jit
def _matmul_tma_persistent_kernel(a_desc, b_desc, c_desc, M, N, K, INPUT_PRECISION: tl.constexpr,
                                  B_KMAJOR: tl.constexpr, UPCAST: tl.constexpr, SPLIT_STORE: tl.constexpr,
                                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                  GROUP_M: tl.constexpr, PROGRAMS: tl.constexpr, FLATTEN: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = _tile_product(a_desc, b_desc, off_m, off_n, K, INPUT_PRECISION, B_KMAJOR, UPCAST,
                            BLOCK_M, BLOCK_N, BLOCK_K)
        _store_tile(c_desc, acc, off_m, off_n, BLOCK_N, SPLIT_STORE)


def eligible(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether TMA can address the operands: ``a`` and ``out`` row-major, ``b`` row-major or K-major, base
    addresses and leading strides multiples of 16 bytes."""
    size = a.element_size()
    if a.stride(1) != 1 or out.stride(1) != 1:
        return False
    if b.stride(1) == 1:
        b_lead = b.stride(0)
    elif b.stride(0) == 1:
        b_lead = b.stride(1)
    else:
        return False
    return all(t.data_ptr() % _ALIGN_BYTES == 0 for t in (a, b, out)) and all(
        stride * size % _ALIGN_BYTES == 0 for stride in (a.stride(0), b_lead, out.stride(0)))


def split_store(tile: Tile) -> bool:
    """Store in halves where a whole tile's staging buffer would not fit beside the pipeline."""
    return tile.block_n >= 256 or tile.num_stages >= 4


def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, input_precision: str, tile: Tile,
           *, programs: int, upcast: bool = False) -> None:
    """Launch the TMA kernel ``tile.kind`` for ``out = a @ b`` (operands checked by the caller); ``programs``:
    the persistent kernel's (the SM count); ``upcast``: interpreter only, bf16 loads widened to fp32."""
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk = tile.block_m, tile.block_n, tile.block_k
    split = split_store(tile)
    a_desc = TensorDescriptor(a, [M, K], [a.stride(0), 1], [bm, bk])
    kmajor = b.stride(1) != 1
    if kmajor:
        b_desc = TensorDescriptor(b.t(), [N, K], [b.stride(1), 1], [bn, bk])
    else:
        b_desc = TensorDescriptor(b, [K, N], [b.stride(0), 1], [bk, bn])
    c_desc = TensorDescriptor(out, [M, N], [out.stride(0), 1], [bm, bn // 2 if split else bn])
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    common: dict[str, str | int | bool] = {"INPUT_PRECISION": input_precision, "B_KMAJOR": kmajor, "UPCAST": upcast,
                              "SPLIT_STORE": split, **tile.blocks, "num_stages": tile.num_stages,
                              "num_warps": tile.num_warps}
    if tile.kind == TMA_PERSISTENT:
        # PROGRAMS, the loop's stride, is fixed per GPU (one compile for every shape); the grid shrinks to the tiles.
        grid = (max(1, min(programs, tiles)),)
        _matmul_tma_persistent_kernel[grid](a_desc, b_desc, c_desc, M, N, K, PROGRAMS=programs, FLATTEN=True,
                                            **common)
    else:
        _matmul_tma_kernel[(tiles,)](a_desc, b_desc, c_desc, M, N, K, **common)
