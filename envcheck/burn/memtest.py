"""The memory test: memtest86 / DCGM's patterns over one buffer of most of the free memory, all written before any is
read back (walking ones and zeros, each word's address, seeded random), chunk by chunk; every wrong word located,
consecutive ones as a range. ``read`` is the read-back seam."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.model.burn import BitErrorRange

if TYPE_CHECKING:
    from torch import Tensor

PATTERNS = ("walking_ones", "walking_zeros", "address", "random")
WORD_BYTES = 4
CHUNK_WORDS = 1 << 24  # 64 MiB of int32 per chunk: its temporaries (about 5 chunks) fit in the 10% left free
MAX_RANGES = 256  # ranges kept per test; the bit count covers all


@dataclass(frozen=True)
class Found:
    ranges: tuple[BitErrorRange, ...]
    bits: int


def _chunks(words: int, chunk: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, words, chunk):
        yield lo, min(words, lo + chunk)


def _as_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def sub_patterns(name: str) -> list[tuple[str, int]]:
    """The writes of one pattern: (pattern, argument), 32 for the walking ones and zeros."""
    if name in ("walking_ones", "walking_zeros"):
        return [(name, b) for b in range(32)]
    return [(name, 0)]


def expected(torch: ModuleType, name: str, arg: int, lo: int, hi: int, device: object, seed: int) -> Tensor:
    """The int32 words pattern ``name`` puts at word indices [lo, hi)."""
    n = hi - lo
    if name == "walking_ones":
        return torch.full((n,), _as_int32(1 << arg), dtype=torch.int32, device=device)
    if name == "walking_zeros":
        return torch.full((n,), _as_int32(~(1 << arg)), dtype=torch.int32, device=device)
    if name == "address":
        # The low 32 bits of each word's index: unique within every 16 GiB window.
        return (torch.arange(lo, hi, dtype=torch.int64, device=device) & 0xFFFFFFFF).to(torch.int32)
    if name == "random":
        g = torch.Generator(device=device).manual_seed(seed * 1_000_003 + lo)
        return torch.randint(-(1 << 31), (1 << 31) - 1, (n,), dtype=torch.int32, device=device, generator=g)
    raise ValueError(f"unknown memory test pattern {name!r}")


def _popcount(torch: ModuleType, x: Tensor) -> int:
    x = x.to(torch.int64) & 0xFFFFFFFF
    return sum(int(((x >> b) & 1).sum()) for b in range(32))


def _ranges(torch: ModuleType, wrong: Tensor, xor: Tensor, base: int, lo: int, pattern: str, pass_index: int,
            budget: int) -> list[BitErrorRange]:
    """Consecutive wrong word indices (sorted, in the chunk from word ``lo``) as address ranges; at most ``budget``."""
    idx = wrong.tolist()
    out: list[BitErrorRange] = []
    start = prev = idx[0]
    for i in [*idx[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        sel = xor[start - lo:prev - lo + 1]
        sel = sel[sel != 0]
        out.append(BitErrorRange(pattern, pass_index, base + start * WORD_BYTES, base + (prev + 1) * WORD_BYTES,
                                 int(sel.numel()), _popcount(torch, sel)))
        if len(out) >= budget or i is None:
            break
        start = prev = i
    return out


def check_pattern(torch: ModuleType, buf: Tensor, name: str, arg: int, seed: int, pass_index: int,
                  read: Callable[[Tensor], Tensor] = lambda t: t, chunk: int = CHUNK_WORDS,
                  budget: int = MAX_RANGES) -> Found:
    """Write pattern (``name``, ``arg``) over all of ``buf`` (int32), then read it all back."""
    words = buf.numel()
    for lo, hi in _chunks(words, chunk):
        buf[lo:hi].copy_(expected(torch, name, arg, lo, hi, buf.device, seed))
    base = int(buf.data_ptr())
    ranges: list[BitErrorRange] = []
    bits = 0
    for lo, hi in _chunks(words, chunk):
        got = read(buf[lo:hi])
        xor = torch.bitwise_xor(got, expected(torch, name, arg, lo, hi, buf.device, seed))
        bad = xor != 0
        if bool(bad.any()):
            wrong = bad.nonzero().flatten() + lo
            bits += _popcount(torch, xor[bad])
            if len(ranges) < budget:
                ranges += _ranges(torch, wrong, xor, base, lo, name, pass_index, budget - len(ranges))
    return Found(tuple(ranges), bits)
